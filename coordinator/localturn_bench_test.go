package coordinator

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/baton-dev/baton/llm"
	"github.com/baton-dev/baton/store"
	"github.com/baton-dev/baton/subagent"
)

// BenchmarkNewThreadContext: what a thread's first delegation costs to find its A2A
// context, on SQLite, for a thread whose only run is the current one (an MCP agent tool's):
// read the thread's earlier runs and their work documents (past), or not (new: the start
// said the thread was new, NewThread).
//
//	go test -run '^$' -bench BenchmarkNewThreadContext -benchmem ./coordinator/
func BenchmarkNewThreadContext(b *testing.B) {
	ctx := context.Background()
	st, err := store.Open(ctx, "sqlite:"+filepath.Join(b.TempDir(), "baton.db"))
	require.NoError(b, err)
	b.Cleanup(func() { _ = st.Close() })
	model := &fakeModel{turn: func(req *llm.Request) []llm.Delta {
		if last := req.Messages[len(req.Messages)-1]; last.Role == llm.RoleTool {
			return []llm.Delta{{Text: "ok"}, {Done: &llm.Completion{FinishReason: llm.FinishStop}}}
		}
		return []llm.Delta{{ToolCall: &llm.ToolCallDelta{ID: "c1", Name: "research", Arguments: `{"prompt":"work"}`}},
			{Done: &llm.Completion{FinishReason: llm.FinishToolCalls}}}
	}}
	agent := &fakeAgent{send: finalResult(subagent.StateCompleted, "done")}
	cfg := Config{Model: model, Store: st, Agents: []Agent{{Name: "research", Description: "Researches.", Client: agent}}}
	e := newStartedEngine(b, cfg)
	in := input("bench-thread")
	r, err := e.StartRun(ctx, in, "")
	require.NoError(b, err)
	<-r.Done()
	for _, tc := range []struct {
		name  string
		fresh bool
	}{{"past", false}, {"new", true}} {
		b.Run(tc.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				// A thread entry as its start makes it, with no context yet.
				e.mu.Lock()
				e.threads[in.ThreadID] = &thread{owner: "", fresh: tc.fresh}
				e.mu.Unlock()
				e.tasks.drop(in.ThreadID)
				e.tasks.open(in.ThreadID)
				_, release := threadContext(ctx, e, in.ThreadID, "research")
				release()
			}
		})
	}
}
