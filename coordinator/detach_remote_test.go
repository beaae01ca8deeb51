package coordinator

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Under detach, a client that follows the run through another replica (an engine on the
// same store that does not execute the run) holds it past the owner's grace; once that
// follower goes, the owner cancels the run after the grace, downstream included.
func TestDetachHeldByRemoteFollower(t *testing.T) {
	f := startDetachFixture(t, DisconnectDetach, 50*time.Millisecond)
	other := newEngine(t, &fakeModel{}, &fakeAgent{}, func(c *Config) {
		c.Store = f.e.cfg.Store
		c.OnDisconnect = DisconnectDetach
		c.Heartbeat = time.Second // the watch holds 3 s: no renewal race on a loaded machine
	})
	release := other.Attach(f.r.ThreadID, f.r.RunID)
	f.r.Stream().ClientGone(ErrClientGone)

	// Many graces pass while the follower streams elsewhere: the run goes on.
	time.Sleep(500 * time.Millisecond)
	select {
	case <-f.r.Done():
		t.Fatalf("the run ended although a client followed it on another replica: %s", f.r.EndReason())
	default:
	}
	assert.Empty(t, f.agent.cancelled(), "CancelTask for a followed run")

	release()
	release() // safe twice
	assert.Equal(t, "cancelled: client disconnected", f.waitDone(t))
	assert.Equal(t, []string{"slow-1"}, f.agent.cancelled())
}

// A follower on another replica of a run that is not running holds nothing and starts no
// renewal.
func TestDetachRemoteFollowerOfEndedRun(t *testing.T) {
	f := startDetachFixture(t, DisconnectDetach, time.Hour)
	close(f.finish)
	f.waitDone(t)
	other := newEngine(t, &fakeModel{}, &fakeAgent{}, func(c *Config) {
		c.Store = f.e.cfg.Store
		c.OnDisconnect = DisconnectDetach
	})
	release := other.Attach(f.r.ThreadID, f.r.RunID)
	release()
	left, err := f.e.cfg.Store.RunHeldFor(t.Context(), f.r.ThreadID, f.r.RunID)
	require.NoError(t, err)
	assert.LessOrEqual(t, left, time.Duration(0))
}
