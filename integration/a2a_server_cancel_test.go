package integration

import (
	"context"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/baton-dev/baton/internal/testutil/benchagent"
	"github.com/baton-dev/baton/internal/testutil/pgtest"
)

// TestA2ACancelElsewhereNamesUnconfirmed: two replicas serving A2A on one PostgreSQL
// store; a task runs on one, delegated to an agent that refuses every CancelTask. A
// CancelTask sent to the other replica answers canceled with a status message naming the
// downstream task whose cancel was not confirmed (as the running replica's answer does),
// once the cancel horizon has passed; the agent did get the CancelTask calls.
func TestA2ACancelElsewhereNamesUnconfirmed(t *testing.T) {
	t.Parallel()
	requirePeers(t)
	dsn := pgtest.DSN(t)
	srv := httptest.NewUnstartedServer(nil)
	srv.Start()
	t.Cleanup(srv.Close)
	agent := benchagent.New(srv.URL, benchagent.Options{Hold: true, FailCancels: 1 << 20})
	srv.Config.Handler = agent
	t.Cleanup(agent.Release)
	model := startA2AModel(t)
	cfg := testConfig{LLMURL: model.URL, Store: dsn, InputRequired: "ask_user",
		Agents: []agentEntry{{Name: "peer", URL: srv.URL, InputRequired: "ask_user"}}}.yaml() + a2aServerYAML("inner-baton")
	cfg = strings.Replace(cfg, "limits:\n", "limits:\n  cancel_horizon: 3s\n", 1)
	a := newA2AClient(t, startCoordinator(t, cfg), "jsonrpc")
	b := newA2AClient(t, startCoordinator(t, cfg), "rest")
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()

	res, err := a.SendMessage(ctx, &a2a.SendMessageRequest{Message: userMessage("peer: slow"), Config: &a2a.SendMessageConfig{ReturnImmediately: true}})
	require.NoError(t, err)
	task, ok := res.(*a2a.Task)
	require.True(t, ok, "a task: %T", res)
	require.Eventually(t, func() bool {
		n, _ := agent.Counts()
		return n == 1
	}, eventualWait, 20*time.Millisecond, "the run delegated to the agent")

	canceled, err := b.CancelTask(ctx, &a2a.CancelTaskRequest{ID: task.ID})
	require.NoError(t, err)
	assert.Equal(t, a2a.TaskStateCanceled, canceled.Status.State)
	msg := statusText(&canceled.Status)
	assert.Contains(t, msg, "not confirmed", "status message: %q", msg)
	assert.Contains(t, msg, "peer task t-1", "status message: %q", msg)
	_, cancelledAtAgent := agent.Counts()
	assert.Zero(t, cancelledAtAgent, "the agent refused every cancel")
	got, err := a.GetTask(ctx, &a2a.GetTaskRequest{ID: task.ID})
	require.NoError(t, err)
	assert.Equal(t, a2a.TaskStateCanceled, got.Status.State)
}
