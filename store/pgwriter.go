package store

import (
	"context"
	"encoding/json"
	"errors"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
)

// pgWriter runs the hot writes of a run on PostgreSQL straight on the pgx pool, as
// pipelined batches: the statements of a batch go out together and their answers come
// back together, one round trip where database/sql takes one per statement plus BEGIN and
// COMMIT. The statements, their order, the locks and the transactions are the ones the
// database/sql path uses (design/store-write-path.md); only the waiting between them goes.
type pgWriter struct {
	pool *pgxpool.Pool
	d    *dialect
}

// rollbackTimeout bounds the ROLLBACK sent after a failed batch; a connection that cannot
// roll back is not returned to the pool (pgxpool destroys a connection left inside a
// transaction), so this only bounds the wait.
const rollbackTimeout = 5 * time.Second

// rollback ends conn's open transaction after a failure.
func rollback(ctx context.Context, conn *pgxpool.Conn) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), rollbackTimeout)
	defer cancel()
	_, _ = conn.Exec(ctx, "ROLLBACK")
}

// isRunConflict reports whether err is the insert of a run refused by one of the runs
// table's unique indexes: another run holds the thread (runs_one_active) or this run id is
// running (the primary key).
func isRunConflict(err error) bool {
	var pe *pgconn.PgError
	return errors.As(err, &pe) && pe.Code == "23505" && (pe.ConstraintName == "runs_one_active" || pe.ConstraintName == "runs_pkey")
}

// startRun is sqlStore.StartRun in two round trips of one transaction. The first takes the
// thread's lock (and, for a capped owner's new thread, the owner's), claims the thread,
// reads its owner, marks a lapsed run of the thread lost and reads the old epoch of a
// reused run id; the second, sent only when the owner and the cap allow the start,
// replaces the reused run, inserts the run with the next epoch, saves the input's messages
// and commits. The run's insert has no ON CONFLICT: a conflict fails the statement, the
// server skips the rest of the batch (COMMIT included) and the transaction is rolled
// back, so a refused start records nothing, as before.
func (w *pgWriter) startRun(ctx context.Context, rs RunStart) (started Started, err error) {
	conn, err := w.pool.Acquire(ctx)
	if err != nil {
		return Started{}, err
	}
	defer conn.Release()
	open := false // a transaction may be open on conn
	defer func() {
		if err != nil && open {
			rollback(ctx, conn)
		}
	}()
	now := time.Now().UnixNano()
	var (
		existed bool
		count   int
		owner   string
		old     int64
	)
	b := &pgx.Batch{}
	b.Queue("BEGIN")
	b.Queue(w.d.lockThread, rs.ThreadID)
	capped := rs.MaxThreads > 0
	if capped {
		// The owner's lock only for a new thread; the count in a later statement, whose
		// snapshot is taken once the lock is held, so that it sees every thread the
		// owner's other starts committed. While this transaction holds the thread's lock
		// the thread cannot go, so a thread missing below was missing here too and the
		// lock was taken.
		b.Queue(`SELECT pg_advisory_xact_lock(1, hashtext($2::TEXT)) WHERE NOT EXISTS (SELECT 1 FROM threads WHERE thread_id = $1)`,
			rs.ThreadID, rs.Owner)
		b.Queue(`SELECT EXISTS (SELECT 1 FROM threads WHERE thread_id = $1), COALESCE((SELECT threads FROM principal_threads WHERE owner = $2), 0)`,
			rs.ThreadID, rs.Owner).QueryRow(func(r pgx.Row) error { return r.Scan(&existed, &count) })
	}
	// ON CONFLICT DO NOTHING: of two replicas creating the same thread, one inserts; the
	// owner is read by a statement of its own, whose snapshot sees the winner's row.
	created := false
	b.Queue(`INSERT INTO threads (thread_id, owner, title, created_at, updated_at)
		VALUES ($1, $2, $3, $4, $4) ON CONFLICT (thread_id) DO NOTHING`, rs.ThreadID, rs.Owner, rs.Title, now).
		Exec(func(ct pgconn.CommandTag) error { created = ct.RowsAffected() == 1; return nil })
	// Whether the store held anything else of the thread (Started.NewThread): a statement
	// more in this batch, no round trip more.
	held := false
	b.Queue(heldElse, rs.ThreadID).QueryRow(func(r pgx.Row) error { return r.Scan(&held) })
	b.Queue(`SELECT owner FROM threads WHERE thread_id = $1`, rs.ThreadID).
		QueryRow(func(r pgx.Row) error { return r.Scan(&owner) })
	// A running run whose replica stopped heartbeating no longer holds the thread; a
	// reused run id starts over with the next epoch (the read sees the update above).
	b.Queue(`UPDATE runs SET state = 'lost' WHERE thread_id = $1 AND state = 'running' AND lease_until <= `+w.d.nowNS, rs.ThreadID)
	reused := false
	b.Queue(`SELECT epoch FROM runs WHERE thread_id = $1 AND run_id = $2 AND state <> 'running'`, rs.ThreadID, rs.RunID).
		QueryRow(func(r pgx.Row) error {
			err := r.Scan(&old)
			if errors.Is(err, pgx.ErrNoRows) {
				return nil
			}
			reused = err == nil
			return err
		})
	open = true
	if err := conn.SendBatch(ctx, b).Close(); err != nil {
		return Started{}, err
	}
	if capped && !existed && count >= rs.MaxThreads {
		return Started{}, ErrTooManyThreads
	}
	if owner != rs.Owner {
		return Started{}, ErrThreadOwned
	}

	epoch, err := w.insertRun(ctx, conn, rs, old+1, reused, now)
	if err != nil && !errors.Is(err, errStepLater) {
		return Started{}, err
	}
	open = false // committed
	return Started{Epoch: epoch, NewThread: created && !held}, err
}

// insertRun is the second batch of a run's start: the run recorded under epoch (a reused
// run id's old record and events replaced), the thread's last run, its new messages, and
// the commit of the transaction startRun opened on conn.
func (w *pgWriter) insertRun(ctx context.Context, conn *pgxpool.Conn, rs RunStart, epoch int64, reused bool, now int64) (int64, error) {
	b := &pgx.Batch{}
	if reused {
		b.Queue(`DELETE FROM runs WHERE thread_id = $1 AND run_id = $2 AND state <> 'running'`, rs.ThreadID, rs.RunID)
		b.Queue(`DELETE FROM events WHERE thread_id = $1 AND run_id = $2`, rs.ThreadID, rs.RunID)
	}
	doc := "{}"
	if rs.Work != nil {
		doc = string(rs.Work)
	}
	b.Queue(`INSERT INTO runs (thread_id, run_id, replica, state, started_at, updated_at, lease_until, work, epoch)
		VALUES ($1, $2, $3, 'running', $4, $4, `+w.d.nowNS+` + $5, $6, $7)`,
		rs.ThreadID, rs.RunID, rs.Replica, now, rs.Lease.Nanoseconds(), doc, epoch)
	b.Queue(`UPDATE threads SET last_run_id = $2, last_run_at = $3, updated_at = $3 WHERE thread_id = $1`, rs.ThreadID, rs.RunID, now)
	queueMessages(b, rs.ThreadID, rs.Messages)
	stepLater := false
	if st := rs.Step; st != nil {
		st.ThreadID, st.RunID, st.Epoch = rs.ThreadID, rs.RunID, epoch
		b.Queue(recordStepPGSQL(true), stepArgs(st)...).QueryRow(func(row pgx.Row) error {
			err := row.Scan(&st.Seq)
			if errors.Is(err, pgx.ErrNoRows) {
				stepLater = true // its number was taken meanwhile (recordStepPG)
				return nil
			}
			return err
		})
	}
	b.Queue("COMMIT")
	if err := conn.SendBatch(ctx, b).Close(); err != nil {
		if isRunConflict(err) {
			return 0, ErrThreadBusy
		}
		return 0, err
	}
	if stepLater {
		return epoch, errStepLater
	}
	return epoch, nil
}

// insertMessages numbers a thread's new messages after its last and keeps a known id's
// position, in one statement ($1 the thread, $2 the ids, $3 the documents; the ids
// distinct). Its snapshot must be taken after the thread's lock is held.
const insertMessages = `INSERT INTO messages (thread_id, message_id, pos, data)
	SELECT $1, m.id, (SELECT COALESCE(MAX(pos), 0) FROM messages WHERE thread_id = $1) + m.n, m.data
	FROM unnest($2::TEXT[], $3::TEXT[]) WITH ORDINALITY AS m(id, data, n)
	ON CONFLICT (thread_id, message_id) DO UPDATE SET data = excluded.data`

// trimMessagesPG keeps a thread's newest MaxMessagesPerThread ($2) messages.
const trimMessagesPG = `DELETE FROM messages WHERE thread_id = $1 AND pos <= (
	SELECT pos FROM messages WHERE thread_id = $1 ORDER BY pos DESC LIMIT 1 OFFSET $2)`

// queueMessages queues the statements that save msgs (distinct ids) to threadID; none
// when there are none.
func queueMessages(b *pgx.Batch, threadID string, msgs []Message) {
	if len(msgs) == 0 {
		return
	}
	ids, data := make([]string, len(msgs)), make([]string, len(msgs))
	for i, m := range msgs {
		ids[i], data[i] = m.ID, string(m.Data)
	}
	b.Queue(insertMessages, threadID, ids, data)
	b.Queue(trimMessagesPG, threadID, MaxMessagesPerThread)
}

// saveMessages is sqlStore.SaveMessages (distinct ids) in one round trip: the thread's
// lock, the insert and the trim in one batch, which the server runs as one implicit
// transaction (all or nothing, the lock held to its end).
func (w *pgWriter) saveMessages(ctx context.Context, threadID string, msgs []Message) error {
	b := &pgx.Batch{}
	b.Queue(w.d.lockThread, threadID)
	queueMessages(b, threadID, msgs)
	return w.pool.SendBatch(ctx, b).Close()
}

// appendEventsSQL inserts a run's events guarded by its epoch in one statement: the CTE
// share-locks the run's row while the statement runs (so a takeover's UPDATE of the row
// waits for it, and a statement that waited for a takeover re-reads the row and finds the
// epoch moved on), and the insert takes its rows from it, so a stale owner inserts none.
const appendEventsSQL = `WITH g AS MATERIALIZED (
		SELECT 1 FROM runs WHERE thread_id = $1::TEXT AND run_id = $2::TEXT AND epoch = $3::BIGINT FOR SHARE)
	INSERT INTO events (thread_id, run_id, seq, at, data)
	SELECT $1::TEXT, $2::TEXT, e.seq, $4::BIGINT, e.data FROM g, unnest($5::BIGINT[], $6::TEXT[]) AS e(seq, data)`

// appendEvents is sqlStore.AppendEvents in one round trip (it was four: BEGIN, the guard,
// the insert, COMMIT), all events in one statement. afterGuard, when set (tests), runs
// with the statement executed and its transaction still open.
func (w *pgWriter) appendEvents(ctx context.Context, threadID, runID string, epoch int64, evs []Event, afterGuard func()) error {
	seqs, data := make([]int64, len(evs)), make([]string, len(evs))
	for i, ev := range evs {
		seqs[i], data[i] = ev.Seq, string(ev.Data)
	}
	args := []any{threadID, runID, epoch, time.Now().UnixNano(), seqs, data}
	var tag pgconn.CommandTag
	if afterGuard == nil {
		var err error
		if tag, err = w.pool.Exec(ctx, appendEventsSQL, args...); err != nil {
			if isEventsConflict(err) {
				return w.appendRest(ctx, threadID, runID, epoch, evs)
			}
			return err
		}
	} else {
		err := pgx.BeginFunc(ctx, w.pool, func(tx pgx.Tx) error {
			var err error
			tag, err = tx.Exec(ctx, appendEventsSQL, args...)
			if err == nil {
				afterGuard()
			}
			return err
		})
		if err != nil {
			return err
		}
	}
	if tag.RowsAffected() == 0 {
		return ErrFenced
	}
	return nil
}

// saveWorkPG replaces a run's work document under its epoch (saveWorkSQL in PostgreSQL's
// placeholders).
const saveWorkPG = `UPDATE runs SET work = $3, updated_at = $4 WHERE thread_id = $1 AND run_id = $2 AND epoch = $5`

// saveRunLog is sqlStore.SaveRunLog in one round trip: the guarded append and the work
// document's update in one pipelined batch, which the server runs as one implicit
// transaction (all or nothing; the append's share lock on the run's row held to its end,
// so the update meets the epoch the append saw). An append that meets its own events
// (a retry after a lost COMMIT: the batch as a whole committed or did not) goes the slow
// way: the rest of the events (appendRest), then the document, each under the guard.
func (w *pgWriter) saveRunLog(ctx context.Context, threadID, runID string, epoch int64, evs []Event, work json.RawMessage) error {
	seqs, data := make([]int64, len(evs)), make([]string, len(evs))
	for i, ev := range evs {
		seqs[i], data[i] = ev.Seq, string(ev.Data)
	}
	now := time.Now().UnixNano()
	b := &pgx.Batch{}
	var appended, updated int64
	b.Queue(appendEventsSQL, threadID, runID, epoch, now, seqs, data).Exec(func(tag pgconn.CommandTag) error {
		appended = tag.RowsAffected()
		return nil
	})
	b.Queue(saveWorkPG, threadID, runID, string(work), now, epoch).Exec(func(tag pgconn.CommandTag) error {
		updated = tag.RowsAffected()
		return nil
	})
	err := w.pool.SendBatch(ctx, b).Close()
	switch {
	case isEventsConflict(err):
		if err := w.appendRest(ctx, threadID, runID, epoch, evs); err != nil {
			return err
		}
		tag, err := w.pool.Exec(ctx, saveWorkPG, threadID, runID, string(work), time.Now().UnixNano(), epoch)
		if err != nil {
			return err
		}
		if tag.RowsAffected() == 0 {
			return ErrFenced
		}
		return nil
	case err != nil:
		return err
	case appended == 0 || updated == 0:
		return ErrFenced
	}
	return nil
}

// endRunStep is sqlStore.EndRunStep in one round trip: the run's end and its step's
// insert (recordStepPGSQL, guarded by the same epoch when fenced) in one pipelined batch,
// one implicit transaction. It returns the step's number; errNoRun when the end changed no
// row (nothing is stored: the step's guard fails as the end's did); errStepLater when the
// run was ended but the step's number was taken by a concurrent step of the thread (the
// caller records it on its own).
func (w *pgWriter) endRunStep(ctx context.Context, threadID, runID string, epoch int64, state string, stepArgs []any, fenced bool) (int64, error) {
	b := &pgx.Batch{}
	var ended int64
	var seq int64
	inserted := false
	b.Queue(endRunSQL, threadID, runID, state, time.Now().UnixNano(), epoch).Exec(func(tag pgconn.CommandTag) error {
		ended = tag.RowsAffected()
		return nil
	})
	b.Queue(recordStepPGSQL(fenced), stepArgs...).QueryRow(func(row pgx.Row) error {
		err := row.Scan(&seq)
		if errors.Is(err, pgx.ErrNoRows) {
			return nil
		}
		inserted = err == nil
		return err
	})
	if err := w.pool.SendBatch(ctx, b).Close(); err != nil {
		return 0, err
	}
	switch {
	case ended == 0:
		return 0, errNoRun
	case !inserted:
		return 0, errStepLater
	}
	return seq, nil
}

// endBatch is what endRunMessages writes: the run's end under its epoch, its step's
// columns (nil: none) and the messages it added to its thread (distinct ids).
type endBatch struct {
	threadID, runID string
	epoch           int64
	state           string
	stepArgs        []any
	msgs            []Message
}

// insertMessagesGuarded is insertMessages ($1 the thread, $2 the ids, $3 the documents)
// for the run $4 under epoch $5: it inserts nothing unless the run has that epoch. In the
// batch of endRunMessages the end's UPDATE of the run's row comes first and holds the
// row's lock, so the row has the epoch here exactly when the end changed it.
const insertMessagesGuarded = `INSERT INTO messages (thread_id, message_id, pos, data)
	SELECT $1, m.id, (SELECT COALESCE(MAX(pos), 0) FROM messages WHERE thread_id = $1) + m.n, m.data
	FROM unnest($2::TEXT[], $3::TEXT[]) WITH ORDINALITY AS m(id, data, n)
	WHERE EXISTS (SELECT 1 FROM runs WHERE thread_id = $1 AND run_id = $4::TEXT AND epoch = $5::BIGINT)
	ON CONFLICT (thread_id, message_id) DO UPDATE SET data = excluded.data`

// endRunMessages is sqlStore.EndRunMessages in one round trip: the thread's lock (taken
// first, as every transaction of the thread takes it), the run's end, its step's insert
// (recordStepPGSQL, guarded by the same epoch) and the messages' insert (guarded by the
// epoch too) and trim, in one pipelined batch, one implicit transaction. It returns the
// step's number; errNoRun when the end changed no row (nothing is stored: the step's and
// the messages' guards fail as the end's did); errStepLater when the run was ended and its
// messages saved but the step's number was taken by a concurrent step of the thread (the
// caller records it on its own).
func (w *pgWriter) endRunMessages(ctx context.Context, e endBatch) (int64, error) {
	b := &pgx.Batch{}
	var ended, seq int64
	inserted := false
	b.Queue(w.d.lockThread, e.threadID)
	b.Queue(endRunSQL, e.threadID, e.runID, e.state, time.Now().UnixNano(), e.epoch).Exec(func(tag pgconn.CommandTag) error {
		ended = tag.RowsAffected()
		return nil
	})
	if e.stepArgs != nil {
		b.Queue(recordStepPGSQL(e.epoch != 0), e.stepArgs...).QueryRow(func(row pgx.Row) error {
			err := row.Scan(&seq)
			if errors.Is(err, pgx.ErrNoRows) {
				return nil
			}
			inserted = err == nil
			return err
		})
	}
	if len(e.msgs) > 0 {
		ids, data := make([]string, len(e.msgs)), make([]string, len(e.msgs))
		for i, m := range e.msgs {
			ids[i], data[i] = m.ID, string(m.Data)
		}
		b.Queue(insertMessagesGuarded, e.threadID, ids, data, e.runID, e.epoch)
		b.Queue(trimMessagesPG, e.threadID, MaxMessagesPerThread)
	}
	if err := w.pool.SendBatch(ctx, b).Close(); err != nil {
		return 0, err
	}
	switch {
	case ended == 0:
		return 0, errNoRun
	case e.stepArgs != nil && !inserted:
		return 0, errStepLater
	}
	return seq, nil
}

// isEventsConflict reports an append refused because an event of it is stored already.
func isEventsConflict(err error) bool {
	var pe *pgconn.PgError
	return errors.As(err, &pe) && pe.Code == "23505" && pe.ConstraintName == "events_pkey"
}

// appendRest is an append retried after its earlier attempt may have committed: a COMMIT
// whose reply was lost (a cut connection) leaves the outcome unknown, and the retry then
// meets the events it stored itself. Those that are stored exactly as given are dropped
// and the rest appended under the same guard; an event stored with other data at one of
// these numbers was written by someone else, so this writer no longer owns the log.
func (w *pgWriter) appendRest(ctx context.Context, threadID, runID string, epoch int64, evs []Event) error {
	seqs := make([]int64, len(evs))
	for i, ev := range evs {
		seqs[i] = ev.Seq
	}
	rows, err := w.pool.Query(ctx, `SELECT seq, data FROM events WHERE thread_id = $1 AND run_id = $2 AND seq = ANY($3::BIGINT[])`,
		threadID, runID, seqs)
	if err != nil {
		return err
	}
	stored := make(map[int64]string, len(evs))
	var seq int64
	var data string
	_, err = pgx.ForEachRow(rows, []any{&seq, &data}, func() error {
		stored[seq] = data
		return nil
	})
	if err != nil {
		return err
	}
	rest := make([]Event, 0, len(evs))
	for _, ev := range evs {
		got, ok := stored[ev.Seq]
		switch {
		case !ok:
			rest = append(rest, ev)
		case got != string(ev.Data):
			return ErrFenced
		}
	}
	if len(rest) == 0 {
		return nil
	}
	seqs, texts := make([]int64, len(rest)), make([]string, len(rest))
	for i, ev := range rest {
		seqs[i], texts[i] = ev.Seq, string(ev.Data)
	}
	tag, err := w.pool.Exec(ctx, appendEventsSQL, threadID, runID, epoch, time.Now().UnixNano(), seqs, texts)
	switch {
	case isEventsConflict(err):
		// Another writer took one of the remaining numbers between the read and now.
		return ErrFenced
	case err != nil:
		return err
	case tag.RowsAffected() == 0:
		return ErrFenced
	}
	return nil
}

// endStepSQL completes a pending step, guarded (when $9 is not 0) by its run's epoch in the
// same statement, as appendEventsSQL is.
const endStepSQL = `UPDATE journal SET outcome = $3, tag = $4, failure_kind = $5,
		detail = CASE WHEN $6::TEXT = '' THEN detail ELSE $6::TEXT END, in_doubt = $7, ended_at = $8
	WHERE thread_id = $1 AND seq = $2 AND outcome = 'pending' AND ($9::BIGINT = 0 OR EXISTS (
		SELECT 1 FROM runs WHERE runs.thread_id = $1 AND runs.run_id = journal.run_id AND runs.epoch = $9::BIGINT FOR SHARE))`

// endStep is sqlStore.EndStep in one round trip (it was five: BEGIN, the thread's lock,
// the step's run, the guard, the update, COMMIT). When it changes no row, a read says why:
// ErrNotFound (no such step, or not pending) or ErrFenced (the run's epoch moved on).
func (w *pgWriter) endStep(ctx context.Context, threadID string, seq int64, end StepEnd, inDoubt int) error {
	tag, err := w.pool.Exec(ctx, endStepSQL, threadID, seq, end.Outcome, end.Tag, end.FailureKind, end.Detail, inDoubt,
		time.Now().UnixNano(), end.Epoch)
	if err != nil {
		return err
	}
	if tag.RowsAffected() > 0 {
		return nil
	}
	return stepEndRefusal(w.pool.QueryRow(ctx, stepEndRefusalSQL, threadID, seq), end.Epoch)
}
