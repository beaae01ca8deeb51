package server

import (
	"context"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/baton-dev/baton/store"
)

// The sweeper deletes a thread once it has been untouched for the retention, keeps one
// touched since and one whose run is running, and stops when told.
func TestThreadSweeper(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		st, err := store.Open(ctx, "memory:")
		require.NoError(t, err)
		defer st.Close()
		for _, id := range []string{"old", "busy"} {
			_, err := st.ClaimThread(ctx, id, "alice", "")
			require.NoError(t, err)
		}
		_, err = st.BeginRun(ctx, "busy", "r1", "rep", 24*time.Hour)
		require.NoError(t, err)
		time.Sleep(30 * time.Minute)
		_, err = st.ClaimThread(ctx, "new", "alice", "")
		require.NoError(t, err)

		sw := NewThreadSweeper(st, time.Hour, nil)
		sw.Start(ctx)
		sw.Start(ctx) // a second Start does nothing
		time.Sleep(29 * time.Minute)
		synctest.Wait()
		_, err = st.GetThread(ctx, "old")
		require.NoError(t, err, "not yet past its retention")

		time.Sleep(2*time.Minute + time.Second) // "old" is 61 minutes old: one sweep since
		synctest.Wait()
		_, err = st.GetThread(ctx, "old")
		require.ErrorIs(t, err, store.ErrNotFound, "swept")
		for _, id := range []string{"new", "busy"} {
			_, err := st.GetThread(ctx, id)
			assert.NoError(t, err, "%s is kept", id)
		}
		require.NoError(t, sw.Stop(ctx))
		require.NoError(t, sw.Stop(ctx))

		time.Sleep(2 * time.Hour)
		synctest.Wait()
		_, err = st.GetThread(ctx, "new")
		assert.NoError(t, err, "a stopped sweeper deletes nothing")
	})
}

// Sweep deletes a backlog larger than one batch in one go.
func TestThreadSweeperBacklog(t *testing.T) {
	ctx := context.Background()
	st, err := store.Open(ctx, "memory:")
	require.NoError(t, err)
	defer st.Close()
	for i := range 2*sweepBatch + 3 {
		_, err := st.ClaimThread(ctx, "t"+string(rune('a'+i%26))+time.Duration(i).String(), "alice", "")
		require.NoError(t, err)
	}
	sw := NewThreadSweeper(st, time.Nanosecond, nil)
	assert.EqualValues(t, 2*sweepBatch+3, sw.Sweep(ctx))
	list, err := st.ListThreads(ctx, "alice", 10)
	require.NoError(t, err)
	assert.Empty(t, list)
}

// A sweeper stops when the context it was started with ends, as when Stop is called.
func TestThreadSweeperEndsWithContext(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		st, err := store.Open(context.Background(), "memory:")
		require.NoError(t, err)
		defer st.Close()
		ctx, cancel := context.WithCancel(context.Background())
		sw := NewThreadSweeper(st, time.Hour, nil)
		sw.Start(ctx)
		synctest.Wait()
		cancel()
		synctest.Wait() // its goroutine has returned: the bubble would not end otherwise

		_, err = st.ClaimThread(context.Background(), "old", "alice", "")
		require.NoError(t, err)
		time.Sleep(3 * time.Hour)
		synctest.Wait()
		_, err = st.GetThread(context.Background(), "old")
		assert.NoError(t, err, "a sweeper whose context ended deletes nothing")
		require.NoError(t, sw.Stop(context.Background()))
	})
}
