package a2aserver

import (
	"context"
	"errors"
	"log/slog"
	"testing"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/a2aproject/a2a-go/v2/a2asrv"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/baton-dev/baton/agui"
	"github.com/baton-dev/baton/internal/principal"
	"github.com/baton-dev/baton/store"
)

// TestCancelNamesCancelsOfAgentsGone: CancelTask on a task whose run ended before (it was
// stopped, then the process restarted without one of its agents) names the downstream
// cancels that cannot be confirmed because their agent is no longer configured here: one
// still recorded as pending (nothing here retries it, so it is not waited for, though the
// horizon is long) and one whose pending record the restart dropped (the run's work names
// the task, neither terminal nor journaled). A confirmed one (a configured agent, nothing
// pending), a failed one (journaled) and a task that had ended are not named as such.
func TestCancelNamesCancelsOfAgentsGone(t *testing.T) {
	t.Parallel()
	ctx, stop := context.WithTimeout(context.Background(), 30*time.Second)
	defer stop()
	st, err := store.Open(ctx, "memory:")
	require.NoError(t, err)
	t.Cleanup(func() { _ = st.Close() })
	const thread, run = "th-gone", "a2a-gone"
	_, err = st.ClaimThread(ctx, thread, "alice", "")
	require.NoError(t, err)
	epoch, err := st.BeginRun(ctx, thread, run, "rep", time.Minute)
	require.NoError(t, err)
	work := `{"a2a":[` +
		`{"agent":"research","taskId":"t-ok","state":"working"},` +
		`{"agent":"travel","taskId":"t-bad","state":"working"},` +
		`{"agent":"maps","taskId":"t-gone","state":"working"},` +
		`{"agent":"old","taskId":"t-lost","state":"input-required"},` +
		`{"agent":"old","taskId":"t-fin","state":"completed"}]}`
	require.NoError(t, st.SaveRunWork(ctx, thread, run, epoch, []byte(work)))
	require.NoError(t, st.SavePendingCancel(ctx, store.PendingCancel{Agent: "maps", TaskID: "t-gone", Since: time.Now()}))
	require.NoError(t, st.RecordStep(ctx, &store.Step{ThreadID: thread, RunID: run, Kind: store.StepCancel, Target: "travel",
		Ref: "t-bad", Outcome: store.StepError, Detail: "a2a_task failed"}))
	require.NoError(t, st.EndRun(ctx, thread, run, epoch, "cancelled"))

	e := &fakeEngine{runs: map[string]*fakeRun{}, owners: map[string]string{}, stopErr: errors.New("the run has finished")}
	// The horizon is far beyond the test's deadline: a cancel that cannot be confirmed is
	// not waited for.
	x := newExecutor(e, portOver(t, st, func(name string) bool { return name == "research" || name == "travel" }), 10*time.Minute, slog.Default())
	task := &a2a.Task{ID: "task-gone", ContextID: thread, Status: a2a.TaskStatus{State: a2a.TaskStateWorking},
		Metadata: taskMeta(thread, run, nil)}
	ec := &a2asrv.ExecutorContext{TaskID: task.ID, ContextID: thread, StoredTask: task,
		User: a2asrv.NewAuthenticatedUser(userName("alice"), map[string]any{principalAttr: "alice"})}
	var evs []a2a.Event
	for ev, err := range x.Cancel(ctx, ec) {
		require.NoError(t, err)
		evs = append(evs, ev)
	}
	require.NoError(t, ctx.Err(), "answered before the test's deadline, without waiting for the horizon")
	require.Len(t, evs, 1)
	ev, ok := evs[0].(*a2a.TaskStatusUpdateEvent)
	require.True(t, ok, "%T", evs[0])
	assert.Equal(t, a2a.TaskStateCanceled, ev.Status.State)
	got := text(ev.Status)
	assert.Contains(t, got, "a2a_task maps task t-gone (cannot be confirmed: the agent is no longer configured)")
	assert.Contains(t, got, "a2a_task old task t-lost (cannot be confirmed: the agent is no longer configured)")
	assert.Contains(t, got, "a2a_task travel task t-bad (failed)")
	assert.NotContains(t, got, "t-ok")
	assert.NotContains(t, got, "t-fin")
}

// TestStoppedRunEndNamesCancelsOfAgentsGone: a task whose run was stopped and whose
// execution is gone (the process restarted without one of the run's agents) reads as
// canceled, naming the downstream cancel that cannot be confirmed (its agent is no longer
// configured) and the one still being retried, instead of a bare "stopped".
func TestStoppedRunEndNamesCancelsOfAgentsGone(t *testing.T) {
	t.Parallel()
	ctx, stop := context.WithTimeout(principal.With(context.Background(), "alice"), 30*time.Second)
	defer stop()
	st, err := store.Open(ctx, "memory:")
	require.NoError(t, err)
	t.Cleanup(func() { _ = st.Close() })
	const thread, run = "th-stopped", "a2a-stopped"
	logged := logTo(st, thread, run, "alice")
	rec, err := st.GetRun(ctx, thread, run)
	require.NoError(t, err)
	work := `{"a2a":[{"agent":"maps","taskId":"t-gone","state":"working"},{"agent":"research","taskId":"t-retried","state":"working"}]}`
	require.NoError(t, st.SaveRunWork(ctx, thread, run, rec.Epoch, []byte(work)))
	require.NoError(t, st.SavePendingCancel(ctx, store.PendingCancel{Agent: "research", TaskID: "t-retried", Since: time.Now()}))
	logged(1, &agui.RunStarted{ThreadID: thread, RunID: run})
	logged(2, &agui.RunFinished{ThreadID: thread, RunID: run, Outcome: &agui.Outcome{Type: "cancelled"}})

	// The task as its execution last stored it: working.
	before := newTaskStore(portOver(t, st, nil), portOver(t, st, nil), time.Hour)
	task := &a2a.Task{ID: "task-stopped", ContextID: thread, Status: a2a.TaskStatus{State: a2a.TaskStateWorking},
		Metadata: taskMeta(thread, run, nil)}
	_, err = before.Create(ctx, task)
	require.NoError(t, err)

	port := portOver(t, st, func(name string) bool { return name == "research" })
	after := newTaskStore(port, port, time.Hour)
	got, err := after.Get(ctx, task.ID)
	require.NoError(t, err)
	assert.Equal(t, a2a.TaskStateCanceled, got.Task.Status.State)
	msg := text(got.Task.Status)
	assert.Contains(t, msg, "a2a_task maps task t-gone (cannot be confirmed: the agent is no longer configured)")
	assert.Contains(t, msg, "a2a_task research task t-retried (not confirmed yet: still being retried)")
}
