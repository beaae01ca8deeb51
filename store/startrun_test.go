package store

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestStartRun checks StartRun on every backend: the claim, the run and its
// work in one go, and nothing recorded when it is refused.
func TestStartRun(t *testing.T) {
	ctx := context.Background()
	forEachBackend(t, func(t *testing.T, s Store) {
		start := RunStart{ThreadID: "t1", RunID: "r1", Owner: "alice", Title: "Deploy", Replica: "a",
			Lease: time.Minute, Work: json.RawMessage(`{"checkpoint":{"v":1}}`),
			Messages: []Message{{ID: "u1", Data: json.RawMessage(`{"id":"u1","role":"user","content":"deploy"}`)}}}
		require.NoError(t, begun(s.StartRun(ctx, start)))
		// The input's messages are in the thread with the start, before any event.
		msgs, err := s.LoadMessages(ctx, "t1")
		require.NoError(t, err)
		require.Len(t, msgs, 1)
		assert.Equal(t, "u1", msgs[0].ID)
		th, err := s.GetThread(ctx, "t1")
		require.NoError(t, err)
		assert.Equal(t, "alice", th.Owner)
		assert.Equal(t, "Deploy", th.Title)
		run, err := s.GetRun(ctx, "t1", "r1")
		require.NoError(t, err)
		assert.Equal(t, RunRunning, run.State)
		assert.Equal(t, "a", run.Replica)
		assert.JSONEq(t, `{"checkpoint":{"v":1}}`, string(run.Work))

		second := start
		second.RunID = "r2"
		second.Messages = []Message{{ID: "u2", Data: json.RawMessage(`{"id":"u2","role":"user","content":"again"}`)}}
		require.ErrorIs(t, begun(s.StartRun(ctx, second)), ErrThreadBusy)
		msgs, err = s.LoadMessages(ctx, "t1")
		require.NoError(t, err)
		assert.Len(t, msgs, 1, "a refused start stores none of its messages")
		bad := start
		bad.ThreadID, bad.Messages = "t9", []Message{{ID: "x", Data: json.RawMessage(`{`)}}
		require.Error(t, begun(s.StartRun(ctx, bad)), "a message that is not JSON is refused")
		_, err = s.GetThread(ctx, "t9")
		require.ErrorIs(t, err, ErrNotFound, "and nothing is recorded")

		other := RunStart{ThreadID: "t1", RunID: "r3", Owner: "mallory", Replica: "b", Lease: time.Minute}
		require.NoError(t, s.EndRun(ctx, "t1", "r1", 1, "success"))
		require.ErrorIs(t, begun(s.StartRun(ctx, other)), ErrThreadOwned)
		_, err = s.GetRun(ctx, "t1", "r3")
		require.ErrorIs(t, err, ErrNotFound, "a refused start records no run")

		// Without a work document the run gets the default one.
		plain := RunStart{ThreadID: "t2", RunID: "r1", Owner: "bob", Replica: "a", Lease: time.Minute}
		require.NoError(t, begun(s.StartRun(ctx, plain)))
		run, err = s.GetRun(ctx, "t2", "r1")
		require.NoError(t, err)
		assert.JSONEq(t, `{}`, string(run.Work))
	})
}

// TestStartRunAcrossReplicas: starts of one thread through two handles on one database
// (two replicas; two writers on one SQLite file), all at once: exactly one begins.
func TestStartRunAcrossReplicas(t *testing.T) {
	ctx := context.Background()
	forEachShared(t, func(t *testing.T, hs [2]Store) {
		const n = 8
		errs := make([]error, n)
		var wg sync.WaitGroup
		for i := range n {
			wg.Go(func() {
				errs[i] = begun(hs[i%2].StartRun(ctx, RunStart{ThreadID: "t", RunID: fmt.Sprintf("r%d", i),
					Owner: "alice", Replica: fmt.Sprintf("replica-%d", i%2), Lease: time.Minute}))
			})
		}
		wg.Wait()
		began := 0
		for _, err := range errs {
			if err == nil {
				began++
				continue
			}
			require.ErrorIs(t, err, ErrThreadBusy)
		}
		assert.Equal(t, 1, began)
	})
}

// openTestDB opens a SQLite database of one table for the group writer's tests, with the
// writer's single connection.
func openTestDB(t *testing.T) *sql.DB {
	t.Helper()
	db, err := sql.Open("sqlite", filepath.Join(t.TempDir(), "w.db")+sqliteParams)
	require.NoError(t, err)
	db.SetMaxOpenConns(1)
	t.Cleanup(func() { _ = db.Close() })
	_, err = db.Exec(`CREATE TABLE kv (k TEXT PRIMARY KEY)`)
	require.NoError(t, err)
	return db
}

// idleWriter is a group writer without its goroutine: the test runs its batches.
func idleWriter(t *testing.T) *groupWriter {
	return &groupWriter{db: openTestDB(t), stmts: make(map[string]*sql.Stmt)}
}

func insertKV(k string) writeFunc {
	return func(ctx context.Context, tx *sql.Tx) error {
		_, err := tx.ExecContext(ctx, `INSERT INTO kv (k) VALUES (?)`, k)
		return err
	}
}

func keys(t *testing.T, db *sql.DB) []string {
	t.Helper()
	rows, err := db.Query(`SELECT k FROM kv ORDER BY k`)
	require.NoError(t, err)
	defer rows.Close()
	var out []string
	for rows.Next() {
		var k string
		require.NoError(t, rows.Scan(&k))
		out = append(out, k)
	}
	require.NoError(t, rows.Err())
	return out
}

func jobs(fns ...writeFunc) []*writeJob {
	out := make([]*writeJob, len(fns))
	for i, fn := range fns {
		out[i] = &writeJob{fn: fn, done: make(chan error, 1)}
	}
	return out
}

// TestGroupWriterSavepoints: in one batch, a job that fails after writing is rolled back
// alone and gets its own error; the jobs around it commit.
func TestGroupWriterSavepoints(t *testing.T) {
	w := idleWriter(t)
	boom := errors.New("boom")
	batch := jobs(insertKV("a"), func(ctx context.Context, tx *sql.Tx) error {
		if err := insertKV("b")(ctx, tx); err != nil {
			return err
		}
		return boom
	}, insertKV("a"), insertKV("c"))
	w.commit(batch)
	require.NoError(t, <-batch[0].done)
	require.ErrorIs(t, <-batch[1].done, boom)
	require.ErrorContains(t, <-batch[2].done, "UNIQUE", "a duplicate key fails its own job")
	require.NoError(t, <-batch[3].done)
	assert.Equal(t, []string{"a", "c"}, keys(t, w.db))
}

// TestGroupWriterFastPath: a batch whose jobs all succeed runs each job once, in one
// transaction without savepoints; a batch with a failing job runs again with them, and the
// jobs that succeeded are stored once although they ran twice.
func TestGroupWriterFastPath(t *testing.T) {
	w := idleWriter(t)
	var runs [3]int
	counted := func(i int, fn writeFunc) writeFunc {
		return func(ctx context.Context, tx *sql.Tx) error { runs[i]++; return fn(ctx, tx) }
	}
	batch := jobs(counted(0, insertKV("a")), counted(1, insertKV("b")), counted(2, insertKV("c")))
	w.commit(batch)
	for _, j := range batch {
		require.NoError(t, <-j.done)
	}
	assert.Equal(t, [3]int{1, 1, 1}, runs, "no failure: every job runs once")
	assert.Empty(t, w.want, "no savepoint statement was asked for")

	runs = [3]int{}
	batch = jobs(counted(0, insertKV("d")), counted(1, insertKV("a")), counted(2, insertKV("e")))
	w.commit(batch)
	require.NoError(t, <-batch[0].done)
	require.ErrorContains(t, <-batch[1].done, "UNIQUE")
	require.NoError(t, <-batch[2].done)
	assert.Equal(t, [3]int{2, 2, 1}, runs, "the failure stops the first pass; the second runs all")
	assert.Equal(t, []string{"a", "b", "c", "d", "e"}, keys(t, w.db))
}

// TestGroupWriterBrokenBatch: a job that ends the shared transaction makes the batch fail as
// a whole; every job is then run on its own, so the others still commit once each.
func TestGroupWriterBrokenBatch(t *testing.T) {
	w := idleWriter(t)
	broken := errors.New("broken")
	batch := jobs(insertKV("a"), func(ctx context.Context, tx *sql.Tx) error {
		_, _ = tx.ExecContext(ctx, `ROLLBACK`)
		return broken
	}, insertKV("c"))
	w.commit(batch)
	require.NoError(t, <-batch[0].done)
	require.ErrorIs(t, <-batch[1].done, broken)
	require.NoError(t, <-batch[2].done)
	assert.Equal(t, []string{"a", "c"}, keys(t, w.db))
}

// TestGroupWriterConcurrent: many callers at once each get their outcome, and every
// successful write is stored exactly once.
func TestGroupWriterConcurrent(t *testing.T) {
	db := openTestDB(t)
	w := newGroupWriter(db)
	t.Cleanup(w.close)
	const n = 500
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			k := fmt.Sprintf("k%03d", i/2) // every key twice: one of the two fails
			errs[i] = w.do(context.Background(), insertKV(k))
		})
	}
	wg.Wait()
	failed := 0
	for _, err := range errs {
		if err != nil {
			require.ErrorContains(t, err, "UNIQUE")
			failed++
		}
	}
	assert.Equal(t, n/2, failed)
	assert.Len(t, keys(t, db), n/2)
}

// TestGroupWriterCancelledCaller: a caller whose context has ended is not run; a closed
// writer refuses jobs with ErrClosed.
func TestGroupWriterCancelledCaller(t *testing.T) {
	db := openTestDB(t)
	w := newGroupWriter(db)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	err := w.do(ctx, insertKV("x"))
	if err != nil {
		require.ErrorIs(t, err, context.Canceled)
		assert.Empty(t, keys(t, db))
	}
	w.close()
	require.ErrorIs(t, w.do(context.Background(), insertKV("y")), ErrClosed)
}

// TestStartRunReportNewThread checks on every backend that a start reports a thread its
// claim created as new, and one claimed before (by a run, by ClaimThread, or over the
// owner's cap) as not; a deleted thread's next start is new again; the epoch is StartRun's.
func TestStartRunReportNewThread(t *testing.T) {
	ctx := context.Background()
	forEachBackend(t, func(t *testing.T, s Store) {
		msg := func(id string) Message {
			return Message{ID: id, Data: json.RawMessage(`{"id":"` + id + `","role":"user","content":"hi"}`)}
		}
		start := RunStart{ThreadID: "t1", RunID: "r1", Owner: "alice", Replica: "a", Lease: time.Minute,
			Messages: []Message{msg("u1")}}
		got, err := s.StartRunReport(ctx, start)
		require.NoError(t, err)
		assert.True(t, got.NewThread, "the start created the thread")
		run, err := s.GetRun(ctx, "t1", "r1")
		require.NoError(t, err)
		assert.Equal(t, run.Epoch, got.Epoch)
		require.NoError(t, s.EndRun(ctx, "t1", "r1", got.Epoch, "success"))

		again := start
		again.RunID = "r2"
		got, err = s.StartRunReport(ctx, again)
		require.NoError(t, err)
		assert.False(t, got.NewThread, "the thread's second run")
		require.NoError(t, s.EndRun(ctx, "t1", "r2", got.Epoch, "success"))

		refused := again
		refused.RunID, refused.Owner = "r3", "mallory"
		got, err = s.StartRunReport(ctx, refused)
		require.ErrorIs(t, err, ErrThreadOwned)
		assert.False(t, got.NewThread, "a refused start reports nothing")

		_, err = s.ClaimThread(ctx, "t2", "alice", "")
		require.NoError(t, err)
		claimed := RunStart{ThreadID: "t2", RunID: "r1", Owner: "alice", Replica: "a", Lease: time.Minute}
		got, err = s.StartRunReport(ctx, claimed)
		require.NoError(t, err)
		assert.False(t, got.NewThread, "claimed before its first run")

		// Under the owner's cap (the capped claim), and with a message id repeated (the
		// PostgreSQL store's other path): the same report.
		capped := RunStart{ThreadID: "t3", RunID: "r1", Owner: "alice", MaxThreads: 10, Replica: "a", Lease: time.Minute,
			Messages: []Message{msg("u1"), msg("u1")}}
		got, err = s.StartRunReport(ctx, capped)
		require.NoError(t, err)
		assert.True(t, got.NewThread, "capped, repeated ids: created")
		require.NoError(t, s.EndRun(ctx, "t3", "r1", got.Epoch, "success"))
		capped.RunID = "r2"
		got, err = s.StartRunReport(ctx, capped)
		require.NoError(t, err)
		assert.False(t, got.NewThread, "capped, repeated ids: existed")
		require.NoError(t, s.EndRun(ctx, "t3", "r2", got.Epoch, "success"))
		capped.Messages = []Message{msg("u2")}
		capped.ThreadID, capped.RunID = "t4", "r1"
		got, err = s.StartRunReport(ctx, capped)
		require.NoError(t, err)
		assert.True(t, got.NewThread, "capped: created")

		// Rows of a thread without a record (written without a claim, or by a store older
		// than the threads' records): its first claim does not make it new.
		for id, write := range map[string]func() error{
			"orphan-msgs": func() error { return s.SaveMessages(ctx, "orphan-msgs", []Message{msg("m1")}) },
			"orphan-susp": func() error {
				return s.SaveSuspension(ctx, &Suspension{ThreadID: "orphan-susp", RunID: "r0", Owner: "alice"})
			},
			"orphan-run": func() error { return begun(s.BeginRun(ctx, "orphan-run", "r0", "a", time.Minute)) },
		} {
			require.NoError(t, write(), id)
			_, err := s.GetThread(ctx, id)
			require.ErrorIs(t, err, ErrNotFound, id)
			if id == "orphan-run" {
				require.NoError(t, s.EndRun(ctx, id, "r0", 1, "success"))
			}
			orphan := RunStart{ThreadID: id, RunID: "r1", Owner: "alice", Replica: "a", Lease: time.Minute}
			got, err = s.StartRunReport(ctx, orphan)
			require.NoError(t, err, id)
			assert.False(t, got.NewThread, id)
		}

		// A deleted thread leaves nothing: its next start creates it again.
		require.NoError(t, s.DeleteThread(ctx, "t1"))
		got, err = s.StartRunReport(ctx, start)
		require.NoError(t, err)
		assert.True(t, got.NewThread, "the deleted thread's next start")
	})
}
