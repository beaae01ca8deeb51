package store

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// claimCapped claims a thread with a cap through ClaimThreadCapped, or through StartRun
// (the path a run's start takes).
func claimCapped(ctx context.Context, s Store, viaStart bool, id, owner string, max int) error {
	if viaStart {
		epoch, err := s.StartRun(ctx, RunStart{ThreadID: id, RunID: "r-" + id, Owner: owner, Replica: "rep", Lease: time.Minute, MaxThreads: max})
		if err == nil {
			return s.EndRun(ctx, id, "r-"+id, epoch, "finished")
		}
		return err
	}
	_, err := s.ClaimThreadCapped(ctx, id, owner, "", max)
	return err
}

func TestThreadCap(t *testing.T) {
	ctx := context.Background()
	for _, viaStart := range []bool{false, true} {
		t.Run(fmt.Sprintf("viaStart=%v", viaStart), func(t *testing.T) {
			forEachBackend(t, func(t *testing.T, s Store) {
				const max = 3
				for i := range max {
					require.NoError(t, claimCapped(ctx, s, viaStart, fmt.Sprintf("a%d", i), "alice", max))
				}
				err := claimCapped(ctx, s, viaStart, "a-over", "alice", max)
				require.ErrorIs(t, err, ErrTooManyThreads)
				_, err = s.GetThread(ctx, "a-over")
				require.ErrorIs(t, err, ErrNotFound, "a refused thread is not recorded")
				if viaStart {
					_, err := s.GetRun(ctx, "a-over", "r-a-over")
					require.ErrorIs(t, err, ErrNotFound, "nor its run")
				}

				require.NoError(t, claimCapped(ctx, s, viaStart, "a1", "alice", max), "a thread that exists is not a new one")
				require.NoError(t, claimCapped(ctx, s, viaStart, "b0", "bob", max), "the cap is per principal")
				require.NoError(t, claimCapped(ctx, s, viaStart, "a-free", "alice", 0), "0 is no cap")
				err = claimCapped(ctx, s, viaStart, "a0", "mallory", max)
				require.ErrorIs(t, err, ErrThreadOwned)

				require.NoError(t, s.DeleteThread(ctx, "a0"))
				require.NoError(t, s.DeleteThread(ctx, "a-free"))
				require.NoError(t, claimCapped(ctx, s, viaStart, "a-again", "alice", max), "a deleted thread frees its place")
				require.ErrorIs(t, claimCapped(ctx, s, viaStart, "a-over", "alice", max), ErrTooManyThreads)
			})
		})
	}
}

// TestThreadCapConcurrent creates many new threads of one owner at once: exactly the cap
// succeed.
func TestThreadCapConcurrent(t *testing.T) {
	ctx := context.Background()
	forEachBackend(t, func(t *testing.T, s Store) {
		const max, racers = 5, 24
		var ok, refused atomic.Int32
		var wg sync.WaitGroup
		for i := range racers {
			wg.Go(func() {
				err := claimCapped(ctx, s, i%2 == 0, fmt.Sprintf("t%d", i), "alice", max)
				switch {
				case err == nil:
					ok.Add(1)
				case assert.ErrorIs(t, err, ErrTooManyThreads):
					refused.Add(1)
				}
			})
		}
		wg.Wait()
		assert.EqualValues(t, max, ok.Load())
		assert.EqualValues(t, racers-max, refused.Load())
		list, err := s.ListThreads(ctx, "alice", 100)
		require.NoError(t, err)
		assert.Len(t, list, max)
	})
}

// TestThreadCapAcrossReplicas creates new threads of one owner from two handles on one
// database at once: the cap holds across replicas.
func TestThreadCapAcrossReplicas(t *testing.T) {
	ctx := context.Background()
	forEachShared(t, func(t *testing.T, hs [2]Store) {
		const max, racers = 7, 40
		var ok atomic.Int32
		var wg sync.WaitGroup
		for i := range racers {
			wg.Go(func() {
				err := claimCapped(ctx, hs[i%2], i%3 == 0, fmt.Sprintf("t%d", i), "alice", max)
				if err == nil {
					ok.Add(1)
				} else {
					assert.ErrorIs(t, err, ErrTooManyThreads)
				}
			})
		}
		wg.Wait()
		assert.EqualValues(t, max, ok.Load())
		list, err := hs[0].ListThreads(ctx, "alice", 100)
		require.NoError(t, err)
		assert.Len(t, list, max)
	})
}

func TestSweepThreads(t *testing.T) {
	ctx := context.Background()
	forEachBackend(t, func(t *testing.T, s Store) {
		ev := []Event{{Seq: 1, Data: json.RawMessage(`{"type":"RUN_STARTED"}`)}}
		// Old threads: one idle with a finished run, its messages and events; one running;
		// one parked on interrupts; one with a lost run not cleaned up.
		for _, id := range []string{"idle", "idle2", "running", "parked", "lost"} {
			_, err := s.ClaimThread(ctx, id, "alice", "")
			require.NoError(t, err)
		}
		for _, id := range []string{"idle", "running", "lost"} {
			require.NoError(t, begun(s.BeginRun(ctx, id, "r1", "rep-a", time.Minute)))
			require.NoError(t, s.AppendEvents(ctx, id, "r1", 1, ev))
		}
		require.NoError(t, s.SaveMessages(ctx, "idle", []Message{{ID: "m1", Data: json.RawMessage(`{"id":"m1"}`)}}))
		require.NoError(t, s.EndRun(ctx, "idle", "r1", 1, "finished"))
		require.NoError(t, s.SaveSuspension(ctx, sampleSuspension("parked", t0)))
		require.NoError(t, s.EndRun(ctx, "lost", "r1", 1, RunLost))

		cutoff := time.Now()
		// Touched after the cutoff: a new thread, and an old one whose run ended since.
		_, err := s.ClaimThread(ctx, "new", "alice", "")
		require.NoError(t, err)
		_, err = s.ClaimThread(ctx, "recent", "bob", "")
		require.NoError(t, err)

		n, err := s.SweepThreads(ctx, cutoff, 1)
		require.NoError(t, err)
		assert.EqualValues(t, 1, n, "at most limit")
		n, err = s.SweepThreads(ctx, cutoff, 100)
		require.NoError(t, err)
		assert.EqualValues(t, 1, n)
		for _, id := range []string{"idle", "idle2"} {
			_, err := s.GetThread(ctx, id)
			require.ErrorIs(t, err, ErrNotFound, id)
		}
		evs, err := s.Events(ctx, "idle", "r1", 0, 10)
		require.NoError(t, err)
		assert.Empty(t, evs, "the swept thread's event log goes with it")
		msgs, err := s.LoadMessages(ctx, "idle")
		require.NoError(t, err)
		assert.Empty(t, msgs, "and its messages")
		for _, id := range []string{"running", "parked", "lost", "new", "recent"} {
			_, err := s.GetThread(ctx, id)
			require.NoError(t, err, "%s is kept", id)
		}
		evs, err = s.Events(ctx, "running", "r1", 0, 10)
		require.NoError(t, err)
		assert.Len(t, evs, 1)

		// A swept thread leaves a tombstone with its owner; a kept one, a deleted one and an
		// unknown one have none.
		for _, id := range []string{"idle", "idle2"} {
			owner, expired, err := s.ExpiredThread(ctx, id)
			require.NoError(t, err)
			assert.True(t, expired, id)
			assert.Equal(t, "alice", owner, id)
		}
		require.NoError(t, s.DeleteThread(ctx, "new"))
		for _, id := range []string{"running", "new", "never"} {
			_, expired, err := s.ExpiredThread(ctx, id)
			require.NoError(t, err)
			assert.False(t, expired, id)
		}

		// A swept thread frees its owner's place under the cap.
		_, err = s.ClaimThreadCapped(ctx, "after", "alice", "", 5)
		require.NoError(t, err)
		_, err = s.ClaimThreadCapped(ctx, "over", "alice", "", 4)
		require.ErrorIs(t, err, ErrTooManyThreads)
	})
}

// TestSweepThreadsOneReplicaAtATime: while one replica holds the sweep's lock another's
// sweep deletes nothing.
func TestSweepThreadsOneReplicaAtATime(t *testing.T) {
	ctx := context.Background()
	forEachShared(t, func(t *testing.T, hs [2]Store) {
		_, err := hs[0].ClaimThread(ctx, "idle", "alice", "")
		require.NoError(t, err)
		cutoff := time.Now().Add(time.Second)

		ss := hs[0].(*sqlStore)
		tx, err := ss.db.BeginTx(ctx, nil)
		require.NoError(t, err)
		var got bool
		require.NoError(t, tx.QueryRowContext(ctx, ss.d.trySweep).Scan(&got))
		require.True(t, got)
		n, err := hs[1].SweepThreads(ctx, cutoff, 10)
		require.NoError(t, err)
		assert.Zero(t, n, "another replica is sweeping")
		_, err = hs[1].GetThread(ctx, "idle")
		require.NoError(t, err)
		require.NoError(t, tx.Rollback())

		n, err = hs[1].SweepThreads(ctx, cutoff, 10)
		require.NoError(t, err)
		assert.EqualValues(t, 1, n)
		_, err = hs[0].GetThread(ctx, "idle")
		require.ErrorIs(t, err, ErrNotFound)
	})
}

// TestThreadStatus checks on every backend the one read of a thread a run's start makes
// when its replica does not know the thread: whether it has messages, its suspension's
// owner and its tombstone, each as the separate reads tell them.
func TestThreadStatus(t *testing.T) {
	ctx := context.Background()
	forEachBackend(t, func(t *testing.T, s Store) {
		_, err := s.ClaimThread(ctx, "swept", "bob", "")
		require.NoError(t, err)
		n, err := s.SweepThreads(ctx, time.Now().Add(time.Hour), 10)
		require.NoError(t, err)
		require.EqualValues(t, 1, n)
		for _, id := range []string{"claimed", "parked", "deleted", "talked"} {
			_, err := s.ClaimThread(ctx, id, "alice", "")
			require.NoError(t, err)
		}
		require.NoError(t, s.SaveMessages(ctx, "talked", []Message{{ID: "m1", Data: json.RawMessage(`{"id":"m1"}`)}}))
		require.NoError(t, s.SaveSuspension(ctx, sampleSuspension("parked")))
		require.NoError(t, s.SaveSuspension(ctx, sampleSuspension("deleted")))
		require.NoError(t, s.DeleteThread(ctx, "deleted"))

		for id, want := range map[string]ThreadStatus{
			"unknown": {},
			"claimed": {},
			"talked":  {HasMessages: true},
			"parked":  {Suspended: true, SuspensionOwner: "alice"},
			"swept":   {Expired: true, ExpiredOwner: "bob"},
			"deleted": {},
		} {
			got, err := s.ThreadStatus(ctx, id)
			require.NoError(t, err, id)
			assert.Equal(t, want, got, id)
		}
		require.NoError(t, s.Close())
		_, err = s.ThreadStatus(ctx, "claimed")
		require.Error(t, err, "a closed store")
	})
}
