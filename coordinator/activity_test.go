package coordinator

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/baton-dev/baton/agui"
	"github.com/baton-dev/baton/internal/testutil/statusflood"
	"github.com/baton-dev/baton/subagent"
)

// statusFloodStats is what one status flood run produced: the sub-agent's text events
// streamed and stored, their bytes, the last of its text, and the process's CPU time.
type statusFloodStats struct {
	live, stored           int
	liveBytes, storedBytes int
	lastLive, lastStored   string
	cpu, took              time.Duration
}

// statusFloodRun runs one delegation to an A2A agent that sends n working status updates
// (each with its own message) as fast as it can, on a new engine with a SQLite store, the
// agent's status messages paced by interval (negative: every one), and counts the
// sub-agent's text events.
func statusFloodRun(tb testing.TB, base string, n int, interval time.Duration) statusFloodStats {
	agent, err := subagent.Resolve(context.Background(), subagent.AgentConfig{Name: "statusflood", URL: base},
		subagent.Options{Logger: slog.New(slog.DiscardHandler), StatusInterval: interval})
	require.NoError(tb, err)
	defer func() { _ = agent.Close() }()
	out := runFlood(tb, Config{Model: &fakeModel{turn: callThenReport("statusflood", fmt.Sprintf(`{"prompt":"%d"}`, n))},
		Agents: []Agent{{Name: "statusflood", Description: "Floods.", Client: agent, Timeout: 5 * time.Minute}}})
	s := statusFloodStats{cpu: out.cpu, took: out.took}
	for _, ev := range out.live {
		if c, ok := ev.(*agui.TextMessageContent); ok && c.SubagentRunID != "" {
			s.live++
			b, err := json.Marshal(c)
			require.NoError(tb, err)
			s.liveBytes += len(b)
			s.lastLive = c.Delta
		}
	}
	for _, ev := range out.stored {
		var v struct {
			Type          string
			Delta         string
			SubagentRunID string
		}
		require.NoError(tb, json.Unmarshal(ev.Data, &v))
		if v.Type == string(agui.EventTextMessageContent) && v.SubagentRunID != "" {
			s.stored++
			s.storedBytes += len(ev.Data)
			s.lastStored = v.Delta
		}
	}
	return s
}

// 10,000 working status updates of one A2A task become a bounded number of stored and
// streamed sub-agent text events (one per delegation per 100 ms at most, the latest
// winning), and the last status before the task's end is delivered.
func TestStatusFloodIsCoalesced(t *testing.T) {
	const n = 10000
	s := statusFloodRun(t, statusflood.Start(t), n, 0)
	t.Logf("%d status updates: %d live / %d stored sub-agent text events, %.3f MB live / %.3f MB stored, CPU %.2f s in %.2f s",
		n, s.live, s.stored, float64(s.liveBytes)/1e6, float64(s.storedBytes)/1e6, s.cpu.Seconds(), s.took.Seconds())
	bound := int(s.took/subagent.DefaultStatusInterval) + 2
	assert.Positive(t, s.live)
	assert.LessOrEqual(t, s.live, bound, "live sub-agent text events")
	assert.LessOrEqual(t, s.stored, bound, "stored sub-agent text events")
	assert.Less(t, s.stored, n/20, "stored sub-agent text events")
	want := fmt.Sprintf("step %d of %d", n, n)
	assert.Equal(t, want, strings.TrimPrefix(s.lastLive, "\n"), "the last status is streamed")
	assert.Equal(t, want, strings.TrimPrefix(s.lastStored, "\n"), "and stored")
}

// BenchmarkStatusFlood compares one delegation's 10,000 working status updates with and
// without pacing, interleaved: sub-agent text events streamed and stored, their bytes, and
// the process's CPU time per run.
func BenchmarkStatusFlood(b *testing.B) {
	const n = 10000
	base := statusflood.Start(b)
	for _, mode := range []struct {
		name     string
		interval time.Duration
	}{{"coalesced", 0}, {"every", -1}} {
		b.Run(mode.name, func(b *testing.B) {
			var s statusFloodStats
			for b.Loop() {
				s = statusFloodRun(b, base, n, mode.interval)
			}
			b.ReportMetric(float64(s.live), "live-events")
			b.ReportMetric(float64(s.stored), "stored-events")
			b.ReportMetric(float64(s.liveBytes)/1e6, "live-MB")
			b.ReportMetric(float64(s.storedBytes)/1e6, "stored-MB")
			b.ReportMetric(s.cpu.Seconds(), "cpu-s")
		})
	}
}
