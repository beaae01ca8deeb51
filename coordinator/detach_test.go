package coordinator

import (
	"context"
	"encoding/json"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/baton-dev/baton/store"
	"github.com/baton-dev/baton/subagent"
)

// detachFixture starts a run whose delegation to a fake agent streams until finish is
// closed (the agent then completes the task) or the run is cancelled. It returns once the
// agent has named its task, so that a cancellation has a task to cancel.
type detachFixture struct {
	e      *Engine
	r      *Run
	agent  *fakeAgent
	finish chan struct{}
}

func startDetachFixture(t *testing.T, policy DisconnectPolicy, grace time.Duration) *detachFixture {
	t.Helper()
	f := &detachFixture{finish: make(chan struct{})}
	named := make(chan struct{})
	var once sync.Once
	f.agent = &fakeAgent{send: func(ctx context.Context, req subagent.Request, obs subagent.Observer) (*subagent.Result, error) {
		obs.Task("slow-1", "ctx-1")
		once.Do(func() { close(named) })
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-f.finish:
			return &subagent.Result{State: subagent.StateCompleted, TaskID: "slow-1", ContextID: "ctx-1", Text: "done"}, nil
		}
	}}
	f.e = newEngine(t, &fakeModel{turn: callThenReport("research", `{"prompt":"slow"}`)}, f.agent, func(c *Config) {
		c.OnDisconnect = policy
		c.ReconnectGrace = grace
	})
	r, err := f.e.StartRun(context.Background(), input("t"), "")
	require.NoError(t, err)
	f.r = r
	select {
	case <-named:
	case <-time.After(20 * time.Second):
		t.Fatal("the agent never got the delegation")
	}
	return f
}

// waitDone waits for the run to end and returns its end reason.
func (f *detachFixture) waitDone(t *testing.T) string {
	t.Helper()
	select {
	case <-f.r.Done():
	case <-time.After(20 * time.Second):
		t.Fatal("the run did not end")
	}
	return f.r.EndReason()
}

// loggedTypes returns the types of the run's events in the store's event log.
func (f *detachFixture) loggedTypes(t *testing.T) []string {
	t.Helper()
	evs, err := f.e.cfg.Store.Events(context.Background(), f.r.ThreadID, f.r.RunID, 0, store.MaxEventsRead)
	require.NoError(t, err)
	var out []string
	for _, ev := range evs {
		var le struct {
			Type string `json:"type"`
		}
		require.NoError(t, json.Unmarshal(ev.Data, &le))
		out = append(out, le.Type)
	}
	return out
}

// Under cancel, a client gone cancels the run at once, downstream included, and a
// reconnect stream changes nothing.
func TestClientGoneCancelMode(t *testing.T) {
	f := startDetachFixture(t, DisconnectCancel, time.Hour)
	release := f.e.Attach(f.r.ThreadID, f.r.RunID)
	release()
	f.r.Stream().ClientGone(ErrClientGone)
	assert.Equal(t, "cancelled: client disconnected", f.waitDone(t))
	assert.Equal(t, []string{"slow-1"}, f.agent.cancelled())
}

// Under detach, a client gone leaves the run going: it completes, nothing is cancelled,
// and its event log holds the whole stream for a reconnect.
func TestClientGoneDetachRunCompletes(t *testing.T) {
	f := startDetachFixture(t, DisconnectDetach, time.Hour)
	f.r.Stream().ClientGone(ErrClientGone)
	f.r.Stream().ClientGone(ErrClientTooSlow) // a second report of the same stream is ignored
	close(f.finish)
	reason := f.waitDone(t)
	assert.False(t, strings.HasPrefix(reason, "cancelled"), "the detached run was cancelled: %s", reason)
	assert.Empty(t, f.agent.cancelled(), "CancelTask sent for a detached run")
	typ := f.loggedTypes(t)
	require.NotEmpty(t, typ)
	assert.Equal(t, "RUN_STARTED", typ[0])
	assert.Equal(t, "RUN_FINISHED", typ[len(typ)-1])
	assert.Contains(t, typ, "TOOL_CALL_RESULT")
}

// Under detach, nobody reconnecting within the grace cancels the run exactly as a
// cancel-mode disconnect does.
func TestClientGoneDetachGraceExpires(t *testing.T) {
	f := startDetachFixture(t, DisconnectDetach, 10*time.Millisecond)
	f.r.Stream().ClientGone(ErrClientTooSlow)
	assert.Equal(t, "cancelled: client disconnected: it did not keep up with the stream", f.waitDone(t))
	assert.Equal(t, []string{"slow-1"}, f.agent.cancelled())
}

// A reconnect stops the grace timer; the end of the last reconnect stream starts it again,
// and when it runs out the run is cancelled.
func TestReconnectHoldsDetachedRun(t *testing.T) {
	f := startDetachFixture(t, DisconnectDetach, time.Hour)
	f.r.Stream().ClientGone(ErrClientGone)
	w := &f.r.stream.attached
	w.mu.Lock()
	require.NotNil(t, w.timer, "no grace timer after the client went")
	w.mu.Unlock()

	first := f.e.Attach(f.r.ThreadID, f.r.RunID)
	second := f.e.Attach(f.r.ThreadID, f.r.RunID)
	w.mu.Lock()
	assert.Nil(t, w.timer, "a reconnect left the grace timer running")
	assert.Equal(t, 2, w.n)
	w.mu.Unlock()
	first()
	first() // idempotent
	w.mu.Lock()
	assert.Nil(t, w.timer, "the grace started while a reconnect stream still watches")
	assert.Equal(t, 1, w.n)
	w.mu.Unlock()
	assert.Empty(t, f.agent.cancelled())

	// The last watcher goes: the grace (now short) starts again and runs out.
	f.e.cfg.ReconnectGrace = 10 * time.Millisecond
	second()
	assert.Equal(t, "cancelled: client disconnected", f.waitDone(t))
	assert.Equal(t, []string{"slow-1"}, f.agent.cancelled())
	// Attaching to a run that has ended is harmless.
	f.e.Attach(f.r.ThreadID, f.r.RunID)()
}

// The stop endpoint cancels a detached run at once, whatever its grace.
func TestStopCancelsDetachedRun(t *testing.T) {
	f := startDetachFixture(t, DisconnectDetach, time.Hour)
	f.r.Stream().ClientGone(ErrClientGone)
	require.NoError(t, f.e.StopRun(f.r.ThreadID, f.r.RunID, ""))
	assert.Equal(t, "cancelled: stop requested", f.waitDone(t))
	assert.Equal(t, []string{"slow-1"}, f.agent.cancelled())
}

// A client that falls behind the stream buffer is not dropped: the run goes on and
// completes, nothing is cancelled, and what the live queue released is read back from the
// event log (Backlog), every event once and in order.
func TestSlowClientContinuesFromTheLog(t *testing.T) {
	f := &detachFixture{finish: make(chan struct{})}
	named := make(chan struct{})
	f.agent = &fakeAgent{send: func(ctx context.Context, req subagent.Request, obs subagent.Observer) (*subagent.Result, error) {
		obs.Task("slow-1", "ctx-1")
		close(named)
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-f.finish:
			return &subagent.Result{State: subagent.StateCompleted, TaskID: "slow-1", ContextID: "ctx-1", Text: "done"}, nil
		}
	}}
	f.e = newEngine(t, &fakeModel{turn: callThenReport("research", `{"prompt":"slow"}`)}, f.agent, func(c *Config) {
		c.OnDisconnect = DisconnectDetach
		c.ReconnectGrace = time.Hour
		c.StreamBufferBytes = 1 // every event nobody took releases the one before
	})
	r, err := f.e.StartRun(context.Background(), input("t"), "")
	require.NoError(t, err)
	f.r = r
	<-named
	close(f.finish)
	reason := f.waitDone(t)
	assert.False(t, strings.HasPrefix(reason, "cancelled"), "the run of a slow client was cancelled: %s", reason)
	assert.Empty(t, f.agent.cancelled())
	typ := f.loggedTypes(t)
	assert.Equal(t, "RUN_FINISHED", typ[len(typ)-1])

	first, live, ended := r.Stream().NextFrom()
	require.True(t, ended)
	require.Len(t, live, 1, "the live queue holds only the terminal event")
	require.Greater(t, first, int64(1), "the earlier events were released")
	back, err := r.Stream().Backlog(context.Background(), 0, first-1, 1000)
	require.NoError(t, err)
	require.Len(t, back, int(first-1), "the log has every released event")
	for i, ev := range back {
		assert.Equal(t, int64(i+1), ev.Seq)
	}
}
