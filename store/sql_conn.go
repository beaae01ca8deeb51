package store

import (
	"context"
	"database/sql"
	"errors"
	"sync"
	"sync/atomic"
	"time"
)

// sqlConn is the database handle every capability of a SQL store shares: the database, the
// writers and the prepared reads, with the reads, the transactions and the fencing guard
// built on them. It runs statements already in the dialect; each capability holds the
// dialect it writes its queries in.
type sqlConn struct {
	// db serves reads (SQLite) or everything (PostgreSQL).
	db *sql.DB
	// lockThread is the dialect's lockThread statement ("": none), which each write
	// transaction runs first.
	lockThread string
	closed     atomic.Bool
	// w is SQLite's single writer with group commit (sqlite_writer.go): every write goes
	// through it. Nil for PostgreSQL, whose writers run concurrently.
	w *groupWriter
	// pg runs a run's hot writes as pipelined batches on the pgx pool (pgwriter.go); nil
	// for SQLite.
	pg *pgWriter
	// reads are SQLite's prepared read statements by query text (readStmt), nreads their
	// number.
	reads  sync.Map
	nreads atomic.Int32
	// afterGuard, when set (tests only), runs inside AppendEvents' and CloseSuspension's
	// transactions right after their fencing guard, to hold the transaction open.
	afterGuard func()
	// health remembers the last writes' outcomes, for Ping (unavailable.go).
	health writeHealth
}

// readStmt returns the prepared statement of a read query (SQLite), preparing it at its
// first use: SQLite parsing the statement again on every call was two thirds of a
// point read's cost. Nil with PostgreSQL (pgx caches statements itself), when the bound is
// reached, or when it cannot be prepared (the query then runs unprepared and fails there).
func (s *sqlConn) readStmt(ctx context.Context, query string) *sql.Stmt {
	if s.w == nil {
		return nil
	}
	if v, ok := s.reads.Load(query); ok {
		return v.(*sql.Stmt)
	}
	if s.nreads.Load() >= maxStmts {
		return nil
	}
	st, err := s.db.PrepareContext(ctx, query)
	if err != nil {
		return nil
	}
	if v, loaded := s.reads.LoadOrStore(query, st); loaded {
		_ = st.Close()
		return v.(*sql.Stmt)
	}
	s.nreads.Add(1)
	return st
}

// queryRow is s.db.QueryRowContext for query (already in the dialect), prepared once. Its
// Scan classifies a failure of the store (unavailable).
func (s *sqlConn) queryRow(ctx context.Context, query string, args ...any) row {
	if st := s.readStmt(ctx, query); st != nil {
		return row{st.QueryRowContext(ctx, args...)}
	}
	return row{s.db.QueryRowContext(ctx, query, args...)}
}

// row is a *sql.Row whose Scan marks a failure of the store with ErrUnavailable.
type row struct{ r *sql.Row }

func (r row) Scan(dest ...any) error { return unavailable(r.r.Scan(dest...)) }

// query is s.db.QueryContext for query (already in the dialect), prepared once.
func (s *sqlConn) query(ctx context.Context, query string, args ...any) (*sql.Rows, error) {
	if st := s.readStmt(ctx, query); st != nil {
		rows, err := st.QueryContext(ctx, args...)
		return rows, unavailable(err)
	}
	rows, err := s.db.QueryContext(ctx, query, args...)
	return rows, unavailable(err)
}

func (s *sqlConn) check() error {
	if s.closed.Load() {
		return ErrClosed
	}
	return nil
}

// tx runs fn in a write transaction, holding the thread's write lock where the dialect
// needs one. With SQLite, fn is a job of the group writer: it shares its transaction with
// other callers' jobs (in a savepoint of its own) and may be run a second time (writeFunc).
func (s *sqlConn) tx(ctx context.Context, threadID string, fn writeFunc) error {
	err := unavailable(s.txRaw(ctx, threadID, fn))
	s.health.note(err)
	return err
}

// txRaw is tx without the classification of its error.
func (s *sqlConn) txRaw(ctx context.Context, threadID string, fn writeFunc) error {
	if s.w != nil {
		return s.w.do(ctx, fn)
	}
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	if s.lockThread != "" && threadID != "" {
		if _, err := tx.ExecContext(ctx, s.lockThread, threadID); err != nil {
			_ = tx.Rollback()
			return err
		}
	}
	if err := fn(ctx, tx); err != nil {
		_ = tx.Rollback()
		return err
	}
	return tx.Commit()
}

// txExec is tx.ExecContext for query (already in the dialect) inside a tx function; with
// SQLite it runs the writer's prepared statement.
func (s *sqlConn) txExec(ctx context.Context, tx *sql.Tx, query string, args ...any) (sql.Result, error) {
	if s.w != nil {
		return s.w.exec(ctx, tx, query, args...)
	}
	return tx.ExecContext(ctx, query, args...)
}

// txQueryRow is tx.QueryRowContext as txExec is tx.ExecContext.
func (s *sqlConn) txQueryRow(ctx context.Context, tx *sql.Tx, query string, args ...any) *sql.Row {
	if s.w != nil {
		if st := s.w.stmt(query); st != nil {
			return tx.StmtContext(ctx, st).QueryRowContext(ctx, args...)
		}
	}
	return tx.QueryRowContext(ctx, query, args...)
}

// txStart is tx for a run's start: SQLite's writer runs it before the other writes (its
// first event waits for it).
func (s *sqlConn) txStart(ctx context.Context, threadID string, fn writeFunc) error {
	if s.w != nil {
		err := unavailable(s.w.doStart(ctx, fn))
		s.health.note(err)
		return err
	}
	return s.tx(ctx, threadID, fn)
}

// txBulk is tx for a write that no response waits for (event logs, messages, work
// documents): SQLite's writer runs it after the writes that one does.
func (s *sqlConn) txBulk(ctx context.Context, threadID string, fn writeFunc) error {
	if s.w != nil {
		err := unavailable(s.w.doBulk(ctx, fn))
		s.health.note(err)
		return err
	}
	return s.tx(ctx, threadID, fn)
}

// execBulk is exec for a write that no response waits for (see txBulk).
func (s *sqlConn) execBulk(ctx context.Context, q string, args ...any) (sql.Result, error) {
	if s.w == nil {
		return s.exec(ctx, q, args...)
	}
	var res sql.Result
	err := s.txBulk(ctx, "", func(ctx context.Context, tx *sql.Tx) error {
		var err error
		res, err = s.txExec(ctx, tx, q, args...)
		return err
	})
	return res, err
}

// exec runs one writing statement, already in the dialect (through the group writer with
// SQLite).
func (s *sqlConn) exec(ctx context.Context, q string, args ...any) (sql.Result, error) {
	if s.w == nil {
		res, err := s.db.ExecContext(ctx, q, args...)
		err = unavailable(err)
		s.health.note(err)
		return res, err
	}
	var res sql.Result
	err := s.tx(ctx, "", func(ctx context.Context, tx *sql.Tx) error {
		var err error
		res, err = s.txExec(ctx, tx, q, args...)
		return err
	})
	return res, err
}

// scanner is a row to scan: a *sql.Row, *sql.Rows, row or pgx.Row.
type scanner interface{ Scan(...any) error }

func fromNS(ns int64) time.Time { return time.Unix(0, ns).UTC() }

// checkEpoch fails with ErrFenced unless run runID of threadID has epoch epoch. It runs
// first in the transaction of a fenced write and, on PostgreSQL, share-locks the run's row
// until that transaction ends: a takeover's UPDATE of the row then waits for the write, so
// that no write of the old owner commits after the takeover (design/fencing.md).
func (s *sqlConn) checkEpoch(ctx context.Context, tx *sql.Tx, d *dialect, threadID, runID string, epoch int64) error {
	var one int
	err := s.txQueryRow(ctx, tx, d.q(`SELECT 1 FROM runs WHERE thread_id = $1 AND run_id = $2 AND epoch = $3`+d.forShare),
		threadID, runID, epoch).Scan(&one)
	if errors.Is(err, sql.ErrNoRows) {
		return ErrFenced
	}
	return err
}

// refusal is the error of a fenced UPDATE that changed no row: ErrFenced when the run
// exists (under another epoch), ErrNotFound when it does not.
func (s *sqlConn) refusal(ctx context.Context, d *dialect, threadID, runID string) error {
	var one int
	err := s.queryRow(ctx, d.q(`SELECT 1 FROM runs WHERE thread_id = $1 AND run_id = $2`), threadID, runID).Scan(&one)
	switch {
	case errors.Is(err, sql.ErrNoRows):
		return ErrNotFound
	case err != nil:
		return err
	}
	return ErrFenced
}
