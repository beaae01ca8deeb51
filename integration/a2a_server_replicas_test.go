package integration

import (
	"context"
	"testing"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/baton-dev/baton/internal/testutil/pgtest"
)

// TestA2ATasksOnReplicas: two replicas serving A2A on one PostgreSQL store. A task sent
// to one is read on the other (GetTask with its answer, ListTasks); a running task is
// followed on the other (SubscribeToTask) and cancelled there: CancelTask answers
// canceled only once the peer's task is cancelled (confirmed through the owner), and the
// follower ends canceled.
func TestA2ATasksOnReplicas(t *testing.T) {
	t.Parallel()
	requirePeers(t)
	dsn := pgtest.DSN(t)
	peer := startA2APeerEnv(t)
	model := startA2AModel(t)
	cfg := testConfig{LLMURL: model.URL, Store: dsn, InputRequired: "ask_user",
		Agents: []agentEntry{{Name: "peer", URL: peer, InputRequired: "ask_user"}}}.yaml() + a2aServerYAML("inner-baton")
	a := newA2AClient(t, startCoordinator(t, cfg), "jsonrpc")
	b := newA2AClient(t, startCoordinator(t, cfg), "rest")
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()

	done := streamA2A(ctx, a, userMessage("peer: complete"), nil)
	require.NoError(t, done.Err)
	require.Equal(t, a2a.TaskStateCompleted, done.state(), "states %v", done.States)
	got, err := b.GetTask(ctx, &a2a.GetTaskRequest{ID: done.TaskID})
	require.NoError(t, err)
	assert.Equal(t, a2a.TaskStateCompleted, got.Status.State)
	assert.Equal(t, modelDoneText, taskArtifactText(got), "the answer")
	list, err := b.ListTasks(ctx, &a2a.ListTasksRequest{ContextID: done.ContextID})
	require.NoError(t, err)
	require.Len(t, list.Tasks, 1)
	assert.Equal(t, done.TaskID, list.Tasks[0].ID)

	before, _ := peerTasks(t, peer)
	res, err := a.SendMessage(ctx, &a2a.SendMessageRequest{Message: userMessage("peer: slow"), Config: &a2a.SendMessageConfig{ReturnImmediately: true}})
	require.NoError(t, err)
	task, ok := res.(*a2a.Task)
	require.True(t, ok, "a task: %T", res)
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		tasks, _ := peerTasks(c, peer)
		assert.Len(c, newKeys(before, tasks), 1)
	}, eventualWait, 50*time.Millisecond)

	followed := make(chan a2aRun, 1)
	subscribed := make(chan struct{})
	go func() {
		var r a2aRun
		for ev, err := range b.SubscribeToTask(ctx, &a2a.SubscribeToTaskRequest{ID: task.ID}) {
			if err != nil {
				r.Err = err
				break
			}
			if _, first := ev.(*a2a.Task); first && r.TaskID == "" {
				close(subscribed)
			}
			r.add(ev)
		}
		followed <- r
	}()
	select {
	case <-subscribed:
	case <-ctx.Done():
		t.Fatal("SubscribeToTask on the other replica gave no task")
	}

	canceled, err := b.CancelTask(ctx, &a2a.CancelTaskRequest{ID: task.ID})
	require.NoError(t, err)
	assert.Equal(t, a2a.TaskStateCanceled, canceled.Status.State)
	tasks, cancelled := peerTasks(t, peer)
	ids := newKeys(before, tasks)
	require.Len(t, ids, 1)
	assert.Equal(t, "TASK_STATE_CANCELED", tasks[ids[0]], "canceled only after the peer's task was")
	assert.True(t, cancelled[ids[0]], "the peer got CancelTask")

	r := <-followed
	require.NoError(t, r.Err)
	assert.False(t, r.States[0].Terminal(), "the follower saw the task before its end: %v", r.States)
	assert.Equal(t, a2a.TaskStateCanceled, r.state(), "the follower ends canceled: %v", r.States)
	got, err = a.GetTask(ctx, &a2a.GetTaskRequest{ID: task.ID})
	require.NoError(t, err)
	assert.Equal(t, a2a.TaskStateCanceled, got.Status.State)
}
