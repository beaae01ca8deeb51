package integration

// A CancelTask on Baton (serving A2A) whose downstream cancel is still being retried when
// the agent is removed from the configuration: Baton is killed while the cancel is pending
// and started again, on the same SQLite store, without the agent (its pending record is
// dropped at start: nothing can confirm it any more). The task then reads canceled, and its
// status message says that cancel cannot be confirmed because the agent is no longer
// configured, rather than a bare "stopped".

import (
	"context"
	"database/sql"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	_ "modernc.org/sqlite" // reads Baton's SQLite store while it runs

	"github.com/baton-dev/baton/internal/testutil/benchagent"
)

func TestNestedCancelOfRemovedAgent(t *testing.T) {
	t.Parallel()
	srv := startHeldRefusingAgent(t)
	model := startA2AModel(t)
	db := filepath.Join(t.TempDir(), "baton.db")
	with := testConfig{LLMURL: model.URL, Store: "sqlite:" + db, InputRequired: "ask_user",
		Agents: []agentEntry{{Name: "peer", URL: srv, InputRequired: "ask_user"}}}.yaml() + a2aServerYAML("inner-baton")
	// A horizon far beyond the test: the cancel stays pending until the kill.
	with = strings.Replace(with, "limits:\n", "limits:\n  cancel_horizon: 10m\n", 1)
	coord := startHITLCoordinator(t, with)
	c := newA2AClient(t, coord.URL, "jsonrpc")
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()

	res, err := c.SendMessage(ctx, &a2a.SendMessageRequest{Message: userMessage("peer: slow"), Config: &a2a.SendMessageConfig{ReturnImmediately: true}})
	require.NoError(t, err)
	task, ok := res.(*a2a.Task)
	require.True(t, ok, "a task: %T", res)
	sq, err := sql.Open("sqlite", db)
	require.NoError(t, err)
	defer sq.Close()
	count := func(query string) int {
		var n int
		if err := sq.QueryRowContext(ctx, query).Scan(&n); err != nil {
			return -1
		}
		return n
	}
	require.Eventually(t, func() bool {
		return count(`SELECT count(*) FROM runs WHERE instr(work, '"t-1"') > 0`) == 1
	}, eventualWait, 20*time.Millisecond, "the run recorded the agent's task")

	// CancelTask: the run stops, the agent refuses the cancel, which is retried (pending).
	cancelled := make(chan error, 1)
	go func() {
		_, err := c.CancelTask(ctx, &a2a.CancelTaskRequest{ID: task.ID})
		cancelled <- err
	}()
	require.Eventually(t, func() bool {
		return count(`SELECT count(*) FROM pending_cancels WHERE agent = 'peer' AND task_id = 't-1'`) == 1 &&
			count(`SELECT count(*) FROM runs WHERE instr(work, '"t-1"') > 0 AND state <> 'running'`) == 1
	}, eventualWait, 20*time.Millisecond, "the cancel is pending and the run has ended")
	select {
	case err := <-cancelled:
		t.Fatalf("CancelTask answered while its downstream cancel was pending: %v", err)
	default:
	}

	// Killed, and started again without the agent.
	coord.kill(t)
	<-cancelled // the call ended with the process
	b, err := os.ReadFile(coord.path)
	require.NoError(t, err)
	listen, _, _ := strings.Cut(string(b), "\n")
	without := testConfig{LLMURL: model.URL, Store: "sqlite:" + db, InputRequired: "ask_user"}.yaml() + a2aServerYAML("inner-baton")
	require.NoError(t, os.WriteFile(coord.path, []byte(listen+"\n"+without), 0o600))
	coord.restart(t)
	require.Eventually(t, func() bool {
		out, stderr := coord.p.Logs()
		return strings.Contains(out+stderr, "no longer configured")
	}, eventualWait, 20*time.Millisecond, "the restart read the pending cancel of the removed agent")
	c = newA2AClient(t, coord.URL, "rest")

	got, err := c.GetTask(ctx, &a2a.GetTaskRequest{ID: task.ID})
	require.NoError(t, err)
	assert.Equal(t, a2a.TaskStateCanceled, got.Status.State)
	msg := statusText(&got.Status)
	assert.Contains(t, msg, "peer task t-1 (cannot be confirmed: the agent is no longer configured)", "status message: %q", msg)

	// A CancelTask now finds the task canceled (a2asrv: not cancelable) or answers it
	// canceled with the same message.
	again, err := c.CancelTask(ctx, &a2a.CancelTaskRequest{ID: task.ID})
	if err == nil {
		assert.Equal(t, a2a.TaskStateCanceled, again.Status.State)
		assert.Contains(t, statusText(&again.Status), "no longer configured")
	} else {
		assert.ErrorIs(t, err, a2a.ErrTaskNotCancelable)
	}
}

// startHeldRefusingAgent serves an agent whose tasks run until the test ends and that
// refuses every CancelTask with an error worth retrying.
func startHeldRefusingAgent(t *testing.T) string {
	t.Helper()
	srv := httptest.NewUnstartedServer(nil)
	srv.Start()
	t.Cleanup(srv.Close)
	agent := benchagent.New(srv.URL, benchagent.Options{Hold: true, FailCancels: 1 << 20})
	srv.Config.Handler = agent
	t.Cleanup(agent.Release)
	return srv.URL
}
