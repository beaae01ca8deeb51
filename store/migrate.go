package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
)

// migrations are the schema changes, in order; migrations[i] brings the schema from version i
// to i+1. Append only: a released migration is never edited, since databases in the field
// already ran it.
var migrations = []string{
	// 1: suspensions and resolved interrupt ids.
	`CREATE TABLE suspensions (
		thread_id   TEXT PRIMARY KEY,
		run_id      TEXT NOT NULL,
		owner       TEXT NOT NULL,
		body        TEXT NOT NULL,      -- the Suspension as JSON
		next_expiry INTEGER,            -- earliest interrupt expiry, Unix ns; NULL: none
		created_at  INTEGER NOT NULL,   -- Unix ns
		updated_at  INTEGER NOT NULL    -- Unix ns
	);
	CREATE INDEX suspensions_next_expiry ON suspensions (next_expiry) WHERE next_expiry IS NOT NULL;
	CREATE TABLE resolved (
		thread_id    TEXT NOT NULL,
		interrupt_id TEXT NOT NULL,
		seq          INTEGER NOT NULL,  -- per thread, higher is more recent
		PRIMARY KEY (thread_id, interrupt_id)
	) WITHOUT ROWID;
	CREATE INDEX resolved_thread_seq ON resolved (thread_id, seq);`,
}

// migrate brings db to len(steps) migrations and returns the version found before. It runs in
// one immediate transaction (the DSN sets _txlock=immediate), so concurrent openers serialise
// and a failed step leaves the schema as it was.
func migrate(ctx context.Context, db *sql.DB, steps []string) (from int, err error) {
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return 0, fmt.Errorf("store: migrate: begin: %w", err)
	}
	defer func() {
		if err != nil {
			_ = tx.Rollback()
		}
	}()
	if _, err := tx.ExecContext(ctx, `CREATE TABLE IF NOT EXISTS schema_version (
		id      INTEGER PRIMARY KEY CHECK (id = 1),
		version INTEGER NOT NULL
	)`); err != nil {
		return 0, fmt.Errorf("store: migrate: create schema_version: %w", err)
	}
	err = tx.QueryRowContext(ctx, `SELECT version FROM schema_version WHERE id = 1`).Scan(&from)
	if errors.Is(err, sql.ErrNoRows) {
		from, err = 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("store: migrate: read schema_version: %w", err)
	}
	if from > len(steps) {
		return from, fmt.Errorf("store: the database schema is at version %d, newer than this program knows (%d): use a newer Baton or another database", from, len(steps))
	}
	for v := from; v < len(steps); v++ {
		if _, err := tx.ExecContext(ctx, steps[v]); err != nil {
			return from, fmt.Errorf("store: migrate to version %d: %w", v+1, err)
		}
	}
	if _, err := tx.ExecContext(ctx, `INSERT INTO schema_version (id, version) VALUES (1, ?)
		ON CONFLICT (id) DO UPDATE SET version = excluded.version`, len(steps)); err != nil {
		return from, fmt.Errorf("store: migrate: write schema_version: %w", err)
	}
	if err := tx.Commit(); err != nil {
		return from, fmt.Errorf("store: migrate: commit: %w", err)
	}
	return from, nil
}
