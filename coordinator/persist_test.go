package coordinator

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/baton-dev/baton/a2a"
	"github.com/baton-dev/baton/llm"
	"github.com/baton-dev/baton/store"
)

// TestRunRecordedInStore: a run's record, event log, thread messages and downstream work
// reach the store by the time its stream ends.
func TestRunRecordedInStore(t *testing.T) {
	ctx := context.Background()
	agent := &fakeAgent{send: finalResult(a2a.StateCompleted, "agent says hi")}
	e := newEngine(t, &fakeModel{turn: callThenReport("research", `{"prompt":"go"}`)}, agent)
	r, err := e.Start(input("t"), "alice")
	require.NoError(t, err)
	evs := collect(t, r)
	st := e.Store()

	th, err := st.GetThread(ctx, "t")
	require.NoError(t, err)
	assert.Equal(t, "alice", th.Owner)
	assert.Equal(t, "hello", th.Title)
	assert.Equal(t, "r-t", th.LastRunID)

	run, err := st.GetRun(ctx, "t", "r-t")
	require.NoError(t, err)
	assert.Equal(t, "completed", run.State)
	var work runWork
	require.NoError(t, json.Unmarshal(run.Work, &work))
	require.Len(t, work.A2A, 1)
	assert.Equal(t, "research", work.A2A[0].Agent)
	assert.Equal(t, "task-1", work.A2A[0].TaskID)
	assert.Equal(t, string(a2a.StateCompleted), work.A2A[0].State)

	logged, err := st.Events(ctx, "t", "r-t", 0, 0)
	require.NoError(t, err)
	require.Len(t, logged, len(evs), "every event is in the log")
	for i, ev := range logged {
		assert.Equal(t, int64(i+1), ev.Seq)
		assert.Contains(t, string(ev.Data), `"type":"`+string(evs[i].EventType())+`"`)
	}

	msgs, err := st.LoadMessages(ctx, "t")
	require.NoError(t, err)
	var roles []string
	for _, m := range msgs {
		var v struct {
			Role string `json:"role"`
		}
		require.NoError(t, json.Unmarshal(m.Data, &v))
		roles = append(roles, v.Role)
	}
	assert.Equal(t, []string{"user", "assistant", "tool", "assistant"}, roles, "the question, the delegation call, its result and the answer")

	// The thread is free for its next run, and is alice's on a restart too.
	e2, err := New(Config{Model: &fakeModel{turn: func(*llm.Request) []llm.Delta { return nil }}, Store: st})
	require.NoError(t, err)
	in := input("t")
	in.RunID = "r2"
	_, err = e2.Start(in, "mallory")
	require.ErrorIs(t, err, ErrForbidden)
	_, err = st.ActiveRun(ctx, "t")
	require.ErrorIs(t, err, store.ErrNotFound, "the refused start recorded no run")
}
