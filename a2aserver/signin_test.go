package a2aserver

import (
	"context"
	"encoding/json"
	"sync"
	"testing"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/a2aproject/a2a-go/v2/a2aclient"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/baton-dev/baton/agui"
)

// fakeSignIns is signed in to the servers the test marks.
type fakeSignIns struct {
	mu    sync.Mutex
	done  map[string]bool // principal + " " + server
	polls int
}

func (f *fakeSignIns) SignedIn(_ context.Context, principal, server string) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.polls++
	return f.done[principal+" "+server]
}

func (f *fakeSignIns) polled() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.polls
}

func (f *fakeSignIns) signIn(principal, server string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.done[principal+" "+server] = true
}

// untilAuthRequired streams m until the task is auth-required (the stream stays open
// after it: the state is not final) and returns the task id and that status.
func untilAuthRequired(t *testing.T, c *a2aclient.Client, m *a2a.Message) (a2a.TaskID, a2a.TaskStatus) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var id a2a.TaskID
	for ev, err := range c.SendStreamingMessage(ctx, &a2a.SendMessageRequest{Message: m}) {
		require.NoError(t, err)
		switch v := ev.(type) {
		case *a2a.Task:
			id = v.ID
		case *a2a.TaskStatusUpdateEvent:
			id = v.TaskID
			require.NotEqual(t, a2a.TaskStateInputRequired, v.Status.State, "a sign-in is auth-required when it is watched")
			if v.Status.State == a2a.TaskStateAuthRequired {
				return id, v.Status
			}
		}
	}
	t.Fatal("the stream ended before auth-required")
	return "", a2a.TaskStatus{}
}

func waitState(t *testing.T, c *a2aclient.Client, id a2a.TaskID, want a2a.TaskState) *a2a.Task {
	t.Helper()
	var got *a2a.Task
	require.EventuallyWithT(t, func(ct *assert.CollectT) {
		task, err := c.GetTask(context.Background(), &a2a.GetTaskRequest{ID: id})
		if assert.NoError(ct, err) {
			got = task
			assert.Equal(ct, want, task.Status.State)
		}
	}, 10*time.Second, 20*time.Millisecond)
	return got
}

// TestSignInAuthRequired: a run that waits only for a sign-in puts its task in
// auth-required, with the question and the URL; once the principal has signed in the run
// is resumed (the parked call accepted) without any message from the caller, and the task
// completes. A CancelTask while it waits withdraws the question (resumed as cancelled).
// Without SignIns the same run is input-required, answered by a message.
func TestSignInAuthRequired(t *testing.T) {
	t.Parallel()
	si := &fakeSignIns{done: map[string]bool{}}
	e, base := serveWith(t, si)
	c := client(t, base, "alice", "jsonrpc")

	id, st := untilAuthRequired(t, c, msg("signin now"))
	assert.Contains(t, text(st), "Sign in at https://as.example/authorize?state=s")
	var q map[string]any
	for _, p := range st.Message.Parts {
		if d, ok := p.Data().(map[string]any); ok {
			q = d
		}
	}
	assert.Equal(t, "int-s", q["interruptId"])
	assert.Equal(t, reasonMCPAuthorization, q["reason"])
	assert.Equal(t, "sec", q["server"])

	// Bob signing in changes nothing for alice's task.
	si.signIn("bob", "sec")
	polls := si.polled()
	require.Eventually(t, func() bool { return si.polled() >= polls+2 }, 10*time.Second, 10*time.Millisecond)
	e.mu.Lock()
	assert.Empty(t, e.resumes, "not resumed for another principal's sign-in")
	e.mu.Unlock()

	si.signIn("alice", "sec")
	done := waitState(t, c, id, a2a.TaskStateCompleted)
	assert.Contains(t, taskText(done), "answer was", "the resumed run's answer")
	e.mu.Lock()
	require.Len(t, e.resumes, 1)
	assert.Equal(t, "int-s", e.resumes[0][0].InterruptID)
	assert.Equal(t, agui.ResumeResolved, e.resumes[0][0].Status)
	assert.JSONEq(t, `{"action":"accept"}`, string(e.resumes[0][0].Payload))
	e.mu.Unlock()

	t.Run("cancel while waiting", func(t *testing.T) {
		c := client(t, base, "carol", "rest")
		id, _ := untilAuthRequired(t, c, msg("signin again"))
		task, err := c.CancelTask(context.Background(), &a2a.CancelTaskRequest{ID: id})
		require.NoError(t, err)
		assert.Equal(t, a2a.TaskStateCanceled, task.Status.State)
		e.mu.Lock()
		defer e.mu.Unlock()
		require.Len(t, e.resumes, 2)
		assert.Equal(t, agui.ResumeCancelled, e.resumes[1][0].Status, "the question is withdrawn")
	})

	t.Run("without SignIns a sign-in is input-required", func(t *testing.T) {
		_, base := serve(t)
		got := stream(t, client(t, base, "alice", "jsonrpc"), msg("signin now"))
		assert.Equal(t, a2a.TaskStateInputRequired, got.last.State)
	})
}

func taskText(t *a2a.Task) string {
	var out string
	for _, a := range t.Artifacts {
		for _, p := range a.Parts {
			out += p.Text()
		}
	}
	b, _ := json.Marshal(t.Status.Message)
	return out + string(b)
}
