package coordinator

import (
	"context"
	"encoding/json"
	"log/slog"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/baton-dev/baton/durable"
	"github.com/baton-dev/baton/llm"
	"github.com/baton-dev/baton/store"
)

// TestReapLostRunCancelsItsTask: a run of a replica that died, marked lost when a new run
// started on its thread, is reaped by the heartbeat through the engine (Engine.Renewed, Engine.CancelWork): its
// running A2A task is cancelled at its agent (a finished one is not) and its log ends with
// RUN_LOST; a second reap cancels nothing more.
func TestReapLostRunCancelsItsTask(t *testing.T) {
	ctx := context.Background()
	agent := &fakeAgent{}
	e := newEngine(t, &fakeModel{turn: func(*llm.Request) []llm.Delta { return nil }}, agent)
	st := e.cfg.Store
	_, err := st.ClaimThread(ctx, "t", "alice", "")
	require.NoError(t, err)
	require.NoError(t, begun(st.BeginRun(ctx, "t", "r1", "dead-replica", -time.Second)))
	require.NoError(t, st.SaveRunWork(ctx, "t", "r1", 1, json.RawMessage(
		`{"a2a":[{"agent":"research","taskId":"task-live","state":"working"},{"agent":"research","taskId":"task-done","state":"completed"}],"mcp":[]}`)))
	require.NoError(t, begun(st.BeginRun(ctx, "t", "r2", "other-replica", time.Minute)), "the new run marks r1 lost")

	hb := durable.NewHeartbeat(durable.HeartbeatConfig{Store: st, Replica: e.cfg.Replica, Lease: time.Minute,
		Every: time.Hour, Runs: e, Logger: slog.New(slog.DiscardHandler)})
	assert.Equal(t, 1, hb.Reap(ctx))
	assert.Equal(t, []string{"task-live"}, agent.cancelled())
	evs, err := st.Events(ctx, "t", "r1", 0, 0)
	require.NoError(t, err)
	require.Len(t, evs, 2, "RUN_STARTED, then RUN_ERROR")
	assert.Contains(t, string(evs[1].Data), `"code":"RUN_LOST"`)
	rec, err := st.GetRun(ctx, "t", "r1")
	require.NoError(t, err)
	assert.Equal(t, store.RunLost, rec.State, "its record stays lost: its thread went on")
	var work durable.Work
	require.NoError(t, json.Unmarshal(rec.Work, &work))
	for _, task := range work.A2A {
		assert.Contains(t, []string{"canceled", "TASK_STATE_CANCELED", "completed"}, task.State, "%s recorded as ended", task.TaskID)
	}

	assert.Zero(t, hb.Reap(ctx))
	assert.Len(t, agent.cancelled(), 1, "a reaped run is cleaned up once")
}
