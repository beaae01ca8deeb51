package integration

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestA2ATasksSurviveRestart: the coordinator serving A2A is killed (SIGKILL) with one
// task completed and one waiting for an answer; started again on the same SQLite store,
// it answers GetTask (state, question, the answer rebuilt from the run's event log),
// SubscribeToTask and ListTasks for both, and the waiting task takes its answer and
// completes.
func TestA2ATasksSurviveRestart(t *testing.T) {
	t.Parallel()
	requirePeers(t)
	peer := startA2APeerEnv(t)
	model := startA2AModel(t)
	db := filepath.Join(t.TempDir(), "baton.db")
	cfg := testConfig{LLMURL: model.URL, Store: "sqlite:" + db, InputRequired: "ask_user",
		Agents: []agentEntry{{Name: "peer", URL: peer, InputRequired: "ask_user"}}}.yaml() + a2aServerYAML("inner-baton")
	coord := startHITLCoordinator(t, cfg)
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()

	c := newA2AClient(t, coord.URL, "jsonrpc")
	done := streamA2A(ctx, c, userMessage("peer: complete"), nil)
	require.NoError(t, done.Err)
	require.Equal(t, a2a.TaskStateCompleted, done.state(), "states %v", done.States)
	asking := streamA2A(ctx, c, userMessage("peer: input"), nil)
	require.NoError(t, asking.Err)
	require.Equal(t, a2a.TaskStateInputRequired, asking.state(), "states %v", asking.States)

	coord.kill(t)
	coord.restart(t)
	c = newA2AClient(t, coord.URL, "rest")

	got, err := c.GetTask(ctx, &a2a.GetTaskRequest{ID: done.TaskID})
	require.NoError(t, err)
	assert.Equal(t, a2a.TaskStateCompleted, got.Status.State)
	assert.Equal(t, modelDoneText, taskArtifactText(got), "the answer, stored with the end")
	var again a2aRun
	for ev, err := range c.SubscribeToTask(ctx, &a2a.SubscribeToTaskRequest{ID: done.TaskID}) {
		require.NoError(t, err)
		again.add(ev)
	}
	assert.Equal(t, a2a.TaskStateCompleted, again.state(), "subscribed after the restart: %v", again.States)

	waiting, err := c.GetTask(ctx, &a2a.GetTaskRequest{ID: asking.TaskID})
	require.NoError(t, err)
	require.Equal(t, a2a.TaskStateInputRequired, waiting.Status.State)
	assert.Contains(t, statusText(&waiting.Status), "what colour?")
	list, err := c.ListTasks(ctx, &a2a.ListTasksRequest{})
	require.NoError(t, err)
	var ids []a2a.TaskID
	for _, tk := range list.Tasks {
		ids = append(ids, tk.ID)
	}
	assert.ElementsMatch(t, []a2a.TaskID{done.TaskID, asking.TaskID}, ids)

	answer := a2a.NewMessageForTask(a2a.MessageRoleUser, &a2a.Task{ID: asking.TaskID, ContextID: asking.ContextID}, a2a.NewTextPart("blue"))
	r := streamA2A(ctx, c, answer, nil)
	require.NoError(t, r.Err)
	assert.Equal(t, a2a.TaskStateCompleted, r.state(), "answered after the restart: %v", r.States)
}
