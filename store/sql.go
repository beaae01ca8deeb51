package store

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	_ "modernc.org/sqlite" // pure-Go SQLite driver "sqlite": no cgo
)

// sqliteParams configure every connection: WAL lets readers run beside the writer; the busy
// timeout makes a connection wait for the lock instead of failing at once (only another
// process writing the same file, or a checkpoint, can hold it: this process writes through
// one connection); immediate transactions take the write lock at BEGIN, because a deferred
// transaction that upgrades from read to write gets SQLITE_BUSY without waiting. NORMAL sync
// in WAL mode is durable against a crash of the process (a committed transaction is in the
// WAL file, which the operating system keeps); only a power loss or a kernel crash can undo
// the last transactions before a checkpoint, which is the usual trade.
const sqliteParams = "?_pragma=busy_timeout(5000)&_pragma=journal_mode(WAL)&_pragma=synchronous(NORMAL)&_txlock=immediate"

// sqliteReaders bounds the reading connections: WAL readers run beside the writer and
// each other, and a few are plenty for a coordinator.
const sqliteReaders = 4

// sqlStore is the Store of both SQL backends.
type sqlStore struct {
	// db serves reads (SQLite) or everything (PostgreSQL).
	db      *sql.DB
	d       *dialect
	closed  atomic.Bool
	onClose func() // releases what the backend holds besides db (the pgx pool)
	// signals receives stop-request notifications (PostgreSQL); nil for SQLite.
	signals chan struct{}
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
	// afterGuard, when set (tests only), runs inside AppendEvents' and SettleSuspension's
	// transactions right after their fencing guard, to hold the transaction open.
	afterGuard func()
	// health remembers the last writes' outcomes, for Ping (unavailable.go).
	health writeHealth
	// file watches the identity of SQLite's database file (filewatch.go); nil for
	// PostgreSQL.
	file *fileWatch
	// lock is SQLite's one-process lock on the database (lockfile.go); nil for PostgreSQL.
	lock *processLock
	// sqlSettler settles resumes (sql_settler.go); set by withSettler.
	sqlSettler
}

// readStmt returns the prepared statement of a read query (SQLite), preparing it at its
// first use: SQLite parsing the statement again on every call was two thirds of a
// point read's cost. Nil with PostgreSQL (pgx caches statements itself), when the bound is
// reached, or when it cannot be prepared (the query then runs unprepared and fails there).
func (s *sqlStore) readStmt(ctx context.Context, query string) *sql.Stmt {
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
func (s *sqlStore) queryRow(ctx context.Context, query string, args ...any) row {
	if st := s.readStmt(ctx, query); st != nil {
		return row{st.QueryRowContext(ctx, args...)}
	}
	return row{s.db.QueryRowContext(ctx, query, args...)}
}

// row is a *sql.Row whose Scan marks a failure of the store with ErrUnavailable.
type row struct{ r *sql.Row }

func (r row) Scan(dest ...any) error { return unavailable(r.r.Scan(dest...)) }

// query is s.db.QueryContext for query (already in the dialect), prepared once.
func (s *sqlStore) query(ctx context.Context, query string, args ...any) (*sql.Rows, error) {
	if st := s.readStmt(ctx, query); st != nil {
		rows, err := st.QueryContext(ctx, args...)
		return rows, unavailable(err)
	}
	rows, err := s.db.QueryContext(ctx, query, args...)
	return rows, unavailable(err)
}

// StopSignals implements Signaler. Without LISTEN/NOTIFY (SQLite) the channel is nil and
// never receives: replicas find stop requests by polling.
func (s *sqlStore) StopSignals() <-chan struct{} { return s.signals }

// openSQLite opens path twice: a pool of readers and one writer connection. SQLite has one
// writer at a time anyway; with several writing connections they queue for the lock in
// SQLite's busy handler, which sleeps, and a burst of runs then waits hundreds of ms.
func openSQLite(ctx context.Context, path string) (_ *sqlStore, err error) {
	if dir := filepath.Dir(path); dir != "" {
		if err := os.MkdirAll(dir, 0o750); err != nil {
			return nil, fmt.Errorf("store: create the directory of %q: %w", path, err)
		}
	}
	// One process per file, checked before anything touches the database.
	lock, err := lockDatabase(path)
	if err != nil {
		return nil, err
	}
	var closers []func()
	defer func() {
		if err != nil {
			for i := len(closers) - 1; i >= 0; i-- {
				closers[i]()
			}
			lock.release()
		}
	}()
	wdb, err := sql.Open("sqlite", path+sqliteParams)
	if err != nil {
		return nil, fmt.Errorf("store: open %q: %w", path, err)
	}
	closers = append(closers, func() { _ = wdb.Close() })
	wdb.SetMaxOpenConns(1)
	wdb.SetMaxIdleConns(1)
	wdb.SetConnMaxIdleTime(0)
	wdb.SetConnMaxLifetime(0)
	if err := wdb.PingContext(ctx); err != nil {
		return nil, fmt.Errorf("store: open %q: %w", path, err)
	}
	// Migrated before the readers open: they find the schema in place.
	if _, err := migrate(ctx, wdb, sqliteDialect, migrations); err != nil {
		return nil, fmt.Errorf("store: open %q: %w", path, err)
	}
	// The file exists now (the migration wrote it): from here on it must stay the same file.
	fw, err := watchFile(path)
	if err != nil {
		return nil, err
	}
	closers = append(closers, fw.close)
	rdb, err := sql.Open("sqlite", path+sqliteParams)
	if err != nil {
		return nil, fmt.Errorf("store: open %q: %w", path, err)
	}
	rdb.SetMaxOpenConns(sqliteReaders)
	rdb.SetMaxIdleConns(sqliteReaders)
	w := newGroupWriter(wdb)
	w.check = fw.check
	return withSettler(&sqlStore{db: rdb, d: sqliteDialect, w: w, file: fw, lock: lock,
		onClose: func() { w.close(); _ = wdb.Close(); fw.close(); lock.release() }}), nil
}

func (s *sqlStore) check() error {
	if s.closed.Load() {
		return ErrClosed
	}
	return nil
}

// tx runs fn in a write transaction, holding the thread's write lock where the dialect
// needs one. With SQLite, fn is a job of the group writer: it shares its transaction with
// other callers' jobs (in a savepoint of its own) and may be run a second time (writeFunc).
func (s *sqlStore) tx(ctx context.Context, threadID string, fn writeFunc) error {
	err := unavailable(s.txRaw(ctx, threadID, fn))
	s.health.note(err)
	return err
}

// txRaw is tx without the classification of its error.
func (s *sqlStore) txRaw(ctx context.Context, threadID string, fn writeFunc) error {
	if s.w != nil {
		return s.w.do(ctx, fn)
	}
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	if s.d.lockThread != "" && threadID != "" {
		if _, err := tx.ExecContext(ctx, s.d.q(s.d.lockThread), threadID); err != nil {
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
func (s *sqlStore) txExec(ctx context.Context, tx *sql.Tx, query string, args ...any) (sql.Result, error) {
	if s.w != nil {
		return s.w.exec(ctx, tx, query, args...)
	}
	return tx.ExecContext(ctx, query, args...)
}

// txQueryRow is tx.QueryRowContext as txExec is tx.ExecContext.
func (s *sqlStore) txQueryRow(ctx context.Context, tx *sql.Tx, query string, args ...any) *sql.Row {
	if s.w != nil {
		if st := s.w.stmt(query); st != nil {
			return tx.StmtContext(ctx, st).QueryRowContext(ctx, args...)
		}
	}
	return tx.QueryRowContext(ctx, query, args...)
}

// txStart is tx for a run's start: SQLite's writer runs it before the other writes (its
// first event waits for it).
func (s *sqlStore) txStart(ctx context.Context, threadID string, fn writeFunc) error {
	if s.w != nil {
		err := unavailable(s.w.doStart(ctx, fn))
		s.health.note(err)
		return err
	}
	return s.tx(ctx, threadID, fn)
}

// txBulk is tx for a write that no response waits for (event logs, messages, work
// documents): SQLite's writer runs it after the writes that one does.
func (s *sqlStore) txBulk(ctx context.Context, threadID string, fn writeFunc) error {
	if s.w != nil {
		err := unavailable(s.w.doBulk(ctx, fn))
		s.health.note(err)
		return err
	}
	return s.tx(ctx, threadID, fn)
}

// execBulk is exec for a write that no response waits for (see txBulk).
func (s *sqlStore) execBulk(ctx context.Context, q string, args ...any) (sql.Result, error) {
	if s.w == nil {
		return s.exec(ctx, q, args...)
	}
	var res sql.Result
	err := s.txBulk(ctx, "", func(ctx context.Context, tx *sql.Tx) error {
		var err error
		res, err = s.txExec(ctx, tx, s.d.q(q), args...)
		return err
	})
	return res, err
}

// exec runs one writing statement (through the group writer with SQLite).
func (s *sqlStore) exec(ctx context.Context, q string, args ...any) (sql.Result, error) {
	if s.w == nil {
		res, err := s.db.ExecContext(ctx, s.d.q(q), args...)
		err = unavailable(err)
		s.health.note(err)
		return res, err
	}
	var res sql.Result
	err := s.tx(ctx, "", func(ctx context.Context, tx *sql.Tx) error {
		var err error
		res, err = s.txExec(ctx, tx, s.d.q(q), args...)
		return err
	})
	return res, err
}

func (s *sqlStore) SaveSuspension(ctx context.Context, sus *Suspension) error {
	if err := checkSave(sus); err != nil {
		return err
	}
	if err := s.check(); err != nil {
		return err
	}
	stamp(sus, time.Now().UTC())
	body, err := encode(sus)
	if err != nil {
		return err
	}
	var next sql.NullInt64
	if t := nextExpiry(sus); !t.IsZero() {
		next = sql.NullInt64{Int64: t.UnixNano(), Valid: true}
	}
	err = s.tx(ctx, sus.ThreadID, func(ctx context.Context, tx *sql.Tx) error {
		if sus.Epoch != 0 {
			if err := s.checkEpoch(ctx, tx, sus.ThreadID, sus.writer(), sus.Epoch); err != nil {
				return err
			}
		}
		_, err := s.txExec(ctx, tx, s.d.q(`INSERT INTO suspensions
		(thread_id, run_id, owner, body, next_expiry, created_at, updated_at, open_interrupts)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8)
		ON CONFLICT (thread_id) DO UPDATE SET
			run_id = excluded.run_id, owner = excluded.owner, body = excluded.body,
			next_expiry = excluded.next_expiry, created_at = excluded.created_at,
			updated_at = excluded.updated_at, open_interrupts = excluded.open_interrupts`),
			sus.ThreadID, sus.RunID, sus.Owner, string(body), next,
			sus.CreatedAt.UnixNano(), sus.UpdatedAt.UnixNano(), len(sus.Interrupts))
		return err
	})
	if err != nil {
		return fmt.Errorf("store: save suspension of thread %q: %w", sus.ThreadID, err)
	}
	return nil
}

func (s *sqlStore) LoadSuspension(ctx context.Context, threadID string) (*Suspension, error) {
	if err := s.check(); err != nil {
		return nil, err
	}
	var body string
	err := s.queryRow(ctx, s.d.q(`SELECT body FROM suspensions WHERE thread_id = $1`), threadID).Scan(&body)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, notFound(threadID)
	}
	if err != nil {
		return nil, fmt.Errorf("store: load suspension of thread %q: %w", threadID, err)
	}
	return decode([]byte(body))
}

func (s *sqlStore) DeleteSuspension(ctx context.Context, threadID string) error {
	if err := s.check(); err != nil {
		return err
	}
	if _, err := s.exec(ctx, `DELETE FROM suspensions WHERE thread_id = $1`, threadID); err != nil {
		return fmt.Errorf("store: delete suspension of thread %q: %w", threadID, err)
	}
	return nil
}

func (s *sqlStore) MarkResolved(ctx context.Context, threadID string, ids []string) error {
	if err := s.check(); err != nil {
		return err
	}
	if len(ids) == 0 {
		return nil
	}
	err := s.tx(ctx, threadID, func(ctx context.Context, tx *sql.Tx) error {
		return s.markResolved(ctx, tx, threadID, ids)
	})
	if err != nil {
		return fmt.Errorf("store: mark resolved on thread %q: %w", threadID, err)
	}
	return nil
}

func (s *sqlStore) IsResolved(ctx context.Context, threadID, interruptID string) (bool, error) {
	if err := s.check(); err != nil {
		return false, err
	}
	var one int
	err := s.queryRow(ctx, s.d.q(`SELECT 1 FROM resolved WHERE thread_id = $1 AND interrupt_id = $2`),
		threadID, interruptID).Scan(&one)
	switch {
	case errors.Is(err, sql.ErrNoRows):
		return false, nil
	case err != nil:
		return false, fmt.Errorf("store: is resolved on thread %q: %w", threadID, err)
	}
	return true, nil
}

func (s *sqlStore) Expired(ctx context.Context, now time.Time) (_ []*Suspension, err error) {
	if err := s.check(); err != nil {
		return nil, err
	}
	rows, err := s.query(ctx, s.d.q(`SELECT body FROM suspensions
		WHERE next_expiry IS NOT NULL AND next_expiry <= $1 ORDER BY next_expiry, thread_id`), now.UnixNano())
	if err != nil {
		return nil, fmt.Errorf("store: expired: %w", err)
	}
	defer func() {
		if cerr := rows.Close(); cerr != nil && err == nil {
			err = fmt.Errorf("store: expired: %w", cerr)
		}
	}()
	var out []*Suspension
	for rows.Next() {
		var body string
		if err := rows.Scan(&body); err != nil {
			return nil, fmt.Errorf("store: expired: %w", err)
		}
		sus, err := decode([]byte(body))
		if err != nil {
			return nil, err
		}
		out = append(out, sus)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("store: expired: %w", err)
	}
	return out, nil
}

// threadCols are the columns of a Thread, with its running state and open interrupts.
func (s *sqlStore) threadCols() string {
	return `t.thread_id, t.owner, t.title, t.created_at, t.updated_at, t.last_run_id, t.last_run_at,
		EXISTS (SELECT 1 FROM runs r WHERE r.thread_id = t.thread_id AND r.state = 'running' AND r.lease_until > ` + s.d.nowNS + `),
		COALESCE((SELECT open_interrupts FROM suspensions x WHERE x.thread_id = t.thread_id), 0)`
}

type scanner interface{ Scan(...any) error }

func scanThread(sc scanner) (*Thread, error) {
	var t Thread
	var created, updated, lastRun int64
	if err := sc.Scan(&t.ID, &t.Owner, &t.Title, &created, &updated, &t.LastRunID, &lastRun, &t.Running, &t.OpenInterrupts); err != nil {
		return nil, err
	}
	t.CreatedAt, t.UpdatedAt = fromNS(created), fromNS(updated)
	if lastRun != 0 {
		t.LastRunAt = fromNS(lastRun)
	}
	return &t, nil
}

func fromNS(ns int64) time.Time { return time.Unix(0, ns).UTC() }

func (s *sqlStore) ClaimThread(ctx context.Context, threadID, owner, title string) (*Thread, error) {
	if err := s.check(); err != nil {
		return nil, err
	}
	now := time.Now().UnixNano()
	// ON CONFLICT DO NOTHING: of two replicas creating the same thread, one inserts and
	// the other reads the winner's owner below.
	if _, err := s.exec(ctx, `INSERT INTO threads (thread_id, owner, title, created_at, updated_at)
		VALUES ($1, $2, $3, $4, $4) ON CONFLICT (thread_id) DO NOTHING`, threadID, owner, title, now); err != nil {
		return nil, fmt.Errorf("store: claim thread %q: %w", threadID, err)
	}
	t, err := s.GetThread(ctx, threadID)
	if err != nil {
		return nil, err
	}
	if t.Owner != owner {
		return nil, fmt.Errorf("store: claim thread %q: %w", threadID, ErrThreadOwned)
	}
	return t, nil
}

func (s *sqlStore) GetThread(ctx context.Context, threadID string) (*Thread, error) {
	if err := s.check(); err != nil {
		return nil, err
	}
	t, err := scanThread(s.queryRow(ctx, s.d.q(`SELECT `+s.threadCols()+` FROM threads t WHERE t.thread_id = $1`), threadID))
	if errors.Is(err, sql.ErrNoRows) {
		return nil, fmt.Errorf("store: thread %q: %w", threadID, ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("store: thread %q: %w", threadID, err)
	}
	return t, nil
}

func (s *sqlStore) ListThreads(ctx context.Context, owner string, limit int) (_ []Thread, err error) {
	if err := s.check(); err != nil {
		return nil, err
	}
	if limit <= 0 {
		return nil, nil
	}
	rows, err := s.query(ctx, s.d.q(`SELECT `+s.threadCols()+` FROM threads t WHERE t.owner = $1
		ORDER BY t.updated_at DESC, t.thread_id LIMIT $2`), owner, limit)
	if err != nil {
		return nil, fmt.Errorf("store: list threads: %w", err)
	}
	defer func() {
		if cerr := rows.Close(); cerr != nil && err == nil {
			err = fmt.Errorf("store: list threads: %w", cerr)
		}
	}()
	out := []Thread{}
	for rows.Next() {
		t, err := scanThread(rows)
		if err != nil {
			return nil, fmt.Errorf("store: list threads: %w", err)
		}
		out = append(out, *t)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("store: list threads: %w", err)
	}
	return out, nil
}

func (s *sqlStore) DeleteThread(ctx context.Context, threadID string) error {
	if err := s.check(); err != nil {
		return err
	}
	err := s.tx(ctx, threadID, func(ctx context.Context, tx *sql.Tx) error {
		var busy bool
		if err := s.txQueryRow(ctx, tx, s.d.q(`SELECT EXISTS (SELECT 1 FROM runs WHERE thread_id = $1
			AND state = 'running' AND lease_until > `+s.d.nowNS+`)`), threadID).Scan(&busy); err != nil {
			return err
		}
		if busy {
			return ErrThreadBusy
		}
		return s.deleteThreadRows(ctx, tx, threadID)
	})
	if err != nil {
		return fmt.Errorf("store: delete thread %q: %w", threadID, err)
	}
	return nil
}

func (s *sqlStore) BeginRun(ctx context.Context, threadID, runID, replica string, lease time.Duration) (int64, error) {
	if err := s.check(); err != nil {
		return 0, err
	}
	var epoch int64
	err := s.tx(ctx, threadID, func(ctx context.Context, tx *sql.Tx) error {
		var err error
		epoch, err = s.beginRun(ctx, tx, threadID, runID, replica, lease, nil)
		return err
	})
	if err != nil {
		return 0, fmt.Errorf("store: begin run %q of thread %q: %w", runID, threadID, err)
	}
	return epoch, nil
}

// StartRun implements RunStarter: ClaimThread, BeginRun and SaveRunWork in one transaction.
func (s *sqlStore) StartRun(ctx context.Context, rs RunStart) (int64, error) {
	if err := s.check(); err != nil {
		return 0, err
	}
	if rs.Work != nil && !json.Valid(rs.Work) {
		return 0, fmt.Errorf("store: start run %q: work is not JSON", rs.RunID)
	}
	var epoch int64
	if err := checkMessages(rs.Messages); err != nil {
		return 0, fmt.Errorf("store: start run %q of thread %q: %w", rs.RunID, rs.ThreadID, err)
	}
	if s.pg != nil && distinctIDs(rs.Messages) {
		epoch, err := s.pg.startRun(ctx, rs)
		err = unavailable(err)
		s.health.note(err)
		if err != nil {
			return 0, fmt.Errorf("store: start run %q of thread %q: %w", rs.RunID, rs.ThreadID, err)
		}
		return epoch, nil
	}
	err := s.txStart(ctx, rs.ThreadID, func(ctx context.Context, tx *sql.Tx) error {
		owner, err := s.claimInTx(ctx, tx, rs)
		if err != nil {
			return err
		}
		if owner != rs.Owner {
			return ErrThreadOwned
		}
		epoch, err = s.beginRun(ctx, tx, rs.ThreadID, rs.RunID, rs.Replica, rs.Lease, rs.Work)
		if err != nil {
			return err
		}
		return s.saveMessages(ctx, tx, rs.ThreadID, rs.Messages)
	})
	if err != nil {
		return 0, fmt.Errorf("store: start run %q of thread %q: %w", rs.RunID, rs.ThreadID, err)
	}
	return epoch, nil
}

// claimInTx inserts the thread of rs unless it exists and returns its owner, inside a run
// start's transaction. On PostgreSQL it is one statement (the inserted row, or the stored
// one), one round trip fewer; a row that a concurrent ClaimThread committed while the
// statement waited on it is not in the statement's snapshot, and is read again.
func (s *sqlStore) claimInTx(ctx context.Context, tx *sql.Tx, rs RunStart) (string, error) {
	var owner string
	if rs.MaxThreads > 0 {
		// A capped owner's new thread is counted under the owner's lock first (claimNew).
		if err := s.claimNew(ctx, tx, rs.ThreadID, rs.Owner, rs.Title, rs.MaxThreads); err != nil {
			return "", err
		}
		err := s.txQueryRow(ctx, tx, s.d.q(`SELECT owner FROM threads WHERE thread_id = $1`), rs.ThreadID).Scan(&owner)
		return owner, err
	}
	now := time.Now().UnixNano()
	if s.w == nil {
		err := tx.QueryRowContext(ctx, `WITH ins AS (INSERT INTO threads (thread_id, owner, title, created_at, updated_at)
				VALUES ($1, $2, $3, $4, $4) ON CONFLICT (thread_id) DO NOTHING RETURNING owner)
			SELECT owner FROM ins UNION ALL SELECT owner FROM threads WHERE thread_id = $1 LIMIT 1`,
			rs.ThreadID, rs.Owner, rs.Title, now).Scan(&owner)
		if !errors.Is(err, sql.ErrNoRows) {
			return owner, err
		}
	} else if _, err := s.txExec(ctx, tx, s.d.q(`INSERT INTO threads (thread_id, owner, title, created_at, updated_at)
			VALUES ($1, $2, $3, $4, $4) ON CONFLICT (thread_id) DO NOTHING`), rs.ThreadID, rs.Owner, rs.Title, now); err != nil {
		return "", err
	}
	err := s.txQueryRow(ctx, tx, s.d.q(`SELECT owner FROM threads WHERE thread_id = $1`), rs.ThreadID).Scan(&owner)
	return owner, err
}

// beginRun is BeginRun inside tx; work, when not nil, is the run's first work document.
func (s *sqlStore) beginRun(ctx context.Context, tx *sql.Tx, threadID, runID, replica string, lease time.Duration, work json.RawMessage) (int64, error) {
	// A running run whose replica stopped heartbeating no longer holds the thread. A
	// reused run id starts over: its old record and events go, and its epoch moves on, so
	// that whoever still writes for the old run is fenced.
	var old int64
	var err error
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
	case err != nil:
		return 0, err
	default:
		if _, err := s.txExec(ctx, tx, s.d.q(`DELETE FROM runs WHERE thread_id = $1 AND run_id = $2 AND state <> 'running'`), threadID, runID); err != nil {
			return 0, err
		}
		if _, err := s.txExec(ctx, tx, s.d.q(`DELETE FROM events WHERE thread_id = $1 AND run_id = $2`), threadID, runID); err != nil {
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

// checkEpoch fails with ErrFenced unless run runID of threadID has epoch epoch. It runs
// first in the transaction of a fenced write and, on PostgreSQL, share-locks the run's row
// until that transaction ends: a takeover's UPDATE of the row then waits for the write, so
// that no write of the old owner commits after the takeover (design/fencing.md).
func (s *sqlStore) checkEpoch(ctx context.Context, tx *sql.Tx, threadID, runID string, epoch int64) error {
	var one int
	err := s.txQueryRow(ctx, tx, s.d.q(`SELECT 1 FROM runs WHERE thread_id = $1 AND run_id = $2 AND epoch = $3`+s.d.forShare),
		threadID, runID, epoch).Scan(&one)
	if errors.Is(err, sql.ErrNoRows) {
		return ErrFenced
	}
	return err
}

// refusal is the error of a fenced UPDATE that changed no row: ErrFenced when the run
// exists (under another epoch), ErrNotFound when it does not.
func (s *sqlStore) refusal(ctx context.Context, threadID, runID string) error {
	var one int
	err := s.queryRow(ctx, s.d.q(`SELECT 1 FROM runs WHERE thread_id = $1 AND run_id = $2`), threadID, runID).Scan(&one)
	switch {
	case errors.Is(err, sql.ErrNoRows):
		return ErrNotFound
	case err != nil:
		return err
	}
	return ErrFenced
}

func (s *sqlStore) EndRun(ctx context.Context, threadID, runID string, epoch int64, state string) error {
	if err := s.check(); err != nil {
		return err
	}
	if state == "" || state == RunRunning {
		return fmt.Errorf("store: end run %q: state %q is not an end state", runID, state)
	}
	// The UPDATE itself is the guard: it takes the row's lock, so a takeover either
	// committed before (no row matches the epoch) or waits for it (design/fencing.md).
	res, err := s.exec(ctx, `UPDATE runs SET state = $3, updated_at = $4 WHERE thread_id = $1 AND run_id = $2 AND epoch = $5`,
		threadID, runID, state, time.Now().UnixNano(), epoch)
	if err == nil {
		if n, _ := res.RowsAffected(); n == 0 {
			err = s.refusal(ctx, threadID, runID)
		}
	}
	if err != nil {
		return fmt.Errorf("store: end run %q of thread %q: %w", runID, threadID, err)
	}
	return nil
}

func (s *sqlStore) HeartbeatRuns(ctx context.Context, replica string, lease time.Duration) ([]RunRef, error) {
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

func (s *sqlStore) GetRun(ctx context.Context, threadID, runID string) (*RunRecord, error) {
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

func (s *sqlStore) ActiveRun(ctx context.Context, threadID string) (*RunRecord, error) {
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

func (s *sqlStore) RequestStop(ctx context.Context, threadID, runID string) (*RunRecord, error) {
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

func (s *sqlStore) ThreadRuns(ctx context.Context, threadID string, limit int) (_ []RunRecord, err error) {
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

func (s *sqlStore) StopRequests(ctx context.Context, replica string) (_ []RunRecord, err error) {
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

func (s *sqlStore) ClaimLapsedRuns(ctx context.Context, replica string, limit int) (_ []RunRecord, err error) {
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

func (s *sqlStore) TakeOverRuns(ctx context.Context, replica string, lease time.Duration, limit int, anyLease bool) (_ []RunRecord, err error) {
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
		// row lock re-checks only the outer WHERE; the lease on the database's clock.
		lapsed := `(state = 'running' AND replica <> $1 AND lease_until < ` + s.d.nowNS + `)`
		if anyLease {
			lapsed = `(state = 'running' AND replica <> $1)`
		}
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

func (s *sqlStore) ReleaseRuns(ctx context.Context, replica string) (int, error) {
	if err := s.check(); err != nil {
		return 0, err
	}
	var n int64
	err := s.tx(ctx, "", func(ctx context.Context, tx *sql.Tx) error {
		// One nanosecond in the past: lapsed for every claimer's "lease_until < now".
		res, err := s.txExec(ctx, tx, s.d.q(`UPDATE runs SET lease_until = `+s.d.nowNS+` - 1
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

func (s *sqlStore) SaveRunWork(ctx context.Context, threadID, runID string, epoch int64, work json.RawMessage) error {
	if err := s.check(); err != nil {
		return err
	}
	if !json.Valid(work) {
		return fmt.Errorf("store: save work of run %q: not JSON", runID)
	}
	// Guarded by the UPDATE itself, as EndRun.
	res, err := s.execBulk(ctx, `UPDATE runs SET work = $3, updated_at = $4 WHERE thread_id = $1 AND run_id = $2 AND epoch = $5`,
		threadID, runID, string(work), time.Now().UnixNano(), epoch)
	if err == nil {
		if n, _ := res.RowsAffected(); n == 0 {
			err = s.refusal(ctx, threadID, runID)
		}
	}
	if err != nil {
		return fmt.Errorf("store: save work of run %q of thread %q: %w", runID, threadID, err)
	}
	return nil
}

func (s *sqlStore) AppendEvents(ctx context.Context, threadID, runID string, epoch int64, evs []Event) error {
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
	if len(evs) < appendChunk && s.afterGuard == nil {
		// The usual case on SQLite, in one statement: the epoch's guard in the INSERT's
		// WHERE, in the same transaction as before (it was a SELECT and the INSERT).
		args := append(s.eventArgs(threadID, runID, now, evs), threadID, runID, epoch)
		err := s.txBulk(ctx, "", func(ctx context.Context, tx *sql.Tx) error {
			res, err := s.txExec(ctx, tx, insertEventsGuarded(len(evs)), args...)
			if err != nil {
				return err
			}
			if n, _ := res.RowsAffected(); n == 0 {
				return ErrFenced
			}
			return nil
		})
		if err != nil {
			return fmt.Errorf("store: append events of run %q: %w", runID, err)
		}
		return nil
	}
	err := s.txBulk(ctx, "", func(ctx context.Context, tx *sql.Tx) error {
		if err := s.checkEpoch(ctx, tx, threadID, runID, epoch); err != nil {
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
	})
	if err != nil {
		return fmt.Errorf("store: append events of run %q: %w", runID, err)
	}
	return nil
}

// appendChunk is the rows per multi-row INSERT of events: a round trip per event would cap
// the log's rate, and SQLite allows at most 32766 parameters per statement.
const appendChunk = 256

// insertEvents is the INSERT of n events, in this dialect. SQLite gets anonymous "?"
// placeholders: its driver looks numbered ones up by name, which is quadratic in a
// statement of hundreds of parameters.
func (s *sqlStore) insertEvents(n int) string {
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
func (s *sqlStore) eventArgs(threadID, runID string, now int64, evs []Event) []any {
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

func (s *sqlStore) Events(ctx context.Context, threadID, runID string, after int64, limit int) (_ []Event, err error) {
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

func (s *sqlStore) SweepEvents(ctx context.Context, cutoff time.Time) (int64, error) {
	if err := s.check(); err != nil {
		return 0, err
	}
	res, err := s.execBulk(ctx, `DELETE FROM events WHERE at < $1`, cutoff.UnixNano())
	if err != nil {
		return 0, fmt.Errorf("store: sweep events: %w", err)
	}
	n, _ := res.RowsAffected()
	return n, nil
}

func (s *sqlStore) SaveMessages(ctx context.Context, threadID string, msgs []Message) error {
	if err := s.check(); err != nil {
		return err
	}
	if err := checkMessages(msgs); err != nil {
		return fmt.Errorf("store: save messages of thread %q: %w", threadID, err)
	}
	if len(msgs) == 0 {
		return nil
	}
	var err error
	if s.pg != nil && distinctIDs(msgs) {
		err = unavailable(s.pg.saveMessages(ctx, threadID, msgs))
		s.health.note(err)
	} else {
		err = s.txBulk(ctx, threadID, func(ctx context.Context, tx *sql.Tx) error {
			return s.saveMessages(ctx, tx, threadID, msgs)
		})
	}
	if err != nil {
		return fmt.Errorf("store: save messages of thread %q: %w", threadID, err)
	}
	return nil
}

// checkMessages refuses messages SaveMessages cannot store: without an id, or not JSON.
func checkMessages(msgs []Message) error {
	for _, m := range msgs {
		if m.ID == "" {
			return errors.New("a message has no id")
		}
		if !json.Valid(m.Data) {
			return fmt.Errorf("message %q is not JSON", m.ID)
		}
	}
	return nil
}

// saveMessages is SaveMessages inside tx: new ids are appended in order, a known id keeps
// its position, and the thread keeps its newest MaxMessagesPerThread.
func (s *sqlStore) saveMessages(ctx context.Context, tx *sql.Tx, threadID string, msgs []Message) error {
	if len(msgs) == 0 {
		return nil
	}
	if s.w == nil && distinctIDs(msgs) {
		// PostgreSQL: all messages in one statement (one round trip instead of one per
		// message and one for the last position), numbered after the thread's last in
		// their order. The transaction holds the thread's lock, taken by an earlier
		// statement, so this statement's snapshot sees every committed message of the
		// thread. Ids repeated in one call take the loop below (ON CONFLICT cannot update
		// a row twice in one statement).
		ids, data := make([]string, len(msgs)), make([]string, len(msgs))
		for i, m := range msgs {
			ids[i], data[i] = m.ID, string(m.Data)
		}
		if _, err := tx.ExecContext(ctx, `INSERT INTO messages (thread_id, message_id, pos, data)
			SELECT $1, m.id, (SELECT COALESCE(MAX(pos), 0) FROM messages WHERE thread_id = $1) + m.n, m.data
			FROM unnest($2::TEXT[], $3::TEXT[]) WITH ORDINALITY AS m(id, data, n)
			ON CONFLICT (thread_id, message_id) DO UPDATE SET data = excluded.data`, threadID, ids, data); err != nil {
			return err
		}
		return s.trimMessages(ctx, tx, threadID)
	}
	var pos int64
	if err := s.txQueryRow(ctx, tx, s.d.q(`SELECT COALESCE(MAX(pos), 0) FROM messages WHERE thread_id = $1`), threadID).Scan(&pos); err != nil {
		return err
	}
	for _, m := range msgs {
		pos++
		// A known id keeps its position (ON CONFLICT updates only the data).
		if _, err := s.txExec(ctx, tx, s.d.q(`INSERT INTO messages (thread_id, message_id, pos, data) VALUES ($1, $2, $3, $4)
			ON CONFLICT (thread_id, message_id) DO UPDATE SET data = excluded.data`), threadID, m.ID, pos, string(m.Data)); err != nil {
			return err
		}
	}
	return s.trimMessages(ctx, tx, threadID)
}

// trimMessages keeps the thread's newest MaxMessagesPerThread messages (inside tx).
func (s *sqlStore) trimMessages(ctx context.Context, tx *sql.Tx, threadID string) error {
	_, err := s.txExec(ctx, tx, s.d.q(`DELETE FROM messages WHERE thread_id = $1 AND pos <= (
			SELECT pos FROM messages WHERE thread_id = $1 ORDER BY pos DESC LIMIT 1 OFFSET $2)`),
		threadID, MaxMessagesPerThread)
	return err
}

// distinctIDs reports whether no two of msgs have the same id.
func distinctIDs(msgs []Message) bool {
	seen := make(map[string]struct{}, len(msgs))
	for _, m := range msgs {
		if _, dup := seen[m.ID]; dup {
			return false
		}
		seen[m.ID] = struct{}{}
	}
	return true
}

func (s *sqlStore) LoadMessages(ctx context.Context, threadID string) (_ []Message, err error) {
	if err := s.check(); err != nil {
		return nil, err
	}
	rows, err := s.query(ctx, s.d.q(`SELECT message_id, data FROM messages WHERE thread_id = $1 ORDER BY pos`), threadID)
	if err != nil {
		return nil, fmt.Errorf("store: messages of thread %q: %w", threadID, err)
	}
	defer func() {
		if cerr := rows.Close(); cerr != nil && err == nil {
			err = fmt.Errorf("store: messages of thread %q: %w", threadID, cerr)
		}
	}()
	out := []Message{}
	for rows.Next() {
		var m Message
		var data string
		if err := rows.Scan(&m.ID, &data); err != nil {
			return nil, fmt.Errorf("store: messages of thread %q: %w", threadID, err)
		}
		m.Data = json.RawMessage(data)
		out = append(out, m)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("store: messages of thread %q: %w", threadID, err)
	}
	return out, nil
}

// Ping reports whether the store can be read and written (readiness): a read reaching the
// database is not enough, since a full disk or a deleted SQLite file still reads. It fails
// (wrapping ErrUnavailable) when the SQLite file was deleted or replaced, when the database
// does not answer, when a tiny write fails, or when the last write of the store failed for
// want of the store and none has succeeded since (within writeHealthWindow): a write probe
// alone can succeed where larger writes fail (a WAL file with room left on a full disk).
func (s *sqlStore) Ping(ctx context.Context) error {
	if err := s.check(); err != nil {
		return err
	}
	if s.file != nil {
		if err := s.file.check(); err != nil {
			return err
		}
	}
	if err := s.db.PingContext(ctx); err != nil {
		return fmt.Errorf("store: ping: %w", unavailable(err))
	}
	// The probe rewrites a row with its own value: a real write (a WAL frame, a row
	// version) that changes nothing. It does not count as a successful write for the
	// health below, which is about the store's real writes.
	probe := func(ctx context.Context, tx *sql.Tx) error {
		_, err := s.txExec(ctx, tx, `UPDATE schema_version SET version = version WHERE id = 1`)
		return err
	}
	if err := unavailable(s.txRaw(ctx, "", probe)); err != nil {
		return fmt.Errorf("store: write probe: %w", err)
	}
	return s.health.failing()
}

func (s *sqlStore) Close() error {
	if s.closed.Swap(true) {
		return nil
	}
	s.reads.Range(func(_, v any) bool {
		_ = v.(*sql.Stmt).Close()
		return true
	})
	err := s.db.Close()
	if s.onClose != nil {
		s.onClose()
	}
	if err != nil {
		return fmt.Errorf("store: close: %w", err)
	}
	return nil
}

func (s *sqlStore) WatchRun(ctx context.Context, threadID, runID string, ttl time.Duration) error {
	if err := s.check(); err != nil {
		return err
	}
	res, err := s.exec(ctx, `UPDATE runs SET watched_until = `+s.d.nowNS+` + $3
		WHERE thread_id = $1 AND run_id = $2 AND state = 'running'`, threadID, runID, ttl.Nanoseconds())
	if err != nil {
		return fmt.Errorf("store: watch run %q of thread %q: %w", runID, threadID, err)
	}
	if n, _ := res.RowsAffected(); n == 0 {
		return fmt.Errorf("store: watch run %q of thread %q: %w", runID, threadID, ErrNotFound)
	}
	return nil
}

func (s *sqlStore) RunWatchedFor(ctx context.Context, threadID, runID string) (time.Duration, error) {
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

func (s *sqlStore) SweepRuns(ctx context.Context, cutoff time.Time) (int64, error) {
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

func (s *sqlStore) ClaimExpired(ctx context.Context, now time.Time, limit int) (_ []*Suspension, err error) {
	if err := s.check(); err != nil {
		return nil, err
	}
	if limit <= 0 {
		return nil, nil
	}
	var out []*Suspension
	err = s.tx(ctx, "", func(ctx context.Context, tx *sql.Tx) error {
		out = nil // a job run again starts over
		// As in ClaimLapsedRuns: the candidates are picked once (a materialised CTE, rows
		// locked and others' locked rows skipped), and the condition is checked again on the
		// rows deleted, since a claimer that waited for a lock re-checks only that.
		const due = `next_expiry IS NOT NULL AND next_expiry <= $1`
		busy := `EXISTS (SELECT 1 FROM runs WHERE runs.thread_id = suspensions.thread_id
			AND runs.state = 'running' AND runs.lease_until > ` + s.d.nowNS + `)`
		rows, err := tx.QueryContext(ctx, s.d.q(`WITH picked AS MATERIALIZED (
				SELECT thread_id FROM suspensions WHERE `+due+` AND NOT `+busy+`
				ORDER BY next_expiry, thread_id LIMIT $2 `+s.d.skipLocked+`)
			DELETE FROM suspensions WHERE thread_id IN (SELECT thread_id FROM picked) AND `+due+`
			RETURNING body`), now.UnixNano(), limit)
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			var body string
			if err := rows.Scan(&body); err != nil {
				return err
			}
			sus, err := decode([]byte(body))
			if err != nil {
				return err
			}
			out = append(out, sus)
		}
		return rows.Err()
	})
	if err != nil {
		return nil, fmt.Errorf("store: claim expired: %w", err)
	}
	return out, nil
}
