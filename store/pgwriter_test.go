package store

import (
	"context"
	"encoding/json"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/baton-dev/baton/internal/testutil/pgtest"
)

// roundTrips counts the round trips of the PostgreSQL operations whose context carries it:
// each statement sent on its own and each pipelined batch is one. (The once-per-connection
// prepare of a statement's text is not counted: pgx caches the prepared statement.)
type roundTrips struct{ n atomic.Int64 }

type roundTripsKey struct{}

// counted returns ctx carrying a fresh counter.
func counted(ctx context.Context) (context.Context, *roundTrips) {
	c := &roundTrips{}
	return context.WithValue(ctx, roundTripsKey{}, c), c
}

// tripTracer is a pgx tracer adding to the counter of the operation's context.
type tripTracer struct{}

func (tripTracer) add(ctx context.Context) {
	if c, ok := ctx.Value(roundTripsKey{}).(*roundTrips); ok {
		c.n.Add(1)
	}
}

func (t tripTracer) TraceQueryStart(ctx context.Context, _ *pgx.Conn, _ pgx.TraceQueryStartData) context.Context {
	t.add(ctx)
	return ctx
}
func (tripTracer) TraceQueryEnd(context.Context, *pgx.Conn, pgx.TraceQueryEndData) {}
func (t tripTracer) TraceBatchStart(ctx context.Context, _ *pgx.Conn, _ pgx.TraceBatchStartData) context.Context {
	t.add(ctx)
	return ctx
}
func (tripTracer) TraceBatchQuery(context.Context, *pgx.Conn, pgx.TraceBatchQueryData) {}
func (tripTracer) TraceBatchEnd(context.Context, *pgx.Conn, pgx.TraceBatchEndData)     {}

// openCountedPostgres opens a PostgreSQL store whose round trips counted contexts count.
func openCountedPostgres(t *testing.T) *sqlStore {
	t.Helper()
	s, err := openPostgres(context.Background(), pgtest.DSN(t), func(c *pgxpool.Config) { c.ConnConfig.Tracer = tripTracer{} })
	require.NoError(t, err)
	t.Cleanup(func() { _ = s.Close() })
	return s
}

// TestPostgresRoundTrips counts the round trips of each write of a run's life on
// PostgreSQL: the start (a capped owner's new thread, with its input message) is two, every
// other write one (events and the work document together too: SaveRunLog; a run's end
// and its step: EndRunStep; with the thread's messages too: EndRunMessages). Each operation runs once on another thread first, so that
// the connections have prepared its statements.
func TestPostgresRoundTrips(t *testing.T) {
	s := openCountedPostgres(t)
	work := json.RawMessage(`{"checkpoint":{"v":1}}`)
	ev := []Event{{Seq: 1, Data: json.RawMessage(`{"type":"RUN_STARTED"}`)}, {Seq: 2, Data: json.RawMessage(`{"type":"TEXT"}`)}}
	msg := func(id string) []Message {
		return []Message{{ID: id, Data: json.RawMessage(`{"id":"` + id + `","role":"user","content":"go"}`)}}
	}
	life := func(ctx context.Context, thread string, count func(op string)) {
		epoch, err := s.StartRun(ctx, RunStart{ThreadID: thread, RunID: "r", Owner: "alice", Title: "go", MaxThreads: 100,
			Replica: "a", Lease: time.Minute, Work: work, Messages: msg("u")})
		require.NoError(t, err)
		count("StartRun")
		require.NoError(t, s.AppendEvents(ctx, thread, "r", epoch, ev))
		count("AppendEvents")
		step := &Step{ThreadID: thread, RunID: "r", Kind: StepModelCall, Replica: "a", Epoch: epoch}
		require.NoError(t, s.RecordStep(ctx, step))
		count("RecordStep")
		require.NoError(t, s.EndStep(ctx, thread, step.Seq, StepEnd{Outcome: StepOK, Epoch: epoch}))
		count("EndStep")
		require.NoError(t, s.SaveRunWork(ctx, thread, "r", epoch, work))
		count("SaveRunWork")
		more := []Event{{Seq: 3, Data: json.RawMessage(`{"type":"TEXT"}`)}}
		require.NoError(t, s.SaveRunLog(ctx, thread, "r", epoch, more, work))
		count("SaveRunLog")
		require.NoError(t, s.SaveMessages(ctx, thread, msg("a")))
		count("SaveMessages")
		require.NoError(t, s.EndRun(ctx, thread, "r", epoch, "success"))
		count("EndRun")
		require.NoError(t, s.EndRunStep(ctx, thread, "r", epoch, "success", &Step{Kind: StepRunEnd, Outcome: "success", Replica: "a"}))
		count("EndRunStep")
		require.NoError(t, s.EndRunMessages(ctx, thread, "r", epoch, "success", &Step{Kind: StepRunEnd, Outcome: "success", Replica: "a"}, msg("b")))
		count("EndRunMessages")
	}
	for range 3 { // the pool's connections prepare the statements
		life(context.Background(), "warm-"+time.Now().Format("150405.000000000"), func(string) {})
	}
	want := map[string]int64{"StartRun": 2, "AppendEvents": 1, "RecordStep": 1, "EndStep": 1, "SaveRunWork": 1,
		"SaveRunLog": 1, "SaveMessages": 1, "EndRunStep": 1, "EndRun": 1, "EndRunMessages": 1}
	ctx, c := counted(context.Background())
	got := map[string]int64{}
	var last int64
	life(ctx, "t", func(op string) {
		n := c.n.Load()
		got[op] = n - last
		last = n
	})
	assert.Equal(t, want, got)
	t.Logf("round trips of one run's writes: %d (%v)", c.n.Load(), got)
}

// TestStartRunReuse starts a run over a lapsed run of the thread and a run id used before:
// the lapsed run is lost, the reused id starts over with the next epoch and without its
// old events, and the old epoch's writes are refused.
func TestStartRunReuse(t *testing.T) {
	ctx := context.Background()
	forEachBackend(t, func(t *testing.T, s Store) {
		start := RunStart{ThreadID: "t", RunID: "r1", Owner: "alice", Replica: "a", Lease: -time.Second}
		e1, err := s.StartRun(ctx, start)
		require.NoError(t, err)
		require.NoError(t, s.AppendEvents(ctx, "t", "r1", e1, []Event{{Seq: 1, Data: json.RawMessage(`{"old":true}`)}}))

		// r1's lease has lapsed: a new run of the thread is allowed, r1 is lost.
		e2, err := s.StartRun(ctx, RunStart{ThreadID: "t", RunID: "r2", Owner: "alice", Replica: "b", Lease: time.Minute})
		require.NoError(t, err)
		assert.EqualValues(t, 1, e2)
		old, err := s.GetRun(ctx, "t", "r1")
		require.NoError(t, err)
		assert.Equal(t, RunLost, old.State)
		require.NoError(t, s.EndRun(ctx, "t", "r2", e2, "success"))

		// r1 again: it starts over with the next epoch and an empty log.
		start.Lease = time.Minute
		e3, err := s.StartRun(ctx, start)
		require.NoError(t, err)
		assert.Equal(t, e1+1, e3)
		evs, err := s.Events(ctx, "t", "r1", 0, 10)
		require.NoError(t, err)
		assert.Empty(t, evs, "the reused run's old events are gone")
		require.ErrorIs(t, s.AppendEvents(ctx, "t", "r1", e1, []Event{{Seq: 1, Data: json.RawMessage(`{}`)}}), ErrFenced)
		require.NoError(t, s.AppendEvents(ctx, "t", "r1", e3, []Event{{Seq: 1, Data: json.RawMessage(`{"new":true}`)}}))
		evs, err = s.Events(ctx, "t", "r1", 0, 10)
		require.NoError(t, err)
		require.Len(t, evs, 1)
		assert.JSONEq(t, `{"new":true}`, string(evs[0].Data))
		th, err := s.GetThread(ctx, "t")
		require.NoError(t, err)
		assert.Equal(t, "r1", th.LastRunID)

		// A running run id cannot be started again; nothing changes.
		_, err = s.StartRun(ctx, start)
		require.ErrorIs(t, err, ErrThreadBusy)
		run, err := s.GetRun(ctx, "t", "r1")
		require.NoError(t, err)
		assert.Equal(t, e3, run.Epoch)
		assert.Equal(t, RunRunning, run.State)
	})
}

// TestEndStepRefusals: ending a step that does not exist, is no longer pending, or
// belongs to a run whose epoch moved on fails with the error that says which, and changes
// nothing. On every backend.
func TestEndStepRefusals(t *testing.T) {
	ctx := context.Background()
	forEachBackend(t, func(t *testing.T, s Store) {
		epoch, err := s.BeginRun(ctx, "t", "r", "a", time.Minute)
		require.NoError(t, err)
		step := &Step{ThreadID: "t", RunID: "r", Kind: StepModelCall, Replica: "a", Epoch: epoch}
		require.NoError(t, s.RecordStep(ctx, step))

		require.ErrorIs(t, s.EndStep(ctx, "t", step.Seq+1, StepEnd{Outcome: StepOK, Epoch: epoch}), ErrNotFound)
		require.ErrorIs(t, s.EndStep(ctx, "t", step.Seq, StepEnd{Outcome: StepOK, Epoch: epoch + 1}), ErrFenced)
		steps, err := s.PendingSteps(ctx, "t", "r")
		require.NoError(t, err)
		require.Len(t, steps, 1, "a refused end changes nothing")

		require.NoError(t, s.EndStep(ctx, "t", step.Seq, StepEnd{Outcome: StepOK, Detail: "done", Epoch: epoch}))
		require.ErrorIs(t, s.EndStep(ctx, "t", step.Seq, StepEnd{Outcome: StepError, Epoch: epoch}), ErrNotFound)
		all, err := s.Steps(ctx, "t", 0, 10)
		require.NoError(t, err)
		require.Len(t, all, 1)
		assert.Equal(t, StepOK, all[0].Outcome)
		assert.Equal(t, "done", all[0].Detail)
	})
}

// TestStartRunCancelledInside cancels a PostgreSQL run start while its first batch waits
// for the thread's lock (held by another session): the start fails and records nothing,
// also after its session has run what it had been sent; the same start then goes through.
func TestStartRunCancelledInside(t *testing.T) {
	s := openCountedPostgres(t)
	ctx := context.Background()
	holder, err := s.pg.pool.Begin(ctx)
	require.NoError(t, err)
	_, err = holder.Exec(ctx, s.d.lockThread, "t")
	require.NoError(t, err)

	start := RunStart{ThreadID: "t", RunID: "r", Owner: "alice", Replica: "a", Lease: time.Minute,
		Messages: []Message{{ID: "u", Data: json.RawMessage(`{"id":"u"}`)}}}
	waiting, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() {
		_, err := s.StartRun(waiting, start)
		done <- err
	}()
	// The start is inside its transaction once its session waits for the advisory lock.
	require.Eventually(t, func() bool {
		var n int
		err := s.pg.pool.QueryRow(ctx, `SELECT COUNT(*) FROM pg_locks l JOIN pg_database d ON d.oid = l.database
			WHERE d.datname = current_database() AND l.locktype = 'advisory' AND NOT l.granted`).Scan(&n)
		return err == nil && n > 0
	}, 30*time.Second, 10*time.Millisecond)
	cancel()
	require.Error(t, <-done)
	require.NoError(t, holder.Rollback(ctx))

	// The cancelled start's session may still get the lock and run the rest of its first
	// batch before it finds its connection closed; it never commits. Once no session of
	// the database is inside a transaction any more, nothing of the start is stored.
	require.Eventually(t, func() bool {
		var inTx int
		err := s.pg.pool.QueryRow(ctx, `SELECT COUNT(*) FROM pg_stat_activity
			WHERE datname = current_database() AND state LIKE 'idle in transaction%'`).Scan(&inTx)
		return err == nil && inTx == 0
	}, 30*time.Second, 10*time.Millisecond)
	_, err = s.GetThread(ctx, "t")
	require.ErrorIs(t, err, ErrNotFound, "a cancelled start records nothing")
	epoch, err := s.StartRun(ctx, start)
	require.NoError(t, err)
	assert.EqualValues(t, 1, epoch)
	msgs, err := s.LoadMessages(ctx, "t")
	require.NoError(t, err)
	assert.Len(t, msgs, 1)
}

// TestAppendRetriedAfterLostReply: an append whose COMMIT reply was lost may have been
// stored; its retry (the same events, maybe with more after them) must store the rest and
// succeed, not fail on its own earlier rows for ever. An event stored with other data is
// another writer's, and refused as fenced.
func TestAppendRetriedAfterLostReply(t *testing.T) {
	s := openCountedPostgres(t)
	ctx := context.Background()
	thread := "lost-reply-" + time.Now().Format("150405.000000000")
	epoch, err := s.StartRun(ctx, RunStart{ThreadID: thread, RunID: "r", Owner: "alice", Title: "go", MaxThreads: 100,
		Replica: "a", Lease: time.Minute})
	require.NoError(t, err)
	ev := func(seq int64, typ string) Event {
		return Event{Seq: seq, Data: json.RawMessage(`{"type":"` + typ + `"}`)}
	}
	// The first attempt was stored; its answer never came back.
	require.NoError(t, s.AppendEvents(ctx, thread, "r", epoch, []Event{ev(1, "RUN_STARTED"), ev(2, "TEXT")}))
	// The retry holds the same events and the next ones.
	require.NoError(t, s.AppendEvents(ctx, thread, "r", epoch, []Event{ev(1, "RUN_STARTED"), ev(2, "TEXT"), ev(3, "TEXT"), ev(4, "RUN_FINISHED")}))
	// A retry that was stored whole changes nothing and succeeds.
	require.NoError(t, s.AppendEvents(ctx, thread, "r", epoch, []Event{ev(3, "TEXT"), ev(4, "RUN_FINISHED")}))
	got, err := s.Events(ctx, thread, "r", 0, 100)
	require.NoError(t, err)
	require.Len(t, got, 4)
	for i, e := range got {
		assert.Equal(t, int64(i+1), e.Seq)
	}
	assert.JSONEq(t, `{"type":"RUN_FINISHED"}`, string(got[3].Data))

	// Other data at a stored number: not this writer's log any more; nothing is stored.
	err = s.AppendEvents(ctx, thread, "r", epoch, []Event{ev(4, "RUN_ERROR"), ev(5, "TEXT")})
	require.ErrorIs(t, err, ErrFenced)
	got, err = s.Events(ctx, thread, "r", 0, 100)
	require.NoError(t, err)
	assert.Len(t, got, 4)
}
