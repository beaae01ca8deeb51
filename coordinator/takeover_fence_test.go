package coordinator

import (
	"context"
	"encoding/json"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/baton-dev/baton/durable"
	"github.com/baton-dev/baton/llm"
	"github.com/baton-dev/baton/mcpclient"
	"github.com/baton-dev/baton/store"
)

// retakenJournal is a store on which a third replica takes every running run over just
// after the replica taking a run over read its predecessor's pending steps: that replica
// is stale before it marks them in doubt, as one paused there past its lease is.
type retakenJournal struct {
	store.Store
	took   atomic.Int32
	marked chan error
}

func (s *retakenJournal) PendingSteps(ctx context.Context, threadID, runID string) ([]store.Step, error) {
	steps, err := s.Store.PendingSteps(ctx, threadID, runID)
	if err == nil && s.took.Add(1) == 1 {
		if _, err := s.Store.TakeOverRuns(ctx, "replica-third", time.Minute, 10, true); err != nil {
			return nil, err
		}
	}
	return steps, err
}

func (s *retakenJournal) MarkInDoubt(ctx context.Context, threadID, runID string, epoch int64, seqs []int64, detail string) (int, error) {
	n, err := s.Store.MarkInDoubt(ctx, threadID, runID, epoch, seqs, detail)
	select {
	case s.marked <- err:
	default:
	}
	return n, err
}

// TestTakeOverFencedInDoubt: a replica that took a run over and lost it to a third one
// before marking its predecessor's pending steps in doubt has the mark refused: the
// steps stay pending for the run's current owner, and nothing is sent from here.
func TestTakeOverFencedInDoubt(t *testing.T) {
	ctx := context.Background()
	st, err := store.Open(ctx, "memory:")
	require.NoError(t, err)
	t.Cleanup(func() { _ = st.Close() })
	conv := []llm.Message{{Role: llm.RoleUser, Content: "hello"}, {Role: llm.RoleAssistant, ToolCalls: []llm.ToolCall{
		{ID: "c-read", Name: "fs__read", Arguments: `{}`},
	}}}
	deadRun(t, st, "jf", conv, durable.Work{MCP: []durable.Call{{ToolCallID: "c-read", Tool: "fs__read", Idempotent: true, State: "started"}}})
	runID := input("jf").RunID
	require.NoError(t, st.RecordStep(ctx, &store.Step{ThreadID: "jf", RunID: runID, Kind: store.StepToolCall,
		Target: "fs__read", Ref: "c-read", Replica: "replica-dead"}))
	var sent atomic.Int32
	tools := &fakeTools{
		tools: []mcpclient.Tool{{Name: "fs__read", Server: "fs", ToolName: "read", Idempotent: true, InputSchema: map[string]any{"type": "object"}}},
		status: func(name string, _ json.RawMessage) mcpclient.Result {
			sent.Add(1)
			return mcpclient.Result{Status: mcpclient.StatusOK, Tool: name, Server: "fs"}
		},
	}
	model := &fakeModel{turn: func(*llm.Request) []llm.Delta {
		return []llm.Delta{{Text: "done"}, {Done: &llm.Completion{FinishReason: "stop"}}}
	}}
	rs := &retakenJournal{Store: st, marked: make(chan error, 1)}
	e := newStartedEngine(t, Config{Model: model, Tools: tools, Store: rs, Heartbeat: 20 * time.Millisecond, Lease: time.Second, Replica: "replica-new"})
	var marked error
	select {
	case marked = <-rs.marked:
	case <-time.After(20 * time.Second):
		t.Fatal("the run was not taken over")
	}
	// The run was registered here before the mark; it stops here on the refusal.
	require.Eventually(t, func() bool {
		e.mu.Lock()
		defer e.mu.Unlock()
		return e.active["jf"] == nil
	}, 20*time.Second, 5*time.Millisecond, "the stale replica's run did not stop")
	require.NoError(t, e.Stop(context.Background()))

	require.ErrorIs(t, marked, store.ErrFenced, "the stale replica's mark is refused")
	pending, err := st.PendingSteps(ctx, "jf", runID)
	require.NoError(t, err)
	require.Len(t, pending, 1, "the step stays pending for the run's current owner")
	assert.Equal(t, "replica-dead", pending[0].Replica)
	assert.Zero(t, sent.Load(), "nothing is sent by the stale replica")
	rec, err := st.GetRun(ctx, "jf", runID)
	require.NoError(t, err)
	assert.Equal(t, "replica-third", rec.Replica)
	assert.Equal(t, store.RunRunning, rec.State, "the run is its current owner's to end")
}
