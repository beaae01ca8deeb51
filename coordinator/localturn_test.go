package coordinator

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/baton-dev/baton/llm"
	"github.com/baton-dev/baton/store"
	"github.com/baton-dev/baton/subagent"
)

// localFake is fakeModel that says it answers every request itself (LocalModel).
type localFake struct{ *fakeModel }

func (localFake) AnswersLocally(*llm.Request) bool { return true }

// TestLocalTurnsNotJournaled: a run whose model answers itself (the MCP agent tool's
// stand-in: a call of the agent, then its result as the answer) journals the agent's call
// and the run's start and end, but no model_call step; the same run on a model that calls
// a provider journals both of its turns.
func TestLocalTurnsNotJournaled(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name       string
		local      bool
		modelCalls int
	}{{"local", true, 0}, {"provider", false, 2}} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			fm := &fakeModel{turn: func(req *llm.Request) []llm.Delta {
				for _, m := range req.Messages {
					if m.Role == llm.RoleTool {
						return []llm.Delta{{Text: m.Content}, {Done: &llm.Completion{FinishReason: llm.FinishStop}}}
					}
				}
				return []llm.Delta{{ToolCall: &llm.ToolCallDelta{ID: "c1", Name: "research", Arguments: `{"prompt":"work"}`}},
					{Done: &llm.Completion{FinishReason: llm.FinishToolCalls}}}
			}}
			var model llm.Model = fm
			if tc.local {
				model = localFake{fm}
			}
			st, err := store.Open(context.Background(), "memory:")
			require.NoError(t, err)
			t.Cleanup(func() { _ = st.Close() })
			agent := &fakeAgent{send: finalResult(subagent.StateCompleted, "done")}
			e := newEngine(t, model, agent, func(c *Config) { c.Store = st })
			r, err := e.StartRun(context.Background(), input("local-"+tc.name), "")
			require.NoError(t, err)
			collect(t, r)
			assert.Equal(t, string(OutcomeCompleted), r.EndReason())
			steps, err := st.Steps(context.Background(), "local-"+tc.name, 0, 0)
			require.NoError(t, err)
			kinds := map[string]int{}
			for _, s := range steps {
				kinds[s.Kind]++
				assert.NotEqual(t, store.StepPending, s.Outcome, "step %s %s left pending", s.Kind, s.Target)
			}
			assert.Equal(t, tc.modelCalls, kinds[store.StepModelCall], "model_call steps: %v", kinds)
			assert.Equal(t, 1, kinds[store.StepA2ASend], "the agent's call is journaled: %v", kinds)
			assert.Equal(t, 1, kinds[store.StepRunEnd], "%v", kinds)
			assert.Equal(t, 2, fm.calls, "both turns streamed")
		})
	}
}
