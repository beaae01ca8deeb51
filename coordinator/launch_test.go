package coordinator

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/baton-dev/baton/store"
)

// lifecycleConfig configures every background job of the engine (heartbeat, takeover,
// sweep, interrupt expiry), so that any of them started shows as a goroutine.
func lifecycleConfig(t *testing.T) Config {
	st, err := store.Open(context.Background(), "memory:")
	require.NoError(t, err)
	t.Cleanup(func() { _ = st.Close() })
	return Config{Model: &fakeModel{turn: answerTurn}, Store: st, Heartbeat: 20 * time.Millisecond,
		Lease: time.Second, ExpiryInterval: 20 * time.Millisecond, TakeOverAtStart: true}
}

// New starts no goroutine; Start starts the jobs, and Stop ends every one of them.
func TestNewStartsNothingLaunchStartsShutdownEnds(t *testing.T) {
	before := goleak.IgnoreCurrent()
	e, err := New(lifecycleConfig(t))
	require.NoError(t, err)
	goleak.VerifyNone(t, before)

	require.NoError(t, e.Start(context.Background()))
	assert.Error(t, goleak.Find(before), "the launched engine's jobs run")
	require.NoError(t, e.Start(context.Background()), "a second Start does nothing")

	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	require.NoError(t, e.Stop(ctx))
	goleak.VerifyNone(t, before)
	assert.ErrorIs(t, e.Start(context.Background()), ErrShuttingDown, "a shut-down engine is not launched again")
}

// A run on an engine not launched is refused: it would run without a heartbeat.
func TestRunBeforeLaunchRefused(t *testing.T) {
	e, err := New(lifecycleConfig(t))
	require.NoError(t, err)
	t.Cleanup(func() { _ = e.Stop(context.Background()) })

	_, err = e.StartRun(context.Background(), input("early"), "")
	require.ErrorIs(t, err, ErrNotStarted)
	assert.Contains(t, err.Error(), `"early"`, "the error names the thread")
	assert.Zero(t, e.Active())

	require.NoError(t, e.Start(context.Background()))
	r, err := e.StartRun(context.Background(), input("early"), "")
	require.NoError(t, err)
	<-r.Done()
}

// Stop without Start returns at once, and leaves nothing behind.
func TestShutdownWithoutLaunch(t *testing.T) {
	before := goleak.IgnoreCurrent()
	e, err := New(lifecycleConfig(t))
	require.NoError(t, err)
	require.NoError(t, e.Stop(context.Background()))
	goleak.VerifyNone(t, before)
	assert.ErrorIs(t, e.Start(context.Background()), ErrShuttingDown)
	_, err = e.StartRun(context.Background(), input("late"), "")
	assert.ErrorIs(t, err, ErrShuttingDown)
}
