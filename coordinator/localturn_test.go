package coordinator

import (
	"context"
	"sync/atomic"
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

// countingRuns is a memory store that counts ThreadRuns, the read of a thread's earlier
// runs.
type countingRuns struct {
	store.Store
	reads atomic.Int32
}

func (s *countingRuns) ThreadRuns(ctx context.Context, threadID string, limit int) ([]store.RunRecord, error) {
	s.reads.Add(1)
	return s.Store.ThreadRuns(ctx, threadID, limit)
}

// TestNewThreadReadsNoPast: a delegation on a thread started with NewThread (an MCP tool
// call's) makes its A2A context without reading the thread's earlier runs; without the
// option the first delegation reads them, and so does a later run of the new thread (only
// the run whose start made the thread knows it was new).
func TestNewThreadReadsNoPast(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name  string
		fresh bool
		reads int32
	}{{"new", true, 0}, {"unknown", false, 1}} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			mem, err := store.Open(context.Background(), "memory:")
			require.NoError(t, err)
			t.Cleanup(func() { _ = mem.Close() })
			st := &countingRuns{Store: mem}
			model := &fakeModel{turn: func(req *llm.Request) []llm.Delta {
				if last := req.Messages[len(req.Messages)-1]; last.Role == llm.RoleTool {
					return []llm.Delta{{Text: "ok"}, {Done: &llm.Completion{FinishReason: llm.FinishStop}}}
				}
				return []llm.Delta{{ToolCall: &llm.ToolCallDelta{ID: "c-" + newID("x"), Name: "research", Arguments: `{"prompt":"work"}`}},
					{Done: &llm.Completion{FinishReason: llm.FinishToolCalls}}}
			}}
			agent := &fakeAgent{send: finalResult(subagent.StateCompleted, "done")}
			e := newEngine(t, model, agent, func(c *Config) { c.Store = st })
			in := input("fresh-" + tc.name)
			r, err := e.StartRun(context.Background(), in, "", NewThread(tc.fresh))
			require.NoError(t, err)
			collect(t, r)
			assert.Equal(t, tc.reads, st.reads.Load(), "reads of the thread's earlier runs")
			agent.mu.Lock()
			require.Len(t, agent.sent, 1)
			assert.NotEmpty(t, agent.sent[0].ContextID, "the call has a context")
			agent.mu.Unlock()

			// The engine forgets the thread (as after an eviction); its next run reads the past.
			e.mu.Lock()
			th := e.threads[in.ThreadID]
			e.mu.Unlock()
			require.NotNil(t, th)
			e.mu.Lock()
			assert.False(t, th.fresh, "new for its first run only")
			e.mu.Unlock()
			e.forgetThread(in.ThreadID, th)
			next := input("fresh-" + tc.name)
			next.RunID = "r2-" + tc.name
			r, err = e.StartRun(context.Background(), next, "")
			require.NoError(t, err)
			collect(t, r)
			assert.Equal(t, tc.reads+1, st.reads.Load(), "a later run reads the thread's earlier runs")
		})
	}
}
