package store

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestRunWatchers: a watch holds for its ttl on the database clock, is renewed by the next
// one, and only a running run can be watched.
func TestRunWatchers(t *testing.T) {
	ctx := context.Background()
	for _, b := range backends {
		t.Run(b.name, func(t *testing.T) {
			s := b.open(t)
			left, err := s.RunHeldFor(ctx, "t1", "r1")
			require.NoError(t, err)
			assert.LessOrEqual(t, left, time.Duration(0), "an unknown run is not watched")
			require.ErrorIs(t, s.HoldRunForFollower(ctx, "t1", "r1", time.Minute), ErrNotFound)

			require.NoError(t, begun(s.BeginRun(ctx, "t1", "r1", "rep-a", time.Minute)))
			left, err = s.RunHeldFor(ctx, "t1", "r1")
			require.NoError(t, err)
			assert.LessOrEqual(t, left, time.Duration(0), "a new run is not watched")

			require.NoError(t, s.HoldRunForFollower(ctx, "t1", "r1", time.Minute))
			left, err = s.RunHeldFor(ctx, "t1", "r1")
			require.NoError(t, err)
			assert.Greater(t, left, 50*time.Second, "watched for about a minute")
			assert.LessOrEqual(t, left, time.Minute)

			// A watch that has run out (a ttl in the past) says so.
			require.NoError(t, s.HoldRunForFollower(ctx, "t1", "r1", -time.Second))
			left, err = s.RunHeldFor(ctx, "t1", "r1")
			require.NoError(t, err)
			assert.LessOrEqual(t, left, time.Duration(0))

			require.NoError(t, s.EndRun(ctx, "t1", "r1", 1, "completed"))
			require.ErrorIs(t, s.HoldRunForFollower(ctx, "t1", "r1", time.Minute), ErrNotFound, "an ended run is not watched")
		})
	}
}

// TestSweepRuns: runs that ended before the cutoff go with their events; running runs, runs
// that ended later, and lost runs nobody has cleaned up stay.
func TestSweepRuns(t *testing.T) {
	ctx := context.Background()
	ev := []Event{{Seq: 1, Data: json.RawMessage(`{"type":"RUN_STARTED"}`)}}
	for _, b := range backends {
		t.Run(b.name, func(t *testing.T) {
			s := b.open(t)
			require.NoError(t, begun(s.BeginRun(ctx, "t1", "old", "rep-a", time.Minute)))
			require.NoError(t, s.AppendEvents(ctx, "t1", "old", 1, ev))
			require.NoError(t, s.EndRun(ctx, "t1", "old", 1, "completed"))
			require.NoError(t, begun(s.BeginRun(ctx, "t1", "live", "rep-a", time.Minute)))
			require.NoError(t, s.AppendEvents(ctx, "t1", "live", 1, ev))
			// A lost run not yet reaped: its thread was freed, its tasks not yet cancelled.
			require.NoError(t, begun(s.BeginRun(ctx, "t2", "lost", "rep-dead", time.Nanosecond)))
			time.Sleep(2 * time.Millisecond)
			require.NoError(t, begun(s.BeginRun(ctx, "t2", "next", "rep-a", time.Minute)))
			require.NoError(t, s.EndRun(ctx, "t2", "next", 1, "completed"))

			n, err := s.SweepRuns(ctx, time.Now().Add(-time.Hour))
			require.NoError(t, err)
			assert.Zero(t, n, "nothing ended before the cutoff")

			n, err = s.SweepRuns(ctx, time.Now().Add(time.Second))
			require.NoError(t, err)
			assert.Equal(t, int64(2), n, "the two finished runs")
			_, err = s.GetRun(ctx, "t1", "old")
			require.ErrorIs(t, err, ErrNotFound)
			evs, err := s.Events(ctx, "t1", "old", 0, 0)
			require.NoError(t, err)
			assert.Empty(t, evs, "its events went with it")
			_, err = s.GetRun(ctx, "t2", "next")
			require.ErrorIs(t, err, ErrNotFound)

			live, err := s.GetRun(ctx, "t1", "live")
			require.NoError(t, err)
			assert.Equal(t, RunRunning, live.State)
			evs, err = s.Events(ctx, "t1", "live", 0, 0)
			require.NoError(t, err)
			assert.Len(t, evs, 1, "a running run keeps its log")
			lost, err := s.GetRun(ctx, "t2", "lost")
			require.NoError(t, err, "an unreaped lost run stays for the reaper")
			assert.Equal(t, RunLost, lost.State)

			// Once reaped it is an ended run like any other.
			claimed, err := s.ClaimLapsedRuns(ctx, "rep-a", 10)
			require.NoError(t, err)
			require.Len(t, claimed, 1)
			n, err = s.SweepRuns(ctx, time.Now().Add(time.Second))
			require.NoError(t, err)
			assert.Equal(t, int64(1), n)
		})
	}
}
