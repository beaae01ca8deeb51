package coordinator

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/baton-dev/baton/durable"
)

// TestNotContinuedEndsAsError: the state the takeover gives the record of a run it could
// not continue (durable.RunError) is the engine's error outcome.
func TestNotContinuedEndsAsError(t *testing.T) {
	assert.Equal(t, string(OutcomeError), durable.RunError)
}

// The outcome travels as a typed field: a detail that itself holds a colon or an outcome
// word changes neither the stored state nor the rendered reason's head.
func TestEndReasonTyped(t *testing.T) {
	tests := []struct {
		reason EndReason
		text   string
		stored string
	}{
		{ended(OutcomeCompleted, ""), "completed", "completed"},
		{ended(OutcomeCancelled, "client disconnected"), "cancelled: client disconnected", "cancelled"},
		{ended(OutcomeHandoff, "error: store"), "handoff: error: store", "handoff"},
		{ended(OutcomeInterrupt, "loop_detected"), "interrupt: loop_detected", "interrupt"},
		{EndReason{}, "", "ended"},
	}
	for _, tt := range tests {
		assert.Equal(t, tt.text, tt.reason.String())
		assert.Equal(t, tt.stored, storedRunState(tt.reason))
	}
}

// runMetrics records the outcomes the engine reports.
type runMetrics struct {
	mu       sync.Mutex
	outcomes []string
}

func (m *runMetrics) RunFinished(outcome string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.outcomes = append(m.outcomes, outcome)
}
func (m *runMetrics) ToolResult(string, string)          {}
func (m *runMetrics) A2ATaskState(string)                {}
func (m *runMetrics) Cancellation(string, time.Duration) {}
func (m *runMetrics) InterruptsOpen(int)                 {}
func (m *runMetrics) Retry(string)                       {}

// The run-outcome metric gets the typed outcome itself, with no detail to strip: a run
// that ends completed, and one handed off on the second no_progress strike (two text
// replies to refused calls).
func TestRunOutcomeMetricIsTyped(t *testing.T) {
	for _, tt := range []struct {
		name  string
		steps []turnStep
		want  string
	}{
		{"completed", []turnStep{textStep("hi")}, "completed"},
		{"handoff", []turnStep{
			callStep("c1", "research", `{"task":"x"}`), textStep("no"),
			callStep("c2", "research", `{"task":"y"}`), textStep("still no"),
		}, "handoff"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			m := &runMetrics{}
			e := newEngine(t, &scriptModel{steps: tt.steps}, &fakeAgent{}, func(c *Config) { c.Metrics = m })
			r, err := e.StartRun(context.Background(), input("metric-"+tt.name), "")
			require.NoError(t, err)
			collect(t, r)
			<-r.Done()
			m.mu.Lock()
			defer m.mu.Unlock()
			assert.Equal(t, []string{tt.want}, m.outcomes)
		})
	}
}
