package coordinator

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/baton-dev/baton/cancel"
	"github.com/baton-dev/baton/store"
	"github.com/baton-dev/baton/subagent"
)

// heldHeartbeats is a store whose heartbeats wait while held: the replica cannot renew
// its leases, as when it is paused or cut off from the store, while every other write
// goes through.
type heldHeartbeats struct {
	store.Store
	mu   sync.Mutex
	gate chan struct{}
}

func (s *heldHeartbeats) hold() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.gate = make(chan struct{})
}

func (s *heldHeartbeats) release() {
	s.mu.Lock()
	defer s.mu.Unlock()
	close(s.gate)
	s.gate = nil
}

func (s *heldHeartbeats) HeartbeatRuns(ctx context.Context, replica string, lease time.Duration) ([]store.RunRef, error) {
	s.mu.Lock()
	g := s.gate
	s.mu.Unlock()
	if g != nil {
		select {
		case <-g:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	return s.Store.HeartbeatRuns(ctx, replica, lease)
}

// TestClientGoneAtStaleOwnerCancelsNothing: a replica whose lease lapsed (it could not
// renew it) and whose run another replica took over learns of its client's disconnect
// before it learns of the takeover. The task the new owner follows must not be cancelled:
// the cancel waits for the lease, and is not sent once the lease is known lost.
func TestClientGoneAtStaleOwnerCancelsNothing(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	mem, err := store.Open(ctx, "memory:")
	require.NoError(t, err)
	st := &heldHeartbeats{Store: mem}
	started := make(chan struct{})
	agent := &fakeAgent{send: func(ctx context.Context, req subagent.Request, obs subagent.Observer) (*subagent.Result, error) {
		obs.Task("task-1", "ctx-1")
		close(started)
		<-ctx.Done()
		return nil, ctx.Err()
	}}
	e := newEngine(t, &fakeModel{turn: callThenReport("research", `{"prompt":"slow"}`)}, agent, func(c *Config) {
		c.Store = st
		c.Replica = "replica-a"
		c.Lease = time.Second
		c.Heartbeat = 100 * time.Millisecond
	})
	r, err := e.StartRun(context.Background(), input("stale"), "")
	require.NoError(t, err)
	select {
	case <-started:
	case <-time.After(10 * time.Second):
		t.Fatal("the delegation never started")
	}

	// What the run wrote so far is stored (a write refused after the takeover would tell
	// it of the takeover first). Then the replica stalls and another takes the run over.
	require.NoError(t, r.elog.Flush(ctx))
	st.hold()
	held := time.Now()
	took, err := mem.TakeOverRuns(ctx, "replica-b", time.Minute, 10, true)
	require.NoError(t, err)
	require.Len(t, took, 1)
	// No renewal sent from here on is acknowledged, so the lease ends at the latest one
	// lease after the hold: past that, this replica cannot be sure that it owns the run.
	time.Sleep(time.Until(held.Add(e.cfg.Lease + 50*time.Millisecond)))
	// The client's disconnect arrives first; then the heartbeat, which tells of the takeover.
	r.Cancel(ErrClientGone)
	st.release()
	select {
	case <-r.Done():
	case <-time.After(20 * time.Second):
		t.Fatal("the stale owner's run did not stop")
	}

	assert.Empty(t, agent.cancelled(), "the stale owner cancelled the task its new owner follows")
	reps := r.Cancellations()
	require.Len(t, reps, 1)
	assert.Equal(t, cancel.KindA2ATask, reps[0].Kind)
	assert.Equal(t, "task-1", reps[0].ID)
	assert.Equal(t, cancel.ResultMoved, reps[0].Result)
	rec, err := mem.GetRun(ctx, "stale", "r-stale")
	require.NoError(t, err)
	assert.Equal(t, "replica-b", rec.Replica)
	assert.Equal(t, store.RunRunning, rec.State, "the run is its new owner's to end")
}
