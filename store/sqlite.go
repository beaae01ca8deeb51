package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync/atomic"
	"time"

	_ "modernc.org/sqlite" // pure-Go SQLite driver "sqlite": no cgo
)

// sqliteParams configure every connection: WAL lets readers run beside the writer; the busy
// timeout makes a writer wait for the lock instead of failing at once; immediate transactions
// take the write lock at BEGIN, because a deferred transaction that upgrades from read to
// write gets SQLITE_BUSY without waiting; NORMAL sync is durable in WAL mode except for the
// last transactions on power loss, which is the usual trade.
const sqliteParams = "?_pragma=busy_timeout(5000)&_pragma=journal_mode(WAL)&_pragma=synchronous(NORMAL)&_txlock=immediate"

// sqliteMaxConns bounds the pool: SQLite has one writer at a time anyway, and a few readers
// are plenty for a coordinator.
const sqliteMaxConns = 4

type sqliteStore struct {
	db     *sql.DB
	closed atomic.Bool
}

func openSQLite(ctx context.Context, path string) (*sqliteStore, error) {
	if dir := filepath.Dir(path); dir != "" {
		if err := os.MkdirAll(dir, 0o750); err != nil {
			return nil, fmt.Errorf("store: create the directory of %q: %w", path, err)
		}
	}
	db, err := sql.Open("sqlite", path+sqliteParams)
	if err != nil {
		return nil, fmt.Errorf("store: open %q: %w", path, err)
	}
	db.SetMaxOpenConns(sqliteMaxConns)
	db.SetMaxIdleConns(sqliteMaxConns)
	if err := db.PingContext(ctx); err != nil {
		_ = db.Close()
		return nil, fmt.Errorf("store: open %q: %w", path, err)
	}
	if _, err := migrate(ctx, db, migrations); err != nil {
		_ = db.Close()
		return nil, fmt.Errorf("store: open %q: %w", path, err)
	}
	return &sqliteStore{db: db}, nil
}

func (s *sqliteStore) check() error {
	if s.closed.Load() {
		return ErrClosed
	}
	return nil
}

func (s *sqliteStore) SaveSuspension(ctx context.Context, sus *Suspension) error {
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
	_, err = s.db.ExecContext(ctx, `INSERT INTO suspensions
		(thread_id, run_id, owner, body, next_expiry, created_at, updated_at)
		VALUES (?, ?, ?, ?, ?, ?, ?)
		ON CONFLICT (thread_id) DO UPDATE SET
			run_id = excluded.run_id, owner = excluded.owner, body = excluded.body,
			next_expiry = excluded.next_expiry, created_at = excluded.created_at,
			updated_at = excluded.updated_at`,
		sus.ThreadID, sus.RunID, sus.Owner, string(body), next,
		sus.CreatedAt.UnixNano(), sus.UpdatedAt.UnixNano())
	if err != nil {
		return fmt.Errorf("store: save suspension of thread %q: %w", sus.ThreadID, err)
	}
	return nil
}

func (s *sqliteStore) LoadSuspension(ctx context.Context, threadID string) (*Suspension, error) {
	if err := s.check(); err != nil {
		return nil, err
	}
	var body string
	err := s.db.QueryRowContext(ctx, `SELECT body FROM suspensions WHERE thread_id = ?`, threadID).Scan(&body)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, notFound(threadID)
	}
	if err != nil {
		return nil, fmt.Errorf("store: load suspension of thread %q: %w", threadID, err)
	}
	return decode([]byte(body))
}

func (s *sqliteStore) DeleteSuspension(ctx context.Context, threadID string) error {
	if err := s.check(); err != nil {
		return err
	}
	if _, err := s.db.ExecContext(ctx, `DELETE FROM suspensions WHERE thread_id = ?`, threadID); err != nil {
		return fmt.Errorf("store: delete suspension of thread %q: %w", threadID, err)
	}
	return nil
}

func (s *sqliteStore) MarkResolved(ctx context.Context, threadID string, ids []string) (err error) {
	if err := s.check(); err != nil {
		return err
	}
	if len(ids) == 0 {
		return nil
	}
	defer func() {
		if err != nil {
			err = fmt.Errorf("store: mark resolved on thread %q: %w", threadID, err)
		}
	}()
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer func() {
		if err != nil {
			_ = tx.Rollback()
		}
	}()
	var seq int64
	if err := tx.QueryRowContext(ctx, `SELECT COALESCE(MAX(seq), 0) FROM resolved WHERE thread_id = ?`, threadID).Scan(&seq); err != nil {
		return err
	}
	for _, id := range ids {
		seq++
		// Marking again makes the id the most recent one.
		if _, err := tx.ExecContext(ctx, `INSERT INTO resolved (thread_id, interrupt_id, seq) VALUES (?, ?, ?)
			ON CONFLICT (thread_id, interrupt_id) DO UPDATE SET seq = excluded.seq`, threadID, id, seq); err != nil {
			return err
		}
	}
	// Keep the newest MaxResolvedPerThread: drop everything at or below the seq of the first
	// one past the bound (no row there means nothing to drop).
	if _, err := tx.ExecContext(ctx, `DELETE FROM resolved WHERE thread_id = ?1 AND seq <= (
			SELECT seq FROM resolved WHERE thread_id = ?1 ORDER BY seq DESC LIMIT 1 OFFSET ?2)`,
		threadID, MaxResolvedPerThread); err != nil {
		return err
	}
	return tx.Commit()
}

func (s *sqliteStore) IsResolved(ctx context.Context, threadID, interruptID string) (bool, error) {
	if err := s.check(); err != nil {
		return false, err
	}
	var one int
	err := s.db.QueryRowContext(ctx, `SELECT 1 FROM resolved WHERE thread_id = ? AND interrupt_id = ?`,
		threadID, interruptID).Scan(&one)
	switch {
	case errors.Is(err, sql.ErrNoRows):
		return false, nil
	case err != nil:
		return false, fmt.Errorf("store: is resolved on thread %q: %w", threadID, err)
	}
	return true, nil
}

func (s *sqliteStore) Expired(ctx context.Context, now time.Time) (_ []*Suspension, err error) {
	if err := s.check(); err != nil {
		return nil, err
	}
	rows, err := s.db.QueryContext(ctx, `SELECT body FROM suspensions
		WHERE next_expiry IS NOT NULL AND next_expiry <= ? ORDER BY next_expiry, thread_id`, now.UnixNano())
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

func (s *sqliteStore) Ping(ctx context.Context) error {
	if err := s.check(); err != nil {
		return err
	}
	if err := s.db.PingContext(ctx); err != nil {
		return fmt.Errorf("store: ping: %w", err)
	}
	return nil
}

func (s *sqliteStore) Close() error {
	if s.closed.Swap(true) {
		return nil
	}
	if err := s.db.Close(); err != nil {
		return fmt.Errorf("store: close: %w", err)
	}
	return nil
}
