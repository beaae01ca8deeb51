package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
)

// schemaJournal adds the step journal (journal.go, design/journal.md): one row per step,
// numbered per thread; an intent is written with outcome 'pending' and completed in place.
// ref (the tool call or task id) is how a replica that takes a run over finds a step.
const schemaJournal = `CREATE TABLE journal (
		thread_id    TEXT NOT NULL,
		seq          BIGINT NOT NULL,
		run_id       TEXT NOT NULL,
		at           BIGINT NOT NULL,            -- Unix ns, when the intent was written
		ended_at     BIGINT NOT NULL DEFAULT 0,  -- Unix ns, when the outcome was
		kind         TEXT NOT NULL,
		target       TEXT NOT NULL DEFAULT '',
		ref          TEXT NOT NULL DEFAULT '',
		attempt      INTEGER NOT NULL DEFAULT 1,
		outcome      TEXT NOT NULL,
		tag          TEXT NOT NULL DEFAULT '',
		failure_kind TEXT NOT NULL DEFAULT '',
		in_doubt     INTEGER NOT NULL DEFAULT 0,
		replica      TEXT NOT NULL,
		epoch        BIGINT NOT NULL DEFAULT 0,
		detail       TEXT NOT NULL DEFAULT '',
		PRIMARY KEY (thread_id, seq)
	);
	CREATE INDEX journal_pending ON journal (thread_id, run_id) WHERE outcome = 'pending';`

const stepCols = `seq, thread_id, run_id, at, kind, target, ref, attempt, outcome, tag, failure_kind, in_doubt, replica, epoch, detail`

func scanStep(sc scanner) (Step, error) {
	var s Step
	var at, inDoubt int64
	err := sc.Scan(&s.Seq, &s.ThreadID, &s.RunID, &at, &s.Kind, &s.Target, &s.Ref, &s.Attempt, &s.Outcome, &s.Tag,
		&s.FailureKind, &inDoubt, &s.Replica, &s.Epoch, &s.Detail)
	s.At, s.InDoubt = fromNS(at), inDoubt != 0
	return s, err
}

func collectSteps(rows *sql.Rows) (_ []Step, err error) {
	defer func() {
		if cerr := rows.Close(); cerr != nil && err == nil {
			err = cerr
		}
	}()
	out := []Step{}
	for rows.Next() {
		s, err := scanStep(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, s)
	}
	return out, rows.Err()
}

// stepEndRefusalSQL reads the current epoch of the run of step $2 of thread $1 (-1 when the
// run is gone; no row when the step is): why a step's end changed no row.
const stepEndRefusalSQL = `SELECT COALESCE((SELECT r.epoch FROM runs r WHERE r.thread_id = j.thread_id AND r.run_id = j.run_id), -1)
	FROM journal j WHERE j.thread_id = $1 AND j.seq = $2`

// stepEndRefusal is the error of a step's end, fenced by epoch, that changed no row, from
// row, the read of stepEndRefusalSQL in either backend: ErrFenced when the step's run has
// another epoch, ErrNotFound when there is no such step or it is not pending.
func stepEndRefusal(row scanner, epoch int64) error {
	var current int64
	err := row.Scan(&current)
	switch {
	case errors.Is(err, sql.ErrNoRows), errors.Is(err, pgx.ErrNoRows):
		return ErrNotFound
	case err != nil:
		return err
	case epoch != 0 && current != epoch:
		return ErrFenced
	}
	return ErrNotFound
}

// sqlJournal is a SQL store's journal of a run's effects (Journal).
type sqlJournal struct {
	*sqlConn
	d *dialect // the SQL it writes
}

func (s sqlJournal) RecordStep(ctx context.Context, st *Step) error {
	if err := s.check(); err != nil {
		return err
	}
	args := stepArgs(st)
	var seq int64
	var err error
	if s.w == nil {
		seq, err = s.recordStepPG(ctx, args, st.Epoch != 0)
	} else {
		err = s.tx(ctx, st.ThreadID, func(ctx context.Context, tx *sql.Tx) error {
			seq, err = s.recordTx(ctx, tx, args)
			return err
		})
	}
	if err != nil {
		return fmt.Errorf("store: record %s step of run %q: %w", st.Kind, st.RunID, err)
	}
	st.Seq = seq
	return nil
}

// stepArgs normalizes st and returns its columns after seq, in stepCols order, then
// ended_at: the arguments of the journal's INSERT.
func stepArgs(st *Step) []any {
	st.normalize(time.Now())
	inDoubt := 0
	if st.InDoubt {
		inDoubt = 1
	}
	ended := int64(0)
	if st.Outcome != StepPending {
		ended = st.At.UnixNano()
	}
	return []any{st.ThreadID, st.RunID, st.At.UnixNano(), st.Kind, st.Target, st.Ref, st.Attempt, st.Outcome, st.Tag,
		st.FailureKind, inDoubt, st.Replica, st.Epoch, st.Detail, ended}
}

// recordTx inserts a step (args: stepArgs) inside a SQLite write transaction and returns
// its number. One statement (it was three: the epoch's check, the next number, the
// insert). The writes are serialised (SQLite's one writer), so the next number is free;
// the guard is in the same statement of the same transaction as the insert, so a step of
// an owner whose epoch moved on inserts nothing and fails with ErrFenced, as before.
func (s sqlJournal) recordTx(ctx context.Context, tx *sql.Tx, args []any) (int64, error) {
	var seq int64
	err := s.txQueryRow(ctx, tx, s.d.q(`INSERT INTO journal (`+stepCols+`, ended_at)
			SELECT (SELECT COALESCE(MAX(seq), 0) + 1 FROM journal WHERE thread_id = $1),
				$1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15
			WHERE $13 = 0 OR EXISTS (SELECT 1 FROM runs WHERE thread_id = $1 AND run_id = $2 AND epoch = $13)
			RETURNING seq`), args...).Scan(&seq)
	if errors.Is(err, sql.ErrNoRows) {
		return 0, ErrFenced
	}
	return seq, err
}

// recordStepPGSQL is recordStepPG's statement, guarded by the step's epoch when fenced.
func recordStepPGSQL(fenced bool) string {
	guard := ""
	if fenced {
		guard = `
			HAVING EXISTS (SELECT 1 FROM runs WHERE thread_id = $1 AND run_id = $2 AND epoch = $13 FOR SHARE)`
	}
	return `INSERT INTO journal (` + stepCols + `, ended_at)
			SELECT COALESCE(MAX(seq), 0) + 1, $1::TEXT, $2::TEXT, $3::BIGINT, $4::TEXT, $5::TEXT, $6::TEXT, $7::INTEGER, $8::TEXT,
				$9::TEXT, $10::TEXT, $11::INTEGER, $12::TEXT, $13::BIGINT, $14::TEXT, $15::BIGINT
			FROM journal WHERE thread_id = $1` + guard + `
			ON CONFLICT (thread_id, seq) DO NOTHING RETURNING seq`
}

// recordStepPG writes a step on PostgreSQL in one statement, one round trip instead of
// five (BEGIN, the thread lock, the next number, the insert, COMMIT): the statement takes
// the next number itself, and a concurrent writer of the same thread that took the same
// number first makes it insert nothing (ON CONFLICT waits for that writer's commit), so it
// tries again with a fresh snapshot, which sees that step. args are the step's columns
// after seq, in stepCols order, then ended_at.
//
// fenced guards the insert by the step's epoch ($13) in the same statement: the HAVING
// clause share-locks the run's row while the statement runs, so a takeover's UPDATE of
// that row waits for it, and a step of an owner whose epoch moved on inserts nothing and
// fails with ErrFenced (as checkEpoch does for SQLite's transaction).
func (s sqlJournal) recordStepPG(ctx context.Context, args []any, fenced bool) (int64, error) {
	for {
		var seq int64
		err := s.queryRow(ctx, recordStepPGSQL(fenced), args...).Scan(&seq)
		switch {
		case errors.Is(err, sql.ErrNoRows):
			if err := ctx.Err(); err != nil {
				return 0, err
			}
			if fenced {
				var one int
				err := s.queryRow(ctx, `SELECT 1 FROM runs WHERE thread_id = $1 AND run_id = $2 AND epoch = $3`, args[0], args[1], args[12]).Scan(&one)
				switch {
				case errors.Is(err, sql.ErrNoRows):
					return 0, ErrFenced
				case err != nil:
					s.health.note(err)
					return 0, err
				}
			}
			continue
		case err != nil:
			s.health.note(err)
			return 0, err
		}
		s.health.note(nil)
		return seq, nil
	}
}

func (s sqlJournal) EndStep(ctx context.Context, threadID string, seq int64, end StepEnd) error {
	if err := s.check(); err != nil {
		return err
	}
	end.normalize()
	inDoubt := 0
	if end.InDoubt {
		inDoubt = 1
	}
	if s.pg != nil {
		err := unavailable(s.pg.endStep(ctx, threadID, seq, end, inDoubt))
		s.health.note(err)
		if err != nil {
			return fmt.Errorf("store: end step %d of thread %q: %w", seq, threadID, err)
		}
		return nil
	}
	// One statement (it was three: the step's run, the epoch's check, the update), the
	// guard in the UPDATE's WHERE as on PostgreSQL; only when no row changed does a read of
	// the same transaction tell ErrNotFound (no such step, or not pending) from ErrFenced.
	err := s.tx(ctx, threadID, func(ctx context.Context, tx *sql.Tx) error {
		res, err := s.txExec(ctx, tx, s.d.q(`UPDATE journal SET outcome = $3, tag = $4, failure_kind = $5, detail = CASE WHEN $6 = '' THEN detail ELSE $6 END,
			in_doubt = $7, ended_at = $8 WHERE thread_id = $1 AND seq = $2 AND outcome = 'pending' AND ($9 = 0 OR EXISTS (
			SELECT 1 FROM runs WHERE runs.thread_id = $1 AND runs.run_id = journal.run_id AND runs.epoch = $9))`),
			threadID, seq, end.Outcome, end.Tag, end.FailureKind, end.Detail, inDoubt, time.Now().UnixNano(), end.Epoch)
		if err != nil {
			return err
		}
		if n, _ := res.RowsAffected(); n > 0 {
			return nil
		}
		return stepEndRefusal(s.txQueryRow(ctx, tx, s.d.q(stepEndRefusalSQL), threadID, seq), end.Epoch)
	})
	if err != nil {
		return fmt.Errorf("store: end step %d of thread %q: %w", seq, threadID, err)
	}
	return nil
}

func (s sqlJournal) Steps(ctx context.Context, threadID string, after int64, limit int) ([]Step, error) {
	if err := s.check(); err != nil {
		return nil, err
	}
	if limit <= 0 || limit > MaxStepsRead {
		limit = MaxStepsRead
	}
	rows, err := s.query(ctx, s.d.q(`SELECT `+stepCols+` FROM journal WHERE thread_id = $1 AND seq > $2 ORDER BY seq LIMIT $3`),
		threadID, after, limit)
	if err != nil {
		return nil, fmt.Errorf("store: journal of thread %q: %w", threadID, err)
	}
	out, err := collectSteps(rows)
	if err != nil {
		return nil, fmt.Errorf("store: journal of thread %q: %w", threadID, unavailable(err))
	}
	return out, nil
}

func (s sqlJournal) PendingSteps(ctx context.Context, threadID, runID string) ([]Step, error) {
	if err := s.check(); err != nil {
		return nil, err
	}
	rows, err := s.query(ctx, s.d.q(`SELECT `+stepCols+` FROM journal WHERE thread_id = $1 AND run_id = $2 AND outcome = 'pending'
		ORDER BY seq LIMIT $3`), threadID, runID, MaxStepsRead)
	if err != nil {
		return nil, fmt.Errorf("store: pending steps of run %q: %w", runID, err)
	}
	out, err := collectSteps(rows)
	if err != nil {
		return nil, fmt.Errorf("store: pending steps of run %q: %w", runID, unavailable(err))
	}
	return out, nil
}

func (s sqlJournal) MarkInDoubt(ctx context.Context, threadID, runID string, epoch int64, seqs []int64, detail string) (int, error) {
	if err := s.check(); err != nil {
		return 0, err
	}
	if len(seqs) == 0 {
		return 0, nil
	}
	detail = clip(detail)
	var n int64
	err := s.tx(ctx, threadID, func(ctx context.Context, tx *sql.Tx) error {
		n = 0
		if epoch != 0 {
			if err := s.checkEpoch(ctx, tx, s.d, threadID, runID, epoch); err != nil {
				return err
			}
		}
		args := []any{threadID, runID, detail, time.Now().UnixNano()}
		ph := make([]string, len(seqs))
		for i, q := range seqs {
			args = append(args, q)
			ph[i] = fmt.Sprintf("$%d", len(args))
		}
		res, err := tx.ExecContext(ctx, s.d.rewriteNoCache(`UPDATE journal SET outcome = 'in_doubt', in_doubt = 1, ended_at = $4,
			detail = CASE WHEN $3 = '' THEN detail WHEN detail = '' THEN $3 ELSE detail || '; ' || $3 END
			WHERE thread_id = $1 AND run_id = $2 AND outcome = 'pending' AND seq IN (`+strings.Join(ph, ", ")+`)`), args...)
		if err != nil {
			return err
		}
		n, _ = res.RowsAffected()
		return nil
	})
	if err != nil {
		return 0, fmt.Errorf("store: mark steps of run %q in doubt: %w", runID, err)
	}
	return int(n), nil
}
