package a2aserver

import (
	"context"
	"iter"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/a2aproject/a2a-go/v2/a2aclient"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/baton-dev/baton/internal/followers"
	"github.com/baton-dev/baton/internal/principal"
)

// errorOf is how many events a stream yields before its first error, and that error (nil
// when it yields none).
func errorOf(seq iter.Seq2[a2a.Event, error]) (events int, err error) {
	for ev, e := range seq {
		if e != nil {
			return events, e
		}
		if ev != nil {
			events++
		}
	}
	return events, nil
}

// startSlow starts a task that runs until it is cancelled and waits until it works.
func startSlow(t *testing.T, c *a2aclient.Client) *a2a.Task {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	res, err := c.SendMessage(ctx, &a2a.SendMessageRequest{Message: msg("slow"), Config: &a2a.SendMessageConfig{ReturnImmediately: true}})
	require.NoError(t, err)
	task, ok := res.(*a2a.Task)
	require.True(t, ok)
	require.EventuallyWithT(t, func(c2 *assert.CollectT) {
		got, err := c.GetTask(ctx, &a2a.GetTaskRequest{ID: task.ID})
		if assert.NoError(c2, err) {
			assert.Equal(c2, a2a.TaskStateWorking, got.Status.State)
		}
	}, 5*time.Second, 10*time.Millisecond)
	return task
}

// Another principal's task answers SubscribeToTask exactly as a task that does not exist,
// also while it runs on this replica (a2asrv finds the live execution by id alone).
func TestSubscribeOnlyOwner(t *testing.T) {
	t.Parallel()
	for _, wire := range []string{"jsonrpc", "rest"} {
		t.Run(wire, func(t *testing.T) {
			t.Parallel()
			_, base := serve(t)
			alice, bob := client(t, base, "alice", wire), client(t, base, "bob", wire)
			task := startSlow(t, alice)
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()

			n, none := errorOf(bob.SubscribeToTask(ctx, &a2a.SubscribeToTaskRequest{ID: a2a.NewTaskID()}))
			require.Error(t, none)
			assert.Zero(t, n)
			assert.ErrorIs(t, none, a2a.ErrTaskNotFound)

			n, got := errorOf(bob.SubscribeToTask(ctx, &a2a.SubscribeToTaskRequest{ID: task.ID}))
			assert.Zero(t, n, "bob saw nothing of alice's task")
			require.Error(t, got, "bob may not follow alice's task")
			assert.ErrorIs(t, got, a2a.ErrTaskNotFound)
			assert.Equal(t, none.Error(), got.Error(), "the same answer as a task that does not exist")

			// Alice still follows her own task.
			sub, cancelSub := context.WithCancel(ctx)
			var first a2a.Event
			for ev, err := range alice.SubscribeToTask(sub, &a2a.SubscribeToTaskRequest{ID: task.ID}) {
				require.NoError(t, err)
				first = ev
				break
			}
			cancelSub()
			require.NotNil(t, first)

			_, err := alice.CancelTask(ctx, &a2a.CancelTaskRequest{ID: task.ID})
			require.NoError(t, err)
			n, after := errorOf(bob.SubscribeToTask(ctx, &a2a.SubscribeToTaskRequest{ID: task.ID}))
			assert.Zero(t, n)
			require.Error(t, after)
			assert.Equal(t, none.Error(), after.Error(), "after its end too")
		})
	}
}

// A message to another principal's task answers exactly as one to a task that does not
// exist, while the task runs and after it ended: no oracle for whether it is live.
func TestSendToOthersTaskIsNotFound(t *testing.T) {
	t.Parallel()
	for _, wire := range []string{"jsonrpc", "rest"} {
		t.Run(wire, func(t *testing.T) {
			t.Parallel()
			_, base := serve(t)
			alice, bob := client(t, base, "alice", wire), client(t, base, "bob", wire)
			task := startSlow(t, alice)
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			to := func(id a2a.TaskID) *a2a.SendMessageRequest {
				m := msg("hello")
				m.TaskID = id
				return &a2a.SendMessageRequest{Message: m}
			}
			_, none := bob.SendMessage(ctx, to(a2a.NewTaskID()))
			require.Error(t, none)
			assert.ErrorIs(t, none, a2a.ErrTaskNotFound)
			_, noneStream := errorOf(bob.SendStreamingMessage(ctx, to(a2a.NewTaskID())))
			require.Error(t, noneStream)

			check := func(when string) {
				_, got := bob.SendMessage(ctx, to(task.ID))
				require.Error(t, got, when)
				assert.ErrorIs(t, got, a2a.ErrTaskNotFound, when)
				assert.Equal(t, none.Error(), got.Error(), when)
				n, gotStream := errorOf(bob.SendStreamingMessage(ctx, to(task.ID)))
				assert.Zero(t, n, when)
				require.Error(t, gotStream, when)
				assert.Equal(t, noneStream.Error(), gotStream.Error(), when)
			}
			check("while it runs")
			_, err := alice.CancelTask(ctx, &a2a.CancelTaskRequest{ID: task.ID})
			require.NoError(t, err)
			check("after it ended")
		})
	}
}

// SubscribeToTask streams count toward the principal's cap of follow streams (shared with
// AG-UI's reconnect streams): beyond it a server error that says to retry; another
// principal has a cap of their own, and a stream that ends frees its place.
func TestSubscribeCappedPerPrincipal(t *testing.T) {
	t.Parallel()
	e := &fakeEngine{runs: map[string]*fakeRun{}, owners: map[string]string{}}
	follows := followers.New(1)
	s := New(Config{Engine: e, Tasks: memPort(t), Card: CardInfo{Name: "baton"}, CancelHorizon: 2 * time.Second, Followers: follows})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.ServeHTTP(w, r.WithContext(principal.With(r.Context(), r.Header.Get("X-Principal"))))
	}))
	defer srv.Close()
	defer s.Close()
	alice, bob := client(t, srv.URL, "alice", "jsonrpc"), client(t, srv.URL, "bob", "jsonrpc")
	one, two, bobs := startSlow(t, alice), startSlow(t, alice), startSlow(t, bob)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()

	// hold follows a task until its first event and keeps the stream open until the
	// returned func is called.
	hold := func(c *a2aclient.Client, id a2a.TaskID) (func(), error) {
		sub, stop := context.WithCancel(ctx)
		next, end := iter.Pull2(c.SubscribeToTask(sub, &a2a.SubscribeToTaskRequest{ID: id}))
		_, err, _ := next()
		return func() { stop(); end() }, err
	}
	closeOne, err := hold(alice, one.ID)
	require.NoError(t, err)
	_, err = hold(alice, two.ID)
	require.Error(t, err, "alice's second follow stream")
	assert.ErrorIs(t, err, a2a.ErrServerError)
	assert.Contains(t, err.Error(), "retry")
	closeBob, err := hold(bob, bobs.ID)
	require.NoError(t, err, "bob's own cap")
	closeBob()

	closeOne()
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		closeTwo, err := hold(alice, two.ID)
		defer closeTwo()
		assert.NoError(c, err)
	}, 5*time.Second, 20*time.Millisecond)
	for _, task := range []*a2a.Task{one, two} {
		_, err := alice.CancelTask(ctx, &a2a.CancelTaskRequest{ID: task.ID})
		require.NoError(t, err)
	}
	_, err = bob.CancelTask(ctx, &a2a.CancelTaskRequest{ID: bobs.ID})
	require.NoError(t, err)
}
