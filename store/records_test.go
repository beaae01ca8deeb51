package store

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/baton-dev/baton/internal/testutil/pgtest"
)

// forEachBackend runs f as a subtest on a fresh store of every backend.
// forEachBackend runs f on a fresh store of each backend, the backends side by side (each
// store is its own: a memory store, a SQLite file, a PostgreSQL database).
func forEachBackend(t *testing.T, f func(t *testing.T, s Store)) {
	for _, b := range backends {
		t.Run(b.name, func(t *testing.T) {
			t.Parallel()
			f(t, b.open(t))
		})
	}
}

func TestThreads(t *testing.T) {
	ctx := context.Background()
	forEachBackend(t, func(t *testing.T, s Store) {
		_, err := s.GetThread(ctx, "t1")
		require.ErrorIs(t, err, ErrNotFound)

		th, err := s.ClaimThread(ctx, "t1", "alice", "Deploy the app")
		require.NoError(t, err)
		assert.Equal(t, "alice", th.Owner)
		assert.Equal(t, "Deploy the app", th.Title)
		assert.False(t, th.CreatedAt.IsZero())

		again, err := s.ClaimThread(ctx, "t1", "alice", "another title")
		require.NoError(t, err)
		assert.Equal(t, "Deploy the app", again.Title, "the title is set at creation")

		_, err = s.ClaimThread(ctx, "t1", "mallory", "")
		require.ErrorIs(t, err, ErrThreadOwned)
		got, err := s.GetThread(ctx, "t1")
		require.NoError(t, err)
		assert.Equal(t, "alice", got.Owner, "a refused claim changes nothing")

		_, err = s.ClaimThread(ctx, "t2", "alice", "")
		require.NoError(t, err)
		_, err = s.ClaimThread(ctx, "t3", "bob", "")
		require.NoError(t, err)
		// t1 becomes the most recently updated thread.
		require.NoError(t, begun(s.BeginRun(ctx, "t1", "r1", "rep-a", time.Minute)))
		require.NoError(t, s.SaveSuspension(ctx, sampleSuspension("t2", t0, t0)))

		list, err := s.ListThreads(ctx, "alice", 10)
		require.NoError(t, err)
		require.Len(t, list, 2)
		assert.Equal(t, "t1", list[0].ID)
		assert.True(t, list[0].Running)
		assert.Equal(t, "r1", list[0].LastRunID)
		assert.Equal(t, "t2", list[1].ID)
		assert.False(t, list[1].Running)
		assert.Equal(t, 2, list[1].OpenInterrupts)

		one, err := s.ListThreads(ctx, "alice", 1)
		require.NoError(t, err)
		assert.Len(t, one, 1)
		none, err := s.ListThreads(ctx, "nobody", 10)
		require.NoError(t, err)
		assert.Empty(t, none)
	})
}

func TestDeleteThread(t *testing.T) {
	ctx := context.Background()
	forEachBackend(t, func(t *testing.T, s Store) {
		for _, id := range []string{"t1", "keep"} {
			_, err := s.ClaimThread(ctx, id, "alice", "")
			require.NoError(t, err)
			require.NoError(t, begun(s.BeginRun(ctx, id, "r1", "rep-a", time.Minute)))
			require.NoError(t, s.AppendEvents(ctx, id, "r1", 1, []Event{{Seq: 1, Data: json.RawMessage(`{"type":"RUN_STARTED"}`)}}))
			require.NoError(t, s.SaveMessages(ctx, id, []Message{{ID: "m1", Data: json.RawMessage(`{"id":"m1"}`)}}))
			require.NoError(t, s.SaveSuspension(ctx, sampleSuspension(id, t0)))
			require.NoError(t, s.MarkResolved(ctx, id, []string{"int-1"}))
		}
		require.ErrorIs(t, s.DeleteThread(ctx, "t1"), ErrThreadBusy, "a running thread is not deleted")
		_, err := s.GetThread(ctx, "t1")
		require.NoError(t, err, "the refused delete changed nothing")

		require.NoError(t, s.EndRun(ctx, "t1", "r1", 1, "success"))
		require.NoError(t, s.DeleteThread(ctx, "t1"))
		_, err = s.GetThread(ctx, "t1")
		require.ErrorIs(t, err, ErrNotFound)
		evs, err := s.Events(ctx, "t1", "r1", 0, 10)
		require.NoError(t, err)
		assert.Empty(t, evs)
		msgs, err := s.LoadMessages(ctx, "t1")
		require.NoError(t, err)
		assert.Empty(t, msgs)
		_, err = s.LoadSuspension(ctx, "t1")
		require.ErrorIs(t, err, ErrNotFound)
		ok, err := s.IsResolved(ctx, "t1", "int-1")
		require.NoError(t, err)
		assert.False(t, ok)
		_, err = s.GetRun(ctx, "t1", "r1")
		require.ErrorIs(t, err, ErrNotFound)
		// After deletion the id is free: a new owner may claim it.
		_, err = s.ClaimThread(ctx, "t1", "bob", "")
		require.NoError(t, err)

		// The other thread is untouched.
		evs, err = s.Events(ctx, "keep", "r1", 0, 10)
		require.NoError(t, err)
		assert.Len(t, evs, 1)
		msgs, err = s.LoadMessages(ctx, "keep")
		require.NoError(t, err)
		assert.Len(t, msgs, 1)
		require.NoError(t, s.DeleteThread(ctx, "absent"))
	})
}

func TestRuns(t *testing.T) {
	ctx := context.Background()
	forEachBackend(t, func(t *testing.T, s Store) {
		require.NoError(t, begun(s.BeginRun(ctx, "t1", "r1", "rep-a", time.Minute)))
		require.ErrorIs(t, begun(s.BeginRun(ctx, "t1", "r2", "rep-b", time.Minute)), ErrThreadBusy)
		require.ErrorIs(t, begun(s.BeginRun(ctx, "t1", "r1", "rep-b", time.Minute)), ErrThreadBusy, "the same run id while it runs")
		require.NoError(t, begun(s.BeginRun(ctx, "t2", "r1", "rep-b", time.Minute)), "another thread is free")

		act, err := s.ActiveRun(ctx, "t1")
		require.NoError(t, err)
		assert.Equal(t, "r1", act.RunID)
		assert.Equal(t, "rep-a", act.Replica)
		assert.Equal(t, RunRunning, act.State)
		assert.JSONEq(t, `{}`, string(act.Work))

		work := json.RawMessage(`{"a2a":[{"agent":"research","taskId":"task-1","state":"working"}],"mcp":[{"callId":"c1","idempotent":true}]}`)
		require.NoError(t, s.SaveRunWork(ctx, "t1", "r1", 1, work))
		got, err := s.GetRun(ctx, "t1", "r1")
		require.NoError(t, err)
		assert.JSONEq(t, string(work), string(got.Work))
		require.Error(t, s.SaveRunWork(ctx, "t1", "r1", 1, json.RawMessage(`{bad`)))
		require.ErrorIs(t, s.SaveRunWork(ctx, "t1", "nope", 1, work), ErrNotFound)

		renewed, err := s.HeartbeatRuns(ctx, "rep-a", time.Minute)
		require.NoError(t, err)
		assert.Equal(t, []RunRef{{ThreadID: "t1", RunID: "r1", Epoch: 1}}, renewed)

		require.Error(t, s.EndRun(ctx, "t1", "r1", 1, RunRunning))
		require.NoError(t, s.EndRun(ctx, "t1", "r1", 1, "success"))
		require.ErrorIs(t, s.EndRun(ctx, "t1", "nope", 1, "success"), ErrNotFound)
		_, err = s.ActiveRun(ctx, "t1")
		require.ErrorIs(t, err, ErrNotFound)
		renewed, err = s.HeartbeatRuns(ctx, "rep-a", time.Minute)
		require.NoError(t, err)
		assert.Empty(t, renewed, "an ended run is not heartbeaten")
		require.NoError(t, begun(s.BeginRun(ctx, "t1", "r2", "rep-b", time.Minute)), "the thread is free again")
		require.NoError(t, s.EndRun(ctx, "t1", "r2", 1, "cancelled"))

		// A reused run id starts over, without the old events, under a new epoch.
		require.NoError(t, s.AppendEvents(ctx, "t1", "r1", 1, []Event{{Seq: 1, Data: json.RawMessage(`{}`)}}))
		epoch, err := s.BeginRun(ctx, "t1", "r1", "rep-a", time.Minute)
		require.NoError(t, err)
		assert.Equal(t, int64(2), epoch)
		evs, err := s.Events(ctx, "t1", "r1", 0, 0)
		require.NoError(t, err)
		assert.Empty(t, evs)
		require.ErrorIs(t, s.EndRun(ctx, "t1", "r1", 1, "success"), ErrFenced, "the old run's writer is fenced")
		require.NoError(t, s.EndRun(ctx, "t1", "r1", 2, "success"))
	})
}

func TestRunLeaseLapses(t *testing.T) {
	ctx := context.Background()
	forEachBackend(t, func(t *testing.T, s Store) {
		// A lease that has already lapsed: the replica is presumed dead.
		require.NoError(t, begun(s.BeginRun(ctx, "t1", "r1", "dead", -time.Second)))
		_, err := s.ActiveRun(ctx, "t1")
		require.ErrorIs(t, err, ErrNotFound)
		th, err := s.ListThreads(ctx, "", 10)
		require.NoError(t, err)
		assert.Empty(t, th)
		require.NoError(t, begun(s.BeginRun(ctx, "t1", "r2", "alive", time.Minute)))
		old, err := s.GetRun(ctx, "t1", "r1")
		require.NoError(t, err)
		assert.Equal(t, RunLost, old.State)
		// The run BeginRun marked lost is still handed to a claimer for cleanup, once.
		claimed, err := s.ClaimLapsedRuns(ctx, "cleaner", 10)
		require.NoError(t, err)
		require.Len(t, claimed, 1)
		assert.Equal(t, "r1", claimed[0].RunID)
		claimed, err = s.ClaimLapsedRuns(ctx, "cleaner", 10)
		require.NoError(t, err)
		assert.Empty(t, claimed)
	})
}

func TestEventLog(t *testing.T) {
	ctx := context.Background()
	forEachBackend(t, func(t *testing.T, s Store) {
		var batch []Event
		for i := 1; i <= 5; i++ {
			batch = append(batch, Event{Seq: int64(i), Data: json.RawMessage(fmt.Sprintf(`{"type":"CUSTOM","n":%d}`, i))})
		}
		require.NoError(t, begun(s.BeginRun(ctx, "t1", "r1", "rep-a", time.Minute)))
		require.NoError(t, begun(s.BeginRun(ctx, "t2", "other", "rep-a", time.Minute)))
		require.ErrorIs(t, s.AppendEvents(ctx, "t1", "none", 1, batch[:1]), ErrFenced, "a run that does not exist has no owner")
		require.NoError(t, s.AppendEvents(ctx, "t1", "r1", 1, batch[:2]))
		require.NoError(t, s.AppendEvents(ctx, "t1", "r1", 1, batch[2:]))
		require.NoError(t, s.AppendEvents(ctx, "t1", "r1", 1, nil))
		other := []Event{{Seq: 5, Data: json.RawMessage(`{"type":"CUSTOM","n":55}`)}}
		require.Error(t, s.AppendEvents(ctx, "t1", "r1", 1, other), "a seq is written once")
		require.NoError(t, s.AppendEvents(ctx, "t2", "other", 1, batch[:1]))

		all, err := s.Events(ctx, "t1", "r1", 0, 0)
		require.NoError(t, err)
		require.Len(t, all, 5)
		for i, ev := range all {
			assert.Equal(t, int64(i+1), ev.Seq)
			assert.JSONEq(t, string(batch[i].Data), string(ev.Data))
		}
		page, err := s.Events(ctx, "t1", "r1", 2, 2)
		require.NoError(t, err)
		require.Len(t, page, 2)
		assert.Equal(t, []int64{3, 4}, []int64{page[0].Seq, page[1].Seq})
		none, err := s.Events(ctx, "t1", "r1", 5, 0)
		require.NoError(t, err)
		assert.Empty(t, none)
		none, err = s.Events(ctx, "t1", "unknown", 0, 0)
		require.NoError(t, err)
		assert.Empty(t, none)

		n, err := s.SweepEvents(ctx, time.Now().Add(-time.Hour))
		require.NoError(t, err)
		assert.Zero(t, n, "nothing is older than the cutoff")
		n, err = s.SweepEvents(ctx, time.Now().Add(time.Second))
		require.NoError(t, err)
		assert.Equal(t, int64(6), n)
		all, err = s.Events(ctx, "t1", "r1", 0, 0)
		require.NoError(t, err)
		assert.Empty(t, all)
	})
}

func TestMessages(t *testing.T) {
	ctx := context.Background()
	forEachBackend(t, func(t *testing.T, s Store) {
		msg := func(id, text string) Message {
			return Message{ID: id, Data: json.RawMessage(fmt.Sprintf(`{"id":%q,"role":"user","content":%q}`, id, text))}
		}
		require.NoError(t, s.SaveMessages(ctx, "t1", []Message{msg("m1", "a"), msg("m2", "b")}))
		// A client that sends the full history again, plus a new message: deduplicated by id.
		require.NoError(t, s.SaveMessages(ctx, "t1", []Message{msg("m1", "a"), msg("m2", "b edited"), msg("m3", "c")}))
		got, err := s.LoadMessages(ctx, "t1")
		require.NoError(t, err)
		require.Len(t, got, 3)
		assert.Equal(t, []string{"m1", "m2", "m3"}, []string{got[0].ID, got[1].ID, got[2].ID})
		assert.JSONEq(t, string(msg("m2", "b edited").Data), string(got[1].Data))

		require.Error(t, s.SaveMessages(ctx, "t1", []Message{{ID: "", Data: json.RawMessage(`{}`)}}))
		require.Error(t, s.SaveMessages(ctx, "t1", []Message{msg("m4", "d"), {ID: "m5", Data: json.RawMessage(`{bad`)}}))
		got, err = s.LoadMessages(ctx, "t1")
		require.NoError(t, err)
		assert.Len(t, got, 3, "a refused batch stores nothing")

		empty, err := s.LoadMessages(ctx, "t2")
		require.NoError(t, err)
		assert.Empty(t, empty)
	})
}

// TestLoadRecentMessages: the end of a thread from the message start picks, read from the
// newest back (across the SQL stores' pages), each message seen once; the whole thread
// when start picks none; an edited message keeps its place.
func TestLoadRecentMessages(t *testing.T) {
	ctx := context.Background()
	forEachBackend(t, func(t *testing.T, s Store) {
		msg := func(i int, text string) Message {
			id := fmt.Sprintf("m%02d", i)
			return Message{ID: id, Data: json.RawMessage(fmt.Sprintf(`{"id":%q,"role":"user","content":%q}`, id, text))}
		}
		const n = 3*recentPage + 3
		var all []Message
		for i := range n {
			all = append(all, msg(i, "text"))
		}
		require.NoError(t, s.SaveMessages(ctx, "t", all))
		require.NoError(t, s.SaveMessages(ctx, "t", []Message{msg(n-2, "edited")}))
		ids := func(msgs []Message) []string {
			out := []string{}
			for _, m := range msgs {
				out = append(out, m.ID)
			}
			return out
		}
		for _, from := range []int{n - 1, n - recentPage, n - recentPage - 1, 2, 0} {
			var seen []string
			got, err := s.LoadRecentMessages(ctx, "t", func(m Message) bool {
				seen = append(seen, m.ID)
				return m.ID == fmt.Sprintf("m%02d", from)
			})
			require.NoError(t, err)
			assert.Equal(t, ids(all[from:]), ids(got), "from m%02d", from)
			back := ids(all[from:])
			slices.Reverse(back)
			assert.Equal(t, back, seen, "each message seen once, newest first, none before the start")
			if from <= n-2 {
				assert.JSONEq(t, string(msg(n-2, "edited").Data), string(got[len(got)-2].Data))
			}
		}
		got, err := s.LoadRecentMessages(ctx, "t", func(Message) bool { return false })
		require.NoError(t, err)
		assert.Equal(t, ids(all), ids(got), "no start: the whole thread")
		got, err = s.LoadRecentMessages(ctx, "none", func(Message) bool { return true })
		require.NoError(t, err)
		assert.Empty(t, got)
	})
}

func TestRecordsClosed(t *testing.T) {
	ctx := context.Background()
	forEachBackend(t, func(t *testing.T, s Store) {
		require.NoError(t, s.Close())
		_, err := s.ClaimThread(ctx, "t", "a", "")
		require.ErrorIs(t, err, ErrClosed)
		_, err = s.ListThreads(ctx, "a", 1)
		require.ErrorIs(t, err, ErrClosed)
		require.ErrorIs(t, begun(s.BeginRun(ctx, "t", "r", "x", time.Second)), ErrClosed)
		require.ErrorIs(t, s.AppendEvents(ctx, "t", "r", 1, []Event{{Seq: 1, Data: json.RawMessage(`{}`)}}), ErrClosed)
		_, err = s.Events(ctx, "t", "r", 0, 1)
		require.ErrorIs(t, err, ErrClosed)
		_, err = s.LoadMessages(ctx, "t")
		require.ErrorIs(t, err, ErrClosed)
		_, err = s.LoadRecentMessages(ctx, "t", func(Message) bool { return true })
		require.ErrorIs(t, err, ErrClosed)
	})
}

// sharedBackends open two handles on one database, as two replicas would. SQLite is not
// among them: a second handle on one SQLite file is refused (one process per file,
// TestSecondProcessOnSQLiteFile).
var sharedBackends = []struct {
	name string
	dsn  func(t *testing.T) string
}{
	{"postgres", func(t *testing.T) string { return pgtest.DSN(t) }},
}

// forEachShared runs f as a subtest on two handles on one new database of every shared
// backend.
func forEachShared(t *testing.T, f func(t *testing.T, hs [2]Store)) {
	for _, b := range sharedBackends {
		t.Run(b.name, func(t *testing.T) {
			dsn := b.dsn(t)
			var hs [2]Store
			for i := range hs {
				s, err := Open(context.Background(), dsn)
				require.NoError(t, err)
				t.Cleanup(func() { _ = s.Close() })
				hs[i] = s
			}
			f(t, hs)
		})
	}
}

// TestOneActiveRunAcrossReplicas races many BeginRun calls for one thread from two store
// handles: exactly one wins, the others see ErrThreadBusy, and ownership claims agree.
func TestOneActiveRunAcrossReplicas(t *testing.T) {
	ctx := context.Background()
	forEachShared(t, func(t *testing.T, hs [2]Store) {
		const racers = 16
		var wg sync.WaitGroup
		results := make(chan error, racers)
		owners := make(chan error, racers)
		for i := range racers {
			wg.Go(func() {
				s := hs[i%2]
				_, err := s.ClaimThread(ctx, "shared", fmt.Sprintf("p%d", i), "")
				owners <- err
				results <- begun(s.BeginRun(ctx, "race", fmt.Sprintf("r%d", i), fmt.Sprintf("rep-%d", i%2), time.Minute))
			})
		}
		wg.Wait()
		close(results)
		close(owners)
		won, busy := 0, 0
		for err := range results {
			switch {
			case err == nil:
				won++
			case assert.ErrorIs(t, err, ErrThreadBusy):
				busy++
			}
		}
		assert.Equal(t, 1, won)
		assert.Equal(t, racers-1, busy)
		claimed := 0
		for err := range owners {
			if err == nil {
				claimed++
			} else {
				assert.ErrorIs(t, err, ErrThreadOwned)
			}
		}
		assert.Equal(t, 1, claimed, "one principal owns the thread")
	})
}

// TestPostgresConcurrentMigrate opens one new database from several "replicas" at once: the
// advisory lock makes one migrate and the others find the schema done.
func TestPostgresConcurrentMigrate(t *testing.T) {
	ctx := context.Background()
	dsn := pgtest.DSN(t)
	const replicas = 6
	var wg sync.WaitGroup
	errs := make(chan error, replicas)
	stores := make(chan Store, replicas)
	for range replicas {
		wg.Go(func() {
			s, err := Open(ctx, dsn)
			errs <- err
			if err == nil {
				stores <- s
			}
		})
	}
	wg.Wait()
	close(errs)
	close(stores)
	for err := range errs {
		require.NoError(t, err)
	}
	for s := range stores {
		require.NoError(t, s.Close())
	}
	s, err := Open(ctx, dsn)
	require.NoError(t, err)
	defer s.Close()
	ss := s.(*sqlStore)
	var v int
	require.NoError(t, ss.db.QueryRowContext(ctx, `SELECT version FROM schema_version`).Scan(&v))
	assert.Equal(t, len(pgMigrations), v)
}

func TestStopRequests(t *testing.T) {
	ctx := context.Background()
	forEachBackend(t, func(t *testing.T, s Store) {
		require.NoError(t, begun(s.BeginRun(ctx, "t1", "r1", "rep-a", time.Minute)))
		require.NoError(t, begun(s.BeginRun(ctx, "t2", "r1", "rep-b", time.Minute)))
		none, err := s.StopRequests(ctx, "rep-a")
		require.NoError(t, err)
		assert.Empty(t, none)

		run, err := s.RequestStop(ctx, "t1", "r1")
		require.NoError(t, err)
		assert.Equal(t, "rep-a", run.Replica, "the caller learns which replica owns the run")
		_, err = s.RequestStop(ctx, "t1", "nope")
		require.ErrorIs(t, err, ErrNotFound)

		got, err := s.StopRequests(ctx, "rep-a")
		require.NoError(t, err)
		require.Len(t, got, 1)
		assert.Equal(t, "t1", got[0].ThreadID)
		assert.True(t, got[0].StopRequested)
		other, err := s.StopRequests(ctx, "rep-b")
		require.NoError(t, err)
		assert.Empty(t, other)

		require.NoError(t, s.EndRun(ctx, "t1", "r1", 1, "cancelled"))
		got, err = s.StopRequests(ctx, "rep-a")
		require.NoError(t, err)
		assert.Empty(t, got, "an ended run has no pending stop")
		_, err = s.RequestStop(ctx, "t1", "r1")
		require.ErrorIs(t, err, ErrNotFound, "an ended run cannot be stopped")
	})
}

// TestPostgresStopSignal: a stop recorded through one handle wakes the listener of another.
func TestPostgresStopSignal(t *testing.T) {
	ctx := context.Background()
	dsn := pgtest.DSN(t)
	a, err := Open(ctx, dsn)
	require.NoError(t, err)
	defer a.Close()
	b, err := Open(ctx, dsn)
	require.NoError(t, err)
	defer b.Close()
	sig := b.StopSignals()
	require.NotNil(t, sig)
	<-sig // the catch-up signal after LISTEN: the listener is up
	require.NoError(t, begun(a.BeginRun(ctx, "t1", "r1", "rep-b", time.Minute)))
	_, err = a.RequestStop(ctx, "t1", "r1")
	require.NoError(t, err)
	select {
	case <-sig:
	case <-time.After(30 * time.Second):
		t.Fatal("no stop signal reached the other handle")
	}
	got, err := b.StopRequests(ctx, "rep-b")
	require.NoError(t, err)
	assert.Len(t, got, 1)
}

func TestTakeOverRuns(t *testing.T) {
	ctx := context.Background()
	forEachBackend(t, func(t *testing.T, s Store) {
		require.NoError(t, begun(s.BeginRun(ctx, "dead1", "r1", "dead", -time.Second)))
		require.NoError(t, begun(s.BeginRun(ctx, "dead2", "r1", "dead", -time.Second)))
		require.NoError(t, begun(s.BeginRun(ctx, "alive", "r1", "alive", time.Minute)))
		require.NoError(t, begun(s.BeginRun(ctx, "mine", "r1", "me", -time.Second)))
		require.NoError(t, s.SaveRunWork(ctx, "dead1", "r1", 1, json.RawMessage(`{"a2a":[{"taskId":"task-1"}]}`)))

		got, err := s.TakeOverRuns(ctx, "me", time.Minute, 1, false)
		require.NoError(t, err)
		require.Len(t, got, 1)
		more, err := s.TakeOverRuns(ctx, "me", time.Minute, 10, false)
		require.NoError(t, err)
		require.Len(t, more, 1, "the rest; a run taken over is not taken again")
		taken := map[string]RunRecord{got[0].ThreadID: got[0], more[0].ThreadID: more[0]}
		require.Contains(t, taken, "dead1")
		require.Contains(t, taken, "dead2")
		assert.JSONEq(t, `{"a2a":[{"taskId":"task-1"}]}`, string(taken["dead1"].Work), "the new owner gets the checkpoint")
		assert.Equal(t, RunRunning, taken["dead1"].State, "a run taken over goes on")
		assert.Equal(t, "me", taken["dead1"].Replica)
		act, err := s.ActiveRun(ctx, "dead1")
		require.NoError(t, err, "its lease was renewed for the new owner")
		assert.Equal(t, "me", act.Replica)
		n, err := s.HeartbeatRuns(ctx, "dead", time.Minute)
		require.NoError(t, err)
		assert.Empty(t, n, "the old owner's heartbeat no longer reaches it")
		assert.Equal(t, int64(2), taken["dead1"].Epoch, "a takeover moves the epoch on")
		require.ErrorIs(t, s.SaveRunWork(ctx, "dead1", "r1", 1, json.RawMessage(`{}`)), ErrFenced, "the old owner is fenced")
		none, err := s.TakeOverRuns(ctx, "me", time.Minute, 10, false)
		require.NoError(t, err)
		assert.Empty(t, none)
		own, err := s.GetRun(ctx, "mine", "r1")
		require.NoError(t, err)
		assert.Equal(t, "me", own.Replica, "a replica never takes its own run")
		act, err = s.ActiveRun(ctx, "alive")
		require.NoError(t, err)
		assert.Equal(t, "alive", act.Replica, "a run whose lease holds is left alone")
		lost, err := s.ClaimLapsedRuns(ctx, "me", 10)
		require.NoError(t, err)
		assert.Empty(t, lost, "running runs are never handed out for cleanup")

		// anyLease (a single process starting): the live-looking run of another
		// replica id is taken too.
		all, err := s.TakeOverRuns(ctx, "next", time.Minute, 10, true)
		require.NoError(t, err)
		assert.Len(t, all, 4, "dead1, dead2, alive and mine")
	})
}

func TestReleaseRuns(t *testing.T) {
	ctx := context.Background()
	forEachBackend(t, func(t *testing.T, s Store) {
		require.NoError(t, begun(s.BeginRun(ctx, "t1", "r1", "leaving", time.Hour)))
		require.NoError(t, begun(s.BeginRun(ctx, "t2", "r1", "staying", time.Hour)))
		none, err := s.TakeOverRuns(ctx, "other", time.Minute, 10, false)
		require.NoError(t, err)
		require.Empty(t, none, "leases hold")
		n, err := s.ReleaseRuns(ctx, "leaving")
		require.NoError(t, err)
		assert.Equal(t, 1, n)
		got, err := s.TakeOverRuns(ctx, "other", time.Minute, 10, false)
		require.NoError(t, err)
		require.Len(t, got, 1, "a released run is taken over at once, before its lease would have lapsed")
		assert.Equal(t, "t1", got[0].ThreadID)
		assert.Equal(t, RunRunning, got[0].State)
	})
}

// TestTakeOverRunsRace: two handles taking over at once split the lapsed runs, none twice.
func TestTakeOverRunsRace(t *testing.T) {
	ctx := context.Background()
	forEachShared(t, func(t *testing.T, hs [2]Store) {
		const n = 60
		for i := range n {
			require.NoError(t, begun(hs[0].BeginRun(ctx, fmt.Sprintf("t%d", i), "r", "dead", -time.Second)))
		}
		var wg sync.WaitGroup
		got := make(chan []RunRecord, 8)
		for i := range 8 {
			wg.Go(func() {
				rs, err := hs[i%2].TakeOverRuns(ctx, fmt.Sprintf("c%d", i), time.Minute, 5, false)
				assert.NoError(t, err)
				got <- rs
			})
		}
		wg.Wait()
		close(got)
		seen := map[string]bool{}
		for rs := range got {
			for _, r := range rs {
				assert.False(t, seen[r.ThreadID], "run of %s taken twice", r.ThreadID)
				seen[r.ThreadID] = true
			}
		}
		assert.Len(t, seen, 40, "8 claims of 5")
	})
}

func TestThreadRuns(t *testing.T) {
	ctx := context.Background()
	forEachBackend(t, func(t *testing.T, s Store) {
		require.NoError(t, begun(s.BeginRun(ctx, "t9", "r-a", "rep-a", time.Minute)))
		work := json.RawMessage(`{"a2a":[{"agent":"research","taskId":"task-9","state":"TASK_STATE_INPUT_REQUIRED"}]}`)
		require.NoError(t, s.SaveRunWork(ctx, "t9", "r-a", 1, work))
		require.NoError(t, s.EndRun(ctx, "t9", "r-a", 1, "success"))
		time.Sleep(2 * time.Millisecond) // distinct start times, so the order is defined
		require.NoError(t, begun(s.BeginRun(ctx, "t9", "r-b", "rep-b", time.Minute)))
		require.NoError(t, begun(s.BeginRun(ctx, "t8", "r-x", "rep-b", time.Minute)), "another thread")

		runs, err := s.ThreadRuns(ctx, "t9", 10)
		require.NoError(t, err)
		require.Len(t, runs, 2)
		assert.Equal(t, "r-b", runs[0].RunID, "newest first")
		assert.Equal(t, "r-a", runs[1].RunID)
		assert.JSONEq(t, string(work), string(runs[1].Work))

		runs, err = s.ThreadRuns(ctx, "t9", 1)
		require.NoError(t, err)
		require.Len(t, runs, 1)
		assert.Equal(t, "r-b", runs[0].RunID)

		runs, err = s.ThreadRuns(ctx, "absent", 10)
		require.NoError(t, err)
		assert.Empty(t, runs)
	})
}

// begun drops BeginRun's epoch where a test needs only its error.
func begun(_ int64, err error) error { return err }

// TestTakeOverReleasedRuns: a claimer that may not take lapsed leases yet still takes the
// runs their replica released, and only those.
func TestTakeOverReleasedRuns(t *testing.T) {
	ctx := context.Background()
	forEachBackend(t, func(t *testing.T, s Store) {
		require.NoError(t, begun(s.BeginRun(ctx, "released", "r1", "leaving", time.Hour)))
		require.NoError(t, begun(s.BeginRun(ctx, "lapsed", "r1", "dead", -time.Second)))
		require.NoError(t, begun(s.BeginRun(ctx, "held", "r1", "alive", time.Hour)))
		none, err := s.TakeOverReleasedRuns(ctx, "other", time.Minute, 10)
		require.NoError(t, err)
		require.Empty(t, none, "nothing released yet; a lapsed lease is not a release")
		n, err := s.ReleaseRuns(ctx, "leaving")
		require.NoError(t, err)
		require.Equal(t, 1, n)
		got, err := s.TakeOverReleasedRuns(ctx, "other", time.Minute, 10)
		require.NoError(t, err)
		require.Len(t, got, 1)
		assert.Equal(t, "released", got[0].ThreadID)
		assert.Equal(t, "other", got[0].Replica)
		assert.Equal(t, int64(2), got[0].Epoch, "the old owner is fenced")
		again, err := s.TakeOverReleasedRuns(ctx, "third", time.Minute, 10)
		require.NoError(t, err)
		assert.Empty(t, again, "a run taken over holds a lease again")
		rest, err := s.TakeOverRuns(ctx, "other", time.Minute, 10, false)
		require.NoError(t, err)
		require.Len(t, rest, 1, "the lapsed run is still there for a claimer that may take it")
		assert.Equal(t, "lapsed", rest[0].ThreadID)
	})
}
