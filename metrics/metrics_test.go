package metrics

import (
	"bufio"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// scrape GETs the handler and returns every sample as "name{labels}" → value.
func scrape(t *testing.T, m *Metrics) map[string]float64 {
	t.Helper()
	rec := httptest.NewRecorder()
	m.Handler().ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/metrics", nil))
	require.Equal(t, http.StatusOK, rec.Code)
	require.Contains(t, rec.Header().Get("Content-Type"), "text/plain")
	return parseSamples(t, rec.Body)
}

func parseSamples(t *testing.T, r io.Reader) map[string]float64 {
	t.Helper()
	out := map[string]float64{}
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		line := sc.Text()
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		i := strings.LastIndexByte(line, ' ')
		require.Positive(t, i, "sample line %q", line)
		v, err := strconv.ParseFloat(line[i+1:], 64)
		require.NoError(t, err, "sample line %q", line)
		out[line[:i]] = v
	}
	require.NoError(t, sc.Err())
	return out
}

func TestRunFinished(t *testing.T) {
	t.Parallel()
	tests := []struct {
		outcome string
		label   string
	}{
		{"completed", "completed"},
		{"cancelled", "cancelled"},
		{"error", "error"},
		{"stopped", "stopped"},
		{"interrupt", "interrupt"},
		{"handoff", "handoff"},
		// The outcome is a typed value: a reason with detail is not one, and is not parsed.
		{"cancelled: client disconnected", Other},
		{"Cancelled", Other},
		{"something new", Other},
		{"", Other},
	}
	for _, tt := range tests {
		t.Run(tt.outcome, func(t *testing.T) {
			m := New()
			before := scrape(t, m)
			m.RunFinished(tt.outcome)
			after := scrape(t, m)
			key := `baton_runs_total{outcome="` + tt.label + `"}`
			assert.Equal(t, before[key]+1, after[key])
			for _, o := range append(RunOutcomes, Other) {
				if o != tt.label {
					k := `baton_runs_total{outcome="` + o + `"}`
					assert.Equal(t, before[k], after[k], "outcome %s must not change", o)
				}
			}
		})
	}
}

func TestToolLabel(t *testing.T) {
	t.Parallel()
	tests := []struct {
		tag, code, want string
	}{
		{"COMPLETED", "", "COMPLETED"},
		{"INPUT_REQUIRED", "", "INPUT_REQUIRED"},
		{"TIMEOUT", "", "TIMEOUT"},
		{"RETRY", "validation_failed", "RETRY:validation_failed"},
		{"RETRY", "tool_error", "RETRY:tool_error"},
		{"RETRY", "made_up", Other},
		{"RETRY", "", Other},
		{"OK", "ignored", "OK"},
		// Rendered results are not parsed back: only tags are labels.
		{"[COMPLETED]\nthe answer", "", Other},
		{"RETRY:tool_error", "", Other},
		{"plain text", "", Other},
		{"", "", Other},
	}
	for _, tt := range tests {
		t.Run(tt.tag+"/"+tt.code, func(t *testing.T) {
			assert.Equal(t, tt.want, ToolLabel(tt.tag, tt.code))
		})
	}
}

func TestRecorders(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name   string
		record func(m *Metrics)
		// want maps sample keys to their expected increase.
		want map[string]float64
	}{
		{
			name: "tool result keeps the retry code",
			record: func(m *Metrics) {
				m.ToolResult("RETRY", "validation_failed")
				m.ToolResult("INPUT_REQUIRED", "")
			},
			want: map[string]float64{
				`baton_tool_results_total{tag="RETRY:validation_failed"}`: 1,
				`baton_tool_results_total{tag="INPUT_REQUIRED"}`:          1,
			},
		},
		{
			name: "task states in both spellings",
			record: func(m *Metrics) {
				m.A2ATaskState("input-required")
				m.A2ATaskState("TASK_STATE_INPUT_REQUIRED")
				m.A2ATaskState("cancelled")
				m.A2ATaskState("bogus")
			},
			want: map[string]float64{
				`baton_a2a_task_states_total{state="input-required"}`: 2,
				`baton_a2a_task_states_total{state="canceled"}`:       1,
				`baton_a2a_task_states_total{state="other"}`:          1,
			},
		},
		{
			name: "cancellations count and observe latency",
			record: func(m *Metrics) {
				m.Cancellation("cancelled", 3*time.Millisecond)
				m.Cancellation("ok", 40*time.Millisecond)
				m.Cancellation("no_task_id", 5*time.Second)
				m.Cancellation("failed", time.Millisecond)
				m.Cancellation("error", time.Millisecond)
				m.Cancellation("exploded", time.Millisecond)
			},
			want: map[string]float64{
				`baton_cancellations_total{result="cancelled"}`:                            2,
				`baton_cancellations_total{result="no_task_id"}`:                           1,
				`baton_cancellations_total{result="failed"}`:                               2,
				`baton_cancellations_total{result="other"}`:                                1,
				`baton_cancellation_latency_seconds_count{result="cancelled"}`:             2,
				`baton_cancellation_latency_seconds_bucket{result="cancelled",le="0.005"}`: 1,
				`baton_cancellation_latency_seconds_bucket{result="cancelled",le="0.05"}`:  2,
				`baton_cancellation_latency_seconds_sum{result="cancelled"}`:               0.043,
				`baton_cancellation_latency_seconds_count{result="no_task_id"}`:            1,
				`baton_cancellation_latency_seconds_bucket{result="no_task_id",le="5"}`:    1,
			},
		},
		{
			name:   "open interrupts go up and down",
			record: func(m *Metrics) { m.InterruptsOpen(2); m.InterruptsOpen(-1) },
			want:   map[string]float64{`baton_interrupts_open`: 1},
		},
		{
			name: "retries by kind",
			record: func(m *Metrics) {
				m.Retry("transient_provider")
				m.Retry("tool_error")
				m.Retry("tool_error")
				m.Retry("?")
			},
			want: map[string]float64{
				`baton_retries_total{kind="transient_provider"}`: 1,
				`baton_retries_total{kind="tool_error"}`:         2,
				`baton_retries_total{kind="other"}`:              1,
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := New()
			before := scrape(t, m)
			tt.record(m)
			after := scrape(t, m)
			for k, inc := range tt.want {
				_, present := before[k]
				require.True(t, present, "%s must exist before any event", k)
				assert.InDelta(t, before[k]+inc, after[k], 1e-9, k)
			}
		})
	}
}

func TestKnownSeriesStartAtZero(t *testing.T) {
	t.Parallel()
	got := scrape(t, New())
	for _, k := range []string{
		`baton_runs_total{outcome="completed"}`,
		`baton_runs_total{outcome="cancelled"}`,
		`baton_tool_results_total{tag="COMPLETED"}`,
		`baton_tool_results_total{tag="RETRY:tool_error"}`,
		`baton_a2a_task_states_total{state="completed"}`,
		`baton_cancellations_total{result="cancelled"}`,
		`baton_retries_total{kind="transient_provider"}`,
		`baton_interrupts_open`,
	} {
		v, ok := got[k]
		if assert.True(t, ok, "missing %s", k) {
			assert.Zero(t, v, k)
		}
	}
	// The registry is private: two instances count independently.
	a, b := New(), New()
	a.RunFinished("completed")
	assert.Equal(t, 1.0, scrape(t, a)[`baton_runs_total{outcome="completed"}`])
	assert.Equal(t, 0.0, scrape(t, b)[`baton_runs_total{outcome="completed"}`])
}

func TestNilMetricsIsNoop(t *testing.T) {
	t.Parallel()
	var m *Metrics
	assert.NotPanics(t, func() {
		m.RunFinished("completed")
		m.ToolResult("OK", "")
		m.A2ATaskState("completed")
		m.Cancellation("ok", time.Millisecond)
		m.InterruptsOpen(1)
		m.Retry("tool_error")
	})
	rec := httptest.NewRecorder()
	m.Handler().ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/metrics", nil))
	assert.Equal(t, http.StatusNotFound, rec.Code)
}
