package store

import (
	"context"
	"database/sql"
	"fmt"
	"os"
	"path/filepath"

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

// sqlStore is the Store of both SQL backends: the capabilities, each a type of its own over
// the shared connection in the backend's dialect, composed. It keeps what only opening,
// Ping and Close use.
type sqlStore struct {
	*sqlConn
	d       *dialect
	tasks   sqlTasks
	onClose func() // releases what the backend holds besides db (the pgx pool)
	// signals receives stop-request notifications (PostgreSQL); nil for SQLite.
	signals chan struct{}
	// file watches the identity of SQLite's database file (filewatch.go); nil for
	// PostgreSQL.
	file *fileWatch
	// lock is SQLite's one-process lock on the database (lockfile.go); nil for PostgreSQL.
	lock *processLock

	sqlSuspensions
	sqlThreads
	sqlRuns
	sqlJournal
	sqlSecrets
	sqlCancels
	sqlSpend
}

// The capabilities callers find by type assertion rather than in Store.
var (
	_ RunStarter  = (*sqlStore)(nil)
	_ Signaler    = (*sqlStore)(nil)
	_ SpendLedger = (*sqlStore)(nil)
)

// newSQLStore composes the store's capabilities over c, each writing its queries in d.
func newSQLStore(c *sqlConn, d *dialect) *sqlStore {
	threads := sqlThreads{c, d}
	return &sqlStore{
		sqlConn:        c,
		d:              d,
		tasks:          sqlTasks{c, d},
		sqlSuspensions: sqlSuspensions{c, d},
		sqlThreads:     threads,
		sqlRuns:        sqlRuns{sqlConn: c, d: d, threads: threads},
		sqlJournal:     sqlJournal{c, d},
		sqlSecrets:     sqlSecrets{c, d},
		sqlCancels:     sqlCancels{c, d},
		sqlSpend:       sqlSpend{c, d},
	}
}

// StopSignals implements Signaler. Without LISTEN/NOTIFY (SQLite) the channel is nil and
// never receives: replicas find stop requests by polling.
func (s *sqlStore) StopSignals() <-chan struct{} { return s.signals }

// Tasks returns the store's A2A tasks.
func (s *sqlStore) Tasks() Tasks { return s.tasks }

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
	s := newSQLStore(&sqlConn{db: rdb, w: w}, sqliteDialect)
	s.file, s.lock = fw, lock
	s.onClose = func() { w.close(); _ = wdb.Close(); fw.close(); lock.release() }
	return s, nil
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
