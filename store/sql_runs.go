package store

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"
)

// sqlRuns are a SQL store's runs, their event logs and the start of a run (which claims
// its thread and saves its input's messages, through threads, in the run's transaction).
type sqlRuns struct {
	*sqlConn
	d       *dialect // the SQL it writes
	threads sqlThreads
}

func (s sqlRuns) BeginRun(ctx context.Context, threadID, runID, replica string, lease time.Duration) (int64, error) {
	if err := s.check(); err != nil {
		return 0, err
	}
	var epoch int64
	err := s.tx(ctx, threadID, func(ctx context.Context, tx *sql.Tx) error {
		var err error
		epoch, err = s.beginRun(ctx, tx, threadID, runID, replica, lease, nil, false)
		return err
	})
	if err != nil {
		return 0, fmt.Errorf("store: begin run %q of thread %q: %w", runID, threadID, err)
	}
	return epoch, nil
}

// StartRun implements RunStarter: ClaimThread, BeginRun and SaveRunWork in one transaction.
func (s sqlRuns) StartRun(ctx context.Context, rs RunStart) (int64, error) {
	started, err := s.StartRunReport(ctx, rs)
	return started.Epoch, err
}

// StartRunReport implements RunStarter: StartRun, reporting the thread as new when the
// start's claim inserted its row.
func (s sqlRuns) StartRunReport(ctx context.Context, rs RunStart) (Started, error) {
	if err := s.check(); err != nil {
		return Started{}, err
	}
	if rs.Work != nil && !json.Valid(rs.Work) {
		return Started{}, fmt.Errorf("store: start run %q: work is not JSON", rs.RunID)
	}
	if err := checkMessages(rs.Messages); err != nil {
		return Started{}, fmt.Errorf("store: start run %q of thread %q: %w", rs.RunID, rs.ThreadID, err)
	}
	if s.pg != nil && distinctIDs(rs.Messages) {
		started, err := s.pg.startRun(ctx, rs)
		err = unavailable(err)
		s.health.note(err)
		if errors.Is(err, errStepLater) {
			// The run started; its step lost a race for its number with another step of
			// the thread: it is recorded on its own, as RecordStep does.
			recordStartStep(ctx, sqlJournal{s.sqlConn, s.d}, rs.Step)
			err = nil
		}
		if err != nil {
			return Started{}, fmt.Errorf("store: start run %q of thread %q: %w", rs.RunID, rs.ThreadID, err)
		}
		return started, nil
	}
	var started Started
	err := s.txStart(ctx, rs.ThreadID, func(ctx context.Context, tx *sql.Tx) error {
		owner, fresh, err := s.threads.claimInTx(ctx, tx, rs)
		if err != nil {
			return err
		}
		if owner != rs.Owner {
			return ErrThreadOwned
		}
		started.NewThread = fresh
		started.Epoch, err = s.beginRun(ctx, tx, rs.ThreadID, rs.RunID, rs.Replica, rs.Lease, rs.Work, fresh)
		if err != nil {
			return err
		}
		if fresh && s.pg == nil {
			// The thread holds no message (claimInTx read it): no last position to read.
			err = s.threads.insertMessagesAfter(ctx, tx, rs.ThreadID, rs.Messages, 0)
		} else {
			err = s.threads.saveMessages(ctx, tx, rs.ThreadID, rs.Messages)
		}
		if err != nil {
			return err
		}
		if st := rs.Step; st != nil && s.pg == nil {
			st.ThreadID, st.RunID, st.Epoch = rs.ThreadID, rs.RunID, started.Epoch
			st.Seq, err = sqlJournal{s.sqlConn, s.d}.recordTx(ctx, tx, stepArgs(st))
			return err
		}
		return nil
	})
	if err == nil && rs.Step != nil && s.pg != nil {
		// PostgreSQL's start with repeated message ids: the step is recorded after it.
		st := rs.Step
		st.ThreadID, st.RunID, st.Epoch = rs.ThreadID, rs.RunID, started.Epoch
		recordStartStep(ctx, sqlJournal{s.sqlConn, s.d}, st)
	}
	if err != nil {
		return Started{}, fmt.Errorf("store: start run %q of thread %q: %w", rs.RunID, rs.ThreadID, err)
	}
	return started, nil
}

// recordStartStep records a started run's step on its own (PostgreSQL, when it could not go
// in the start's transaction). The run has started whatever becomes of it: the step is an
// audit record, never a precondition, so a failure leaves it unrecorded (Seq 0) and the
// start stands.
func recordStartStep(ctx context.Context, j sqlJournal, st *Step) {
	seq, err := j.recordStepPG(ctx, stepArgs(st), true)
	if err != nil {
		seq = 0
	}
	st.Seq = seq
}

// lapse marks lost a running run of the thread whose replica stopped heartbeating (it no
// longer holds the thread), and clears runID's old record and events when the id is
// reused: its epoch moves on (old, 0 for a new id), so that whoever still writes for the
// old run is fenced.
func (s sqlRuns) lapse(ctx context.Context, tx *sql.Tx, threadID, runID string) (old int64, err error) {
	if s.w == nil {
		// PostgreSQL: both in one statement. The SELECT sees the rows as they were before
		// the UPDATE (one snapshot), so a run the UPDATE just marked lost counts as ended.
		err = tx.QueryRowContext(ctx, `WITH lost AS (UPDATE runs SET state = 'lost'
				WHERE thread_id = $1 AND state = 'running' AND lease_until <= `+s.d.nowNS+` RETURNING run_id)
			SELECT epoch FROM runs WHERE thread_id = $1 AND run_id = $2
				AND (state <> 'running' OR run_id IN (SELECT run_id FROM lost))`, threadID, runID).Scan(&old)
	} else {
		if _, err := s.txExec(ctx, tx, s.d.q(`UPDATE runs SET state = 'lost'
			WHERE thread_id = $1 AND state = 'running' AND lease_until <= `+s.d.nowNS), threadID); err != nil {
			return 0, err
		}
		err = s.txQueryRow(ctx, tx, s.d.q(`SELECT epoch FROM runs WHERE thread_id = $1 AND run_id = $2 AND state <> 'running'`), threadID, runID).Scan(&old)
	}
	switch {
	case errors.Is(err, sql.ErrNoRows):
		return 0, nil
	case err != nil:
		return 0, err
	}
	if _, err := s.txExec(ctx, tx, s.d.q(`DELETE FROM runs WHERE thread_id = $1 AND run_id = $2 AND state <> 'running'`), threadID, runID); err != nil {
		return 0, err
	}
	if _, err := s.txExec(ctx, tx, s.d.q(`DELETE FROM events WHERE thread_id = $1 AND run_id = $2`), threadID, runID); err != nil {
		return 0, err
	}
	return old, nil
}

// beginRun is BeginRun inside tx; work, when not nil, is the run's first work document.
// noRuns: the store holds no run of the thread (claimInTx read it), so there is none to
// mark lost and no run id to reuse: two statements fewer.
func (s sqlRuns) beginRun(ctx context.Context, tx *sql.Tx, threadID, runID, replica string, lease time.Duration, work json.RawMessage, noRuns bool) (int64, error) {
	var old int64
	if !noRuns {
		var err error
		if old, err = s.lapse(ctx, tx, threadID, runID); err != nil {
			return 0, err
		}
	}
	epoch := old + 1
	doc := "{}"
	if work != nil {
		doc = string(work)
	}
	now := time.Now().UnixNano()
	// The partial unique index runs_one_active makes a second running run of the thread
	// conflict, whichever replica inserts it.
	if s.w == nil {
		// PostgreSQL: the run and the thread's last run in one statement.
		var n int
		if err := tx.QueryRowContext(ctx, `WITH r AS (INSERT INTO runs (thread_id, run_id, replica, state, started_at, updated_at, lease_until, work, epoch)
				VALUES ($1, $2, $3, 'running', $4, $4, `+s.d.nowNS+` + $5, $6, $7) ON CONFLICT DO NOTHING RETURNING 1),
			t AS (UPDATE threads SET last_run_id = $2, last_run_at = $4, updated_at = $4
				WHERE thread_id = $1 AND EXISTS (SELECT 1 FROM r))
			SELECT COUNT(*) FROM r`, threadID, runID, replica, now, lease.Nanoseconds(), doc, epoch).Scan(&n); err != nil {
			return 0, err
		}
		if n == 0 {
			return 0, ErrThreadBusy
		}
		return epoch, nil
	}
	res, err := s.txExec(ctx, tx, s.d.q(`INSERT INTO runs (thread_id, run_id, replica, state, started_at, updated_at, lease_until, work, epoch)
		VALUES ($1, $2, $3, 'running', $4, $4, `+s.d.nowNS+` + $5, $6, $7) ON CONFLICT DO NOTHING`),
		threadID, runID, replica, now, lease.Nanoseconds(), doc, epoch)
	if err != nil {
		return 0, err
	}
	if n, _ := res.RowsAffected(); n == 0 {
		return 0, ErrThreadBusy
	}
	_, err = s.txExec(ctx, tx, s.d.q(`UPDATE threads SET last_run_id = $2, last_run_at = $3, updated_at = $3 WHERE thread_id = $1`),
		threadID, runID, now)
	return epoch, err
}

func (s sqlRuns) EndRun(ctx context.Context, threadID, runID string, epoch int64, state string) error {
	if err := s.check(); err != nil {
		return err
	}
	if state == "" || state == RunRunning {
		return fmt.Errorf("store: end run %q: state %q is not an end state", runID, state)
	}
	// The UPDATE itself is the guard: it takes the row's lock, so a takeover either
	// committed before (no row matches the epoch) or waits for it (design/fencing.md).
	res, err := s.exec(ctx, s.d.q(endRunSQL), threadID, runID, state, time.Now().UnixNano(), epoch)
	if err == nil {
		if n, _ := res.RowsAffected(); n == 0 {
			err = s.refusal(ctx, s.d, threadID, runID)
		}
	}
	if err != nil {
		return fmt.Errorf("store: end run %q of thread %q: %w", runID, threadID, err)
	}
	return nil
}

// EndRunStep ends the run and records its step in one transaction: on SQLite one job of
// the group writer, on PostgreSQL one pipelined batch (pgWriter.endRunStep).
func (s sqlRuns) EndRunStep(ctx context.Context, threadID, runID string, epoch int64, state string, step *Step) error {
	if err := s.check(); err != nil {
		return err
	}
	if state == "" || state == RunRunning {
		return fmt.Errorf("store: end run %q: state %q is not an end state", runID, state)
	}
	// The step is the run's, under its epoch: its guard is the end's, both or neither.
	step.ThreadID, step.RunID, step.Epoch = threadID, runID, epoch
	args := stepArgs(step)
	var seq int64
	var err error
	if s.pg != nil {
		seq, err = s.pg.endRunStep(ctx, threadID, runID, epoch, state, args, step.Epoch != 0)
		err = unavailable(err)
		s.health.note(err)
		if errors.Is(err, errStepLater) {
			// The run is ended; its step lost a race for its number with another step of
			// the thread: it is recorded on its own, as RecordStep does.
			seq, err = sqlJournal{s.sqlConn, s.d}.recordStepPG(ctx, args, step.Epoch != 0)
		}
	} else {
		err = s.tx(ctx, threadID, func(ctx context.Context, tx *sql.Tx) error {
			seq, err = s.endRunTx(ctx, tx, threadID, runID, epoch, state, args, nil)
			return err
		})
	}
	if errors.Is(err, errNoRun) {
		err = s.refusal(ctx, s.d, threadID, runID)
	}
	if err != nil {
		return fmt.Errorf("store: end run %q of thread %q: %w", runID, threadID, err)
	}
	step.Seq = seq
	return nil
}

// EndRunMessages ends the run, records its step (when there is one) and saves the
// messages it added to its thread in one transaction, the messages guarded by the end's
// epoch: on SQLite one job of the group writer, on PostgreSQL one pipelined batch
// (pgWriter.endRunMessages).
func (s sqlRuns) EndRunMessages(ctx context.Context, threadID, runID string, epoch int64, state string, step *Step, msgs []Message) error {
	if err := s.check(); err != nil {
		return err
	}
	if state == "" || state == RunRunning {
		return fmt.Errorf("store: end run %q: state %q is not an end state", runID, state)
	}
	if err := checkMessages(msgs); err != nil {
		return fmt.Errorf("store: end run %q of thread %q: %w", runID, threadID, err)
	}
	var args []any
	if step != nil {
		// The step is the run's, under its epoch: its guard is the end's, both or neither.
		step.ThreadID, step.RunID, step.Epoch = threadID, runID, epoch
		args = stepArgs(step)
	}
	var seq int64
	var err error
	if s.pg != nil && distinctIDs(msgs) {
		seq, err = s.pg.endRunMessages(ctx, endBatch{threadID: threadID, runID: runID, epoch: epoch, state: state,
			stepArgs: args, msgs: msgs})
		err = unavailable(err)
		s.health.note(err)
		if errors.Is(err, errStepLater) {
			// The run is ended and its messages saved; its step lost a race for its number
			// with another step of the thread: it is recorded on its own, as RecordStep does.
			seq, err = sqlJournal{s.sqlConn, s.d}.recordStepPG(ctx, args, step.Epoch != 0)
		}
	} else {
		err = s.tx(ctx, threadID, func(ctx context.Context, tx *sql.Tx) error {
			seq, err = s.endRunTx(ctx, tx, threadID, runID, epoch, state, args, msgs)
			return err
		})
	}
	if errors.Is(err, errNoRun) {
		err = s.refusal(ctx, s.d, threadID, runID)
	}
	if err != nil {
		return fmt.Errorf("store: end run %q of thread %q: %w", runID, threadID, err)
	}
	if step != nil {
		step.Seq = seq
	}
	return nil
}

// endRunTx ends the run under its epoch inside tx (errNoRun when no row changed), then
// records its step (stepArgs, when not nil) and saves msgs (when any): the body both
// EndRunStep and EndRunMessages run in one transaction off PostgreSQL's pipelined path.
func (s sqlRuns) endRunTx(ctx context.Context, tx *sql.Tx, threadID, runID string, epoch int64, state string, stepArgs []any, msgs []Message) (seq int64, err error) {
	res, err := s.txExec(ctx, tx, s.d.q(endRunSQL), threadID, runID, state, time.Now().UnixNano(), epoch)
	if err != nil {
		return 0, err
	}
	if n, _ := res.RowsAffected(); n == 0 {
		return 0, errNoRun
	}
	if stepArgs != nil {
		if seq, err = (sqlJournal{s.sqlConn, s.d}).recordTx(ctx, tx, stepArgs); err != nil {
			return 0, err
		}
	}
	if len(msgs) > 0 {
		err = s.threads.saveMessages(ctx, tx, threadID, msgs)
	}
	return seq, err
}

// errNoRun is an end of a run that changed no row (refusal says why); errStepLater an end
// whose step is to be recorded on its own.
var (
	errNoRun     = errors.New("store: no run with this epoch")
	errStepLater = errors.New("store: the step is recorded apart")
)

// endRunSQL ends a run under its epoch: the UPDATE itself is the guard (EndRun).
const endRunSQL = `UPDATE runs SET state = $3, updated_at = $4 WHERE thread_id = $1 AND run_id = $2 AND epoch = $5`

func (s sqlRuns) HeartbeatRuns(ctx context.Context, replica string, lease time.Duration) ([]RunRef, error) {
	if err := s.check(); err != nil {
		return nil, err
	}
	var out []RunRef
	err := s.tx(ctx, "", func(ctx context.Context, tx *sql.Tx) error {
		out = out[:0] // a job run again starts over
		rows, err := tx.QueryContext(ctx, s.d.q(`UPDATE runs SET lease_until = `+s.d.nowNS+` + $2
			WHERE replica = $1 AND state = 'running' RETURNING thread_id, run_id, epoch`), replica, lease.Nanoseconds())
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			var r RunRef
			if err := rows.Scan(&r.ThreadID, &r.RunID, &r.Epoch); err != nil {
				return err
			}
			out = append(out, r)
		}
		return rows.Err()
	})
	if err != nil {
		return nil, fmt.Errorf("store: heartbeat: %w", err)
	}
	return out, nil
}

const runCols = `thread_id, run_id, replica, state, started_at, updated_at, lease_until, work, stop_requested, epoch`

// collectRuns scans every row of rows as a run and closes rows; a close error counts too.
func collectRuns(rows *sql.Rows) (_ []RunRecord, err error) {
	defer func() {
		if cerr := rows.Close(); cerr != nil && err == nil {
			err = cerr
		}
	}()
	var out []RunRecord
	for rows.Next() {
		r, err := scanRun(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, *r)
	}
	return out, rows.Err()
}

// qualifiedRunCols is runCols for statements that join runs with another table.
var qualifiedRunCols = "runs." + strings.ReplaceAll(runCols, ", ", ", runs.")

func scanRun(sc scanner) (*RunRecord, error) {
	var r RunRecord
	var started, updated, lease, stop int64
	var work string
	if err := sc.Scan(&r.ThreadID, &r.RunID, &r.Replica, &r.State, &started, &updated, &lease, &work, &stop, &r.Epoch); err != nil {
		return nil, err
	}
	r.StopRequested = stop != 0
	r.StartedAt, r.UpdatedAt, r.LeaseUntil = fromNS(started), fromNS(updated), fromNS(lease)
	r.Work = json.RawMessage(work)
	return &r, nil
}

func (s sqlRuns) GetRun(ctx context.Context, threadID, runID string) (*RunRecord, error) {
	if err := s.check(); err != nil {
		return nil, err
	}
	r, err := scanRun(s.queryRow(ctx, s.d.q(`SELECT `+runCols+` FROM runs WHERE thread_id = $1 AND run_id = $2`), threadID, runID))
	if errors.Is(err, sql.ErrNoRows) {
		return nil, fmt.Errorf("store: run %q of thread %q: %w", runID, threadID, ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("store: run %q of thread %q: %w", runID, threadID, err)
	}
	return r, nil
}

func (s sqlRuns) ActiveRun(ctx context.Context, threadID string) (*RunRecord, error) {
	if err := s.check(); err != nil {
		return nil, err
	}
	r, err := scanRun(s.queryRow(ctx, s.d.q(`SELECT `+runCols+` FROM runs WHERE thread_id = $1
		AND state = 'running' AND lease_until > `+s.d.nowNS), threadID))
	if errors.Is(err, sql.ErrNoRows) {
		return nil, fmt.Errorf("store: active run of thread %q: %w", threadID, ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("store: active run of thread %q: %w", threadID, err)
	}
	return r, nil
}

func (s sqlRuns) RequestStop(ctx context.Context, threadID, runID string) (*RunRecord, error) {
	if err := s.check(); err != nil {
		return nil, err
	}
	var run *RunRecord
	err := s.tx(ctx, threadID, func(ctx context.Context, tx *sql.Tx) error {
		res, err := s.txExec(ctx, tx, s.d.q(`UPDATE runs SET stop_requested = 1
			WHERE thread_id = $1 AND run_id = $2 AND state = 'running'`), threadID, runID)
		if err != nil {
			return err
		}
		if n, _ := res.RowsAffected(); n == 0 {
			return ErrNotFound
		}
		run, err = scanRun(s.txQueryRow(ctx, tx, s.d.q(`SELECT `+runCols+` FROM runs WHERE thread_id = $1 AND run_id = $2`), threadID, runID))
		if err != nil {
			return err
		}
		if s.d.notifyStop != "" {
			if _, err := s.txExec(ctx, tx, s.d.q(s.d.notifyStop), run.Replica); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("store: request stop of run %q of thread %q: %w", runID, threadID, err)
	}
	return run, nil
}

func (s sqlRuns) ThreadRuns(ctx context.Context, threadID string, limit int) (_ []RunRecord, err error) {
	if err := s.check(); err != nil {
		return nil, err
	}
	if limit <= 0 {
		return nil, nil
	}
	rows, err := s.query(ctx, s.d.q(`SELECT `+runCols+` FROM runs
		WHERE thread_id = $1 ORDER BY started_at DESC, run_id DESC LIMIT $2`), threadID, limit)
	if err != nil {
		return nil, fmt.Errorf("store: runs of thread %q: %w", threadID, err)
	}
	out, err := collectRuns(rows)
	if err != nil {
		return nil, fmt.Errorf("store: runs of thread %q: %w", threadID, err)
	}
	return out, nil
}

func (s sqlRuns) StopRequests(ctx context.Context, replica string) (_ []RunRecord, err error) {
	if err := s.check(); err != nil {
		return nil, err
	}
	rows, err := s.query(ctx, s.d.q(`SELECT `+runCols+` FROM runs
		WHERE replica = $1 AND stop_requested = 1 AND state = 'running'`), replica)
	if err != nil {
		return nil, fmt.Errorf("store: stop requests: %w", err)
	}
	out, err := collectRuns(rows)
	if err != nil {
		return nil, fmt.Errorf("store: stop requests: %w", err)
	}
	return out, nil
}

func (s sqlRuns) ClaimLapsedRuns(ctx context.Context, replica string, limit int) (_ []RunRecord, err error) {
	if err := s.check(); err != nil {
		return nil, err
	}
	if limit <= 0 {
		return nil, nil
	}
	var out []RunRecord
	err = s.tx(ctx, "", func(ctx context.Context, tx *sql.Tx) error {
		// The candidates are picked once, in a materialised CTE: as a plain IN (subquery)
		// the planner may run the subquery again per row, and with SKIP LOCKED each run
		// picks other rows (one claim took 15 rows with LIMIT 5). The condition is checked
		// again on the rows updated: a claimer that waited for a row lock re-checks only that.
		lapsed := `(state = 'lost' AND reaped = 0)`
		rows, err := tx.QueryContext(ctx, s.d.q(`WITH picked AS MATERIALIZED (
				SELECT thread_id, run_id FROM runs WHERE `+lapsed+`
				ORDER BY lease_until LIMIT $3 `+s.d.skipLocked+`)
			UPDATE runs SET reaped = 1, replica = $1, updated_at = $2, epoch = runs.epoch + 1
			FROM picked WHERE runs.thread_id = picked.thread_id AND runs.run_id = picked.run_id AND `+lapsed+`
			RETURNING `+qualifiedRunCols), replica, time.Now().UnixNano(), limit)
		if err != nil {
			return err
		}
		out, err = collectRuns(rows)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("store: claim lapsed runs: %w", err)
	}
	return out, nil
}

func (s sqlRuns) TakeOverRuns(ctx context.Context, replica string, lease time.Duration, limit int, anyLease bool) ([]RunRecord, error) {
	// The lease on the database's clock.
	lapsed := `(state = 'running' AND replica <> $1 AND lease_until < ` + s.d.nowNS + `)`
	if anyLease {
		lapsed = `(state = 'running' AND replica <> $1)`
	}
	return s.takeOver(ctx, replica, lease, limit, lapsed)
}

func (s sqlRuns) TakeOverReleasedRuns(ctx context.Context, replica string, lease time.Duration, limit int) ([]RunRecord, error) {
	return s.takeOver(ctx, replica, lease, limit, `(state = 'running' AND replica <> $1 AND lease_until = `+releasedLease+`)`)
}

// takeOver is TakeOverRuns for the runs that match lapsed (a condition on $1, the replica).
func (s sqlRuns) takeOver(ctx context.Context, replica string, lease time.Duration, limit int, lapsed string) (_ []RunRecord, err error) {
	if err := s.check(); err != nil {
		return nil, err
	}
	if limit <= 0 {
		return nil, nil
	}
	var out []RunRecord
	err = s.tx(ctx, "", func(ctx context.Context, tx *sql.Tx) error {
		// As in ClaimLapsedRuns: candidates picked once (materialised, SKIP LOCKED), the
		// condition checked again on the rows updated, since a claimer that waited for a
		// row lock re-checks only the outer WHERE.
		rows, err := tx.QueryContext(ctx, s.d.q(`WITH picked AS MATERIALIZED (
				SELECT thread_id, run_id FROM runs WHERE `+lapsed+`
				ORDER BY lease_until LIMIT $3 `+s.d.skipLocked+`)
			UPDATE runs SET replica = $1, updated_at = $2, lease_until = `+s.d.nowNS+` + $4, epoch = runs.epoch + 1
			FROM picked WHERE runs.thread_id = picked.thread_id AND runs.run_id = picked.run_id AND `+lapsed+`
			RETURNING `+qualifiedRunCols), replica, time.Now().UnixNano(), limit, lease.Nanoseconds())
		if err != nil {
			return err
		}
		out, err = collectRuns(rows)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("store: take over runs: %w", err)
	}
	return out, nil
}

// releasedLease is the lease_until of a run that its replica released (ReleaseRuns): lapsed
// for every claimer, and told apart from a lease that lapsed.
const releasedLease = `0`

func (s sqlRuns) ReleaseRuns(ctx context.Context, replica string) (int, error) {
	if err := s.check(); err != nil {
		return 0, err
	}
	var n int64
	err := s.tx(ctx, "", func(ctx context.Context, tx *sql.Tx) error {
		res, err := s.txExec(ctx, tx, s.d.q(`UPDATE runs SET lease_until = `+releasedLease+`
			WHERE replica = $1 AND state = 'running'`), replica)
		if err != nil {
			return err
		}
		n, _ = res.RowsAffected()
		if n > 0 && s.d.notifyStop != "" {
			// The stop channel's listeners look at their stop requests and at lapsed runs.
			if _, err := s.txExec(ctx, tx, s.d.q(s.d.notifyStop), replica); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return 0, fmt.Errorf("store: release runs: %w", err)
	}
	return int(n), nil
}

func (s sqlRuns) SaveRunWork(ctx context.Context, threadID, runID string, epoch int64, work json.RawMessage) error {
	if err := s.check(); err != nil {
		return err
	}
	if !json.Valid(work) {
		return fmt.Errorf("store: save work of run %q: not JSON", runID)
	}
	// Guarded by the UPDATE itself, as EndRun.
	res, err := s.execBulk(ctx, s.d.q(saveWorkSQL), threadID, runID, string(work), time.Now().UnixNano(), epoch)
	if err == nil {
		if n, _ := res.RowsAffected(); n == 0 {
			err = s.refusal(ctx, s.d, threadID, runID)
		}
	}
	if err != nil {
		return fmt.Errorf("store: save work of run %q of thread %q: %w", runID, threadID, err)
	}
	return nil
}

func (s sqlRuns) AppendEvents(ctx context.Context, threadID, runID string, epoch int64, evs []Event) error {
	if err := s.check(); err != nil {
		return err
	}
	if len(evs) == 0 {
		return nil
	}
	if s.pg != nil {
		err := unavailable(s.pg.appendEvents(ctx, threadID, runID, epoch, evs, s.afterGuard))
		s.health.note(err)
		if err != nil {
			return fmt.Errorf("store: append events of run %q: %w", runID, err)
		}
		return nil
	}
	now := time.Now().UnixNano()
	err := s.txBulk(ctx, "", func(ctx context.Context, tx *sql.Tx) error {
		return s.appendTx(ctx, tx, threadID, runID, epoch, now, evs)
	})
	if err != nil {
		return fmt.Errorf("store: append events of run %q: %w", runID, err)
	}
	return nil
}

// SaveRunLog appends evs and replaces the run's work document in one transaction: on
// SQLite one job of the group writer, on PostgreSQL one pipelined batch (one round trip).
func (s sqlRuns) SaveRunLog(ctx context.Context, threadID, runID string, epoch int64, evs []Event, work json.RawMessage) error {
	if err := s.check(); err != nil {
		return err
	}
	switch {
	case work == nil:
		return s.AppendEvents(ctx, threadID, runID, epoch, evs)
	case len(evs) == 0:
		return s.SaveRunWork(ctx, threadID, runID, epoch, work)
	case !json.Valid(work):
		return fmt.Errorf("store: save log of run %q: the work document is not JSON", runID)
	}
	if s.pg != nil {
		err := unavailable(s.pg.saveRunLog(ctx, threadID, runID, epoch, evs, work))
		s.health.note(err)
		if err != nil {
			return fmt.Errorf("store: save log of run %q: %w", runID, err)
		}
		return nil
	}
	now := time.Now().UnixNano()
	err := s.txBulk(ctx, "", func(ctx context.Context, tx *sql.Tx) error {
		if err := s.appendTx(ctx, tx, threadID, runID, epoch, now, evs); err != nil {
			return err
		}
		// The events' insert was guarded by the same epoch in this transaction of the one
		// writer: the run is there with it, and the update changes its row.
		res, err := s.txExec(ctx, tx, s.d.q(saveWorkSQL), threadID, runID, string(work), now, epoch)
		if err != nil {
			return err
		}
		if n, _ := res.RowsAffected(); n == 0 {
			return ErrFenced
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("store: save log of run %q: %w", runID, err)
	}
	return nil
}

// saveWorkSQL replaces a run's work document, guarded by its epoch in the UPDATE itself.
const saveWorkSQL = `UPDATE runs SET work = $3, updated_at = $4 WHERE thread_id = $1 AND run_id = $2 AND epoch = $5`

// appendTx appends evs (at least one) to the run's log inside a SQLite write transaction,
// or fails with ErrFenced, inserting none, unless the run has epoch epoch.
func (s sqlRuns) appendTx(ctx context.Context, tx *sql.Tx, threadID, runID string, epoch, now int64, evs []Event) error {
	if len(evs) < appendChunk && s.afterGuard == nil {
		// The usual case on SQLite, in one statement: the epoch's guard in the INSERT's
		// WHERE, in the same transaction as before (it was a SELECT and the INSERT).
		args := append(s.eventArgs(threadID, runID, now, evs), threadID, runID, epoch)
		res, err := s.txExec(ctx, tx, insertEventsGuarded(len(evs)), args...)
		if err != nil {
			return err
		}
		if n, _ := res.RowsAffected(); n == 0 {
			return ErrFenced
		}
		return nil
	}
	if err := s.checkEpoch(ctx, tx, s.d, threadID, runID, epoch); err != nil {
		return err
	}
	if s.afterGuard != nil {
		s.afterGuard()
	}
	// Full chunks go through one prepared multi-row INSERT (parsed once per batch, not
	// per chunk); the rest through a statement of its own size.
	for len(evs) >= appendChunk {
		stmt, err := tx.PrepareContext(ctx, s.insertEvents(appendChunk))
		if err != nil {
			return err
		}
		for len(evs) >= appendChunk {
			if _, err := stmt.ExecContext(ctx, s.eventArgs(threadID, runID, now, evs[:appendChunk])...); err != nil {
				_ = stmt.Close()
				return err
			}
			evs = evs[appendChunk:]
		}
		if err := stmt.Close(); err != nil {
			return err
		}
	}
	if len(evs) > 0 {
		if _, err := s.txExec(ctx, tx, s.insertEvents(len(evs)), s.eventArgs(threadID, runID, now, evs)...); err != nil {
			return err
		}
	}
	return nil
}

// appendChunk is the rows per multi-row INSERT of events: a round trip per event would cap
// the log's rate, and SQLite allows at most 32766 parameters per statement.
const appendChunk = 256

// insertEvents is the INSERT of n events, in this dialect. SQLite gets anonymous "?"
// placeholders: its driver looks numbered ones up by name, which is quadratic in a
// statement of hundreds of parameters.
func (s sqlRuns) insertEvents(n int) string {
	var b strings.Builder
	b.WriteString(`INSERT INTO events (thread_id, run_id, seq, at, data) VALUES `)
	for i := range n {
		if i > 0 {
			b.WriteByte(',')
		}
		if s.d.rewrite != nil {
			b.WriteString("(?, ?, ?, ?, ?)")
		} else {
			fmt.Fprintf(&b, "($1, $2, $%d, $3, $%d)", 4+2*i, 5+2*i)
		}
	}
	return b.String()
}

// insertEventsGuarded is SQLite's INSERT of n events that inserts nothing unless the run
// (the three arguments after the events': thread, run, epoch) has the writer's epoch.
func insertEventsGuarded(n int) string {
	var b strings.Builder
	b.WriteString(`INSERT INTO events (thread_id, run_id, seq, at, data) SELECT * FROM (VALUES `)
	for i := range n {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString("(?, ?, ?, ?, ?)")
	}
	b.WriteString(`) WHERE EXISTS (SELECT 1 FROM runs WHERE thread_id = ? AND run_id = ? AND epoch = ?)`)
	return b.String()
}

// eventArgs are the arguments of insertEvents(len(evs)).
func (s sqlRuns) eventArgs(threadID, runID string, now int64, evs []Event) []any {
	if s.d.rewrite != nil {
		args := make([]any, 0, 5*len(evs))
		for _, ev := range evs {
			args = append(args, threadID, runID, ev.Seq, now, string(ev.Data))
		}
		return args
	}
	args := make([]any, 0, 3+2*len(evs))
	args = append(args, threadID, runID, now)
	for _, ev := range evs {
		args = append(args, ev.Seq, string(ev.Data))
	}
	return args
}

func (s sqlRuns) Events(ctx context.Context, threadID, runID string, after int64, limit int) (_ []Event, err error) {
	if err := s.check(); err != nil {
		return nil, err
	}
	if limit <= 0 || limit > MaxEventsRead {
		limit = MaxEventsRead
	}
	rows, err := s.query(ctx, s.d.q(`SELECT seq, data FROM events WHERE thread_id = $1 AND run_id = $2 AND seq > $3
		ORDER BY seq LIMIT $4`), threadID, runID, after, limit)
	if err != nil {
		return nil, fmt.Errorf("store: events of run %q: %w", runID, err)
	}
	defer func() {
		if cerr := rows.Close(); cerr != nil && err == nil {
			err = fmt.Errorf("store: events of run %q: %w", runID, cerr)
		}
	}()
	var out []Event
	for rows.Next() {
		var ev Event
		var data string
		if err := rows.Scan(&ev.Seq, &data); err != nil {
			return nil, fmt.Errorf("store: events of run %q: %w", runID, err)
		}
		ev.Data = json.RawMessage(data)
		out = append(out, ev)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("store: events of run %q: %w", runID, err)
	}
	return out, nil
}

func (s sqlRuns) SweepEvents(ctx context.Context, cutoff time.Time) (int64, error) {
	if err := s.check(); err != nil {
		return 0, err
	}
	res, err := s.execBulk(ctx, s.d.q(`DELETE FROM events WHERE at < $1`), cutoff.UnixNano())
	if err != nil {
		return 0, fmt.Errorf("store: sweep events: %w", err)
	}
	n, _ := res.RowsAffected()
	return n, nil
}

func (s sqlRuns) HoldRunForFollower(ctx context.Context, threadID, runID string, ttl time.Duration) error {
	if err := s.check(); err != nil {
		return err
	}
	res, err := s.exec(ctx, s.d.q(`UPDATE runs SET watched_until = `+s.d.nowNS+` + $3
		WHERE thread_id = $1 AND run_id = $2 AND state = 'running'`), threadID, runID, ttl.Nanoseconds())
	if err != nil {
		return fmt.Errorf("store: hold run %q for a follower of thread %q: %w", runID, threadID, err)
	}
	if n, _ := res.RowsAffected(); n == 0 {
		return fmt.Errorf("store: hold run %q for a follower of thread %q: %w", runID, threadID, ErrNotFound)
	}
	return nil
}

func (s sqlRuns) RunHeldFor(ctx context.Context, threadID, runID string) (time.Duration, error) {
	if err := s.check(); err != nil {
		return 0, err
	}
	var left int64
	err := s.queryRow(ctx, s.d.q(`SELECT watched_until - `+s.d.nowNS+` FROM runs WHERE thread_id = $1 AND run_id = $2`),
		threadID, runID).Scan(&left)
	if errors.Is(err, sql.ErrNoRows) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("store: watchers of run %q of thread %q: %w", runID, threadID, err)
	}
	return time.Duration(left), nil
}

func (s sqlRuns) SweepRuns(ctx context.Context, cutoff time.Time) (int64, error) {
	if err := s.check(); err != nil {
		return 0, err
	}
	var n int64
	err := s.txBulk(ctx, "", func(ctx context.Context, tx *sql.Tx) error {
		// Events first, selected by the runs that go, then the runs: one transaction, so a
		// run is never left without the log it had, nor a log without its run.
		const ended = `state <> 'running' AND NOT (state = 'lost' AND reaped = 0) AND updated_at < $1`
		if _, err := s.txExec(ctx, tx, s.d.q(`DELETE FROM events WHERE EXISTS (SELECT 1 FROM runs
			WHERE runs.thread_id = events.thread_id AND runs.run_id = events.run_id AND `+ended+`)`), cutoff.UnixNano()); err != nil {
			return err
		}
		if _, err := s.txExec(ctx, tx, s.d.q(`DELETE FROM journal WHERE EXISTS (SELECT 1 FROM runs
			WHERE runs.thread_id = journal.thread_id AND runs.run_id = journal.run_id AND `+ended+`)`), cutoff.UnixNano()); err != nil {
			return err
		}
		res, err := s.txExec(ctx, tx, s.d.q(`DELETE FROM runs WHERE `+ended), cutoff.UnixNano())
		if err != nil {
			return err
		}
		n, _ = res.RowsAffected()
		return nil
	})
	if err != nil {
		return 0, fmt.Errorf("store: sweep runs: %w", err)
	}
	return n, nil
}
