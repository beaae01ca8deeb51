package coordinator

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/baton-dev/baton/agui"
	"github.com/baton-dev/baton/history"
	"github.com/baton-dev/baton/internal/config"
	"github.com/baton-dev/baton/internal/testutil/fakellm"
	"github.com/baton-dev/baton/llm"
	"github.com/baton-dev/baton/llm/openai"
	"github.com/baton-dev/baton/spend"
	"github.com/baton-dev/baton/store"
	"github.com/baton-dev/baton/subagent"
)

// TestSummaryCallIsMetered: the compaction's summary call goes through the run's spend
// meter like any model call: its usage is in the thread's and the principal's totals, and
// in a model_call step of its own (target "summary") in the journal.
func TestSummaryCallIsMetered(t *testing.T) {
	t.Parallel()
	summaryUsage := llm.Usage{InputTokens: 5000, OutputTokens: 700}
	turnUsage := llm.Usage{InputTokens: 100, OutputTokens: 10}
	var mu sync.Mutex
	step := 0
	srv := fakellm.Start(fakellm.WithWindow(20000, func(req fakellm.Request) fakellm.Reply {
		mu.Lock()
		defer mu.Unlock()
		if strings.HasPrefix(req.Messages[0].Content, "You maintain the memory") {
			return fakellm.Reply{Text: "Summary: eight research steps completed.", Usage: &summaryUsage}
		}
		step++
		if step <= 8 {
			return fakellm.Reply{ToolCalls: []llm.ToolCall{{ID: fmt.Sprintf("call_%d", step), Name: "research", Arguments: fmt.Sprintf(`{"prompt":"step %d"}`, step)}}, Usage: &turnUsage}
		}
		return fakellm.Reply{Text: "done", Usage: &turnUsage}
	}))
	t.Cleanup(srv.Close)
	tr := &http.Transport{}
	t.Cleanup(tr.CloseIdleConnections)
	model, err := openai.New(openai.Config{BaseURL: srv.URL, Model: "fake-window", HTTPClient: &http.Client{Transport: tr}})
	require.NoError(t, err)
	st, err := store.Open(context.Background(), "memory:")
	require.NoError(t, err)
	t.Cleanup(func() { _ = st.Close() })
	agent := &fakeAgent{send: func(_ context.Context, req subagent.Request, _ subagent.Observer) (*subagent.Result, error) {
		return &subagent.Result{State: subagent.StateMessage, Text: req.Prompt + ": " + strings.Repeat("finding ", 300)}, nil
	}}
	e := newEngine(t, model, agent, func(c *Config) {
		c.Store = st
		c.Spend = spend.NewMeter(spend.MeterConfig{Pricer: spend.NewPricer(config.LLM{Model: "fake-window", Prices: testPrices}), Ledger: st.(spend.Ledger)})
		c.Limits.MaxIterations = 100
		c.History = history.Options{Window: 1 << 20, KeepRecentTurns: 1}.WithDefaults()
	})
	r := mustStart(t, e, input("summary-cost"))
	evs := collect(t, r)
	require.Equal(t, agui.EventRunFinished, evs[len(evs)-1].EventType(), "events: %v", types(evs))

	var summaries, turns int
	for _, req := range srv.Requests() {
		switch {
		case strings.HasPrefix(req.Messages[0].Content, "You maintain the memory"):
			summaries++
		case req.Chars() <= 20000: // the refused request reported nothing
			turns++
		}
	}
	require.Positive(t, summaries, "the run compacted")
	want := spend.Usage{
		InputTokens:  int64(summaries*summaryUsage.InputTokens + turns*turnUsage.InputTokens),
		OutputTokens: int64(summaries*summaryUsage.OutputTokens + turns*turnUsage.OutputTokens),
	}
	_, _ = waitEnded(t, st, "summary-cost", r.RunID)
	got, err := e.cfg.Spend.ThreadUsage(context.Background(), "summary-cost")
	require.NoError(t, err)
	assert.Equal(t, want.InputTokens, got.InputTokens, "the thread's total holds the summary calls")
	assert.Equal(t, want.OutputTokens, got.OutputTokens)
	assert.InDelta(t, testPrices.Cost(want.InputTokens, want.OutputTokens), got.CostUSD, 1e-9)

	steps, err := st.Steps(context.Background(), "summary-cost", 0, 0)
	require.NoError(t, err)
	var summarySteps int
	for _, s := range steps {
		if s.Kind != store.StepModelCall || s.Target != "summary" {
			continue
		}
		summarySteps++
		var d map[string]any
		require.NoError(t, json.Unmarshal([]byte(s.Detail), &d), "detail %q", s.Detail)
		assert.Equal(t, float64(summaryUsage.InputTokens), d["inputTokens"])
		assert.Equal(t, float64(summaryUsage.OutputTokens), d["outputTokens"])
		assert.Equal(t, "ok", s.Outcome)
	}
	assert.Equal(t, summaries, summarySteps, "one model_call step per summary request")
}
