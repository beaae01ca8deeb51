package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
)

// schemaV2 adds what issues 14 and 15 need: thread ownership for every thread, runs with
// leases, the per-run event log and the thread messages. The same DDL serves both SQL
// backends (SQLite reads BIGINT as INTEGER). Times are Unix nanoseconds, as in version 1.
const schemaV2 = `ALTER TABLE suspensions ADD COLUMN open_interrupts INTEGER NOT NULL DEFAULT 0;
	CREATE TABLE threads (
		thread_id   TEXT PRIMARY KEY,
		owner       TEXT NOT NULL,
		title       TEXT NOT NULL DEFAULT '',
		created_at  BIGINT NOT NULL,
		updated_at  BIGINT NOT NULL,
		last_run_id TEXT NOT NULL DEFAULT '',
		last_run_at BIGINT NOT NULL DEFAULT 0
	);
	CREATE INDEX threads_owner_updated ON threads (owner, updated_at);
	CREATE TABLE runs (
		thread_id   TEXT NOT NULL,
		run_id      TEXT NOT NULL,
		replica     TEXT NOT NULL,          -- the process that owns the run
		state       TEXT NOT NULL,          -- running, or how it ended
		started_at  BIGINT NOT NULL,
		updated_at  BIGINT NOT NULL,
		lease_until BIGINT NOT NULL,        -- database clock, Unix ns
		work        TEXT NOT NULL DEFAULT '{}',  -- downstream work (A2A tasks, MCP calls) as JSON
		PRIMARY KEY (thread_id, run_id)
	);
	-- One active run per thread, whichever replica asks: the second insert conflicts.
	CREATE UNIQUE INDEX runs_one_active ON runs (thread_id) WHERE state = 'running';
	CREATE INDEX runs_lease ON runs (lease_until) WHERE state = 'running';
	CREATE TABLE events (
		thread_id TEXT NOT NULL,
		run_id    TEXT NOT NULL,
		seq       BIGINT NOT NULL,
		at        BIGINT NOT NULL,
		data      TEXT NOT NULL,
		PRIMARY KEY (thread_id, run_id, seq)
	);
	CREATE INDEX events_at ON events (at);
	CREATE TABLE messages (
		thread_id  TEXT NOT NULL,
		message_id TEXT NOT NULL,
		pos        BIGINT NOT NULL,
		data       TEXT NOT NULL,
		PRIMARY KEY (thread_id, message_id)
	);
	CREATE INDEX messages_pos ON messages (thread_id, pos);`

// schemaV3 adds stop requests: a stop that reaches a replica other than the run's owner is
// recorded on the run's row (and, on PostgreSQL, announced with NOTIFY), and the owner
// finds it there.
const schemaV3 = `ALTER TABLE runs ADD COLUMN stop_requested INTEGER NOT NULL DEFAULT 0;
	CREATE INDEX runs_stop ON runs (replica) WHERE stop_requested = 1 AND state = 'running';`

// schemaV4 marks runs whose leftovers a replica has cleaned up: a lapsed run that BeginRun
// marked lost (to free its thread at once) still needs its remote tasks cancelled.
const schemaV4 = `ALTER TABLE runs ADD COLUMN reaped INTEGER NOT NULL DEFAULT 0;
	CREATE INDEX runs_unreaped ON runs (updated_at) WHERE state = 'lost' AND reaped = 0;`

// schemaV7 records the A2A cancels not confirmed yet, so that a restart continues them
// (design/cancel-confirm.md).
const schemaV7 = `CREATE TABLE pending_cancels (
		agent   TEXT NOT NULL,
		task_id TEXT NOT NULL,
		since   BIGINT NOT NULL,   -- when the cancel was decided, Unix ns (the horizon counts from it)
		PRIMARY KEY (agent, task_id)
	);
	CREATE INDEX pending_cancels_since ON pending_cancels (since);`

// schemaV8 records whose task each pending cancel is (the principal id the threads table
// keeps as owner, never a token), so that a restart continues it with the owner's agent
// credentials. Rows of version 7 get the empty owner (no credentials, as before).
const schemaV8 = `ALTER TABLE pending_cancels ADD COLUMN owner TEXT NOT NULL DEFAULT '';`

// schemaV5 records, per run, until when a client follows it through a replica other than its
// owner (server.on_disconnect: detach): the owner's reconnect grace consults it before it
// cancels a run nobody watches locally (design/disconnect-policy.md).
const schemaV5 = `ALTER TABLE runs ADD COLUMN watched_until BIGINT NOT NULL DEFAULT 0;`

// schemaEpoch adds each run's fencing token (RunRecord.Epoch): 1 when the run begins, one
// more at every takeover; every write that belongs to a run is conditional on it
// (design/fencing.md).
const schemaEpoch = `ALTER TABLE runs ADD COLUMN epoch BIGINT NOT NULL DEFAULT 1;`

// schemaSecrets adds the secrets table (Secrets): sealed OAuth grants and pending
// sign-ins. Values are base64 text and times Unix ns (0: never expires).
const schemaSecrets = `CREATE TABLE secrets (
		kind       TEXT NOT NULL,
		skey       TEXT NOT NULL,
		value      TEXT NOT NULL,
		expires_at BIGINT NOT NULL DEFAULT 0,
		updated_at BIGINT NOT NULL,
		PRIMARY KEY (kind, skey)
	);
	CREATE INDEX secrets_expires ON secrets (expires_at) WHERE expires_at > 0;`

// schemaThreadsUpdated indexes threads by their last update, for the sweep of threads
// untouched past server.thread_retention (SweepThreads): the owner's index leads with the
// owner.
const schemaThreadsUpdated = `CREATE INDEX threads_updated ON threads (updated_at);`

// schemaTombstones keeps one small row per thread id that SweepThreads deleted
// (ExpiredThread): its owner and when. Kept for good: a few dozen bytes per swept thread,
// against a client that would otherwise start over silently on an expired id.
const schemaTombstones = `CREATE TABLE thread_tombstones (
	thread_id TEXT PRIMARY KEY,
	owner     TEXT NOT NULL,
	swept_at  BIGINT NOT NULL
);`

// migrations are the SQLite schema changes, in order; migrations[i] brings the schema from
// version i to i+1. Append only: a released migration is never edited, since databases in
// the field already ran it.
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
	// 2: threads, runs, events, messages.
	schemaV2,
	// 3: stop requests.
	schemaV3,
	// 4: reaped runs.
	schemaV4,
	// 5: remote watchers of a run.
	schemaV5,
	// 6: secrets (sealed OAuth grants, pending sign-ins).
	schemaSecrets,
	// 7: pending cancels.
	schemaV7,
	// 8: the owner of each pending cancel.
	schemaV8,
	// 9: the runs' fencing tokens.
	schemaEpoch,
	// 10: the step journal.
	schemaJournal,
	// 11: threads by last update (the thread retention sweep).
	schemaThreadsUpdated,
	// 12: the A2A tasks Baton serves.
	schemaTasks,
	// 13: the threads each principal holds, counted.
	schemaPrincipalThreadsSQLite,
	// 14: the spend ledger (principals' days, threads).
	schemaSpend,
	// 15: tombstones of threads swept by server.thread_retention.
	schemaTombstones,
	// 16: threads by owner, id family and creation (ThreadsPage).
	schemaThreadsFamilySQLite,
}

// pgMigrations are PostgreSQL's schema changes, numbered as SQLite's: version n means the
// same tables on both. Append only.
var pgMigrations = []string{
	// 1: suspensions and resolved interrupt ids (BIGINT: Unix ns overflow INTEGER).
	`CREATE TABLE suspensions (
		thread_id   TEXT PRIMARY KEY,
		run_id      TEXT NOT NULL,
		owner       TEXT NOT NULL,
		body        TEXT NOT NULL,      -- JSON kept as text: jsonb would reorder it
		next_expiry BIGINT,
		created_at  BIGINT NOT NULL,
		updated_at  BIGINT NOT NULL
	);
	CREATE INDEX suspensions_next_expiry ON suspensions (next_expiry) WHERE next_expiry IS NOT NULL;
	CREATE TABLE resolved (
		thread_id    TEXT NOT NULL,
		interrupt_id TEXT NOT NULL,
		seq          BIGINT NOT NULL,
		PRIMARY KEY (thread_id, interrupt_id)
	);
	CREATE INDEX resolved_thread_seq ON resolved (thread_id, seq);`,
	// 2: threads, runs, events, messages.
	schemaV2,
	// 3: stop requests.
	schemaV3,
	// 4: reaped runs.
	schemaV4,
	// 5: remote watchers of a run.
	schemaV5,
	// 6: secrets (sealed OAuth grants, pending sign-ins).
	schemaSecrets,
	// 7: pending cancels.
	schemaV7,
	// 8: the owner of each pending cancel.
	schemaV8,
	// 9: the runs' fencing tokens.
	schemaEpoch,
	// 10: the step journal.
	schemaJournal,
	// 11: threads by last update (the thread retention sweep).
	schemaThreadsUpdated,
	// 12: the A2A tasks Baton serves.
	schemaTasks,
	// 13: the threads each principal holds, counted.
	schemaPrincipalThreadsPostgres,
	// 14: the spend ledger (principals' days, threads).
	schemaSpend,
	// 15: tombstones of threads swept by server.thread_retention.
	schemaTombstones,
	// 16: threads by owner, id family and creation (ThreadsPage).
	schemaThreadsFamilyPostgres,
}

// migrateLockKey is the advisory lock that serialises PostgreSQL migrations of replicas
// starting at once ("baton" in ASCII).
const migrateLockKey = 0x626174_6f6e

// migrate brings db to len(steps) migrations and returns the version found before. It runs in
// one transaction, so a failed step leaves the schema as it was, and concurrent openers
// serialise: SQLite's transaction is immediate (the DSN sets _txlock=immediate), PostgreSQL's
// starts by taking a transaction-scoped advisory lock (DDL is transactional there).
func migrate(ctx context.Context, db *sql.DB, d *dialect, steps []string) (from int, err error) {
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return 0, fmt.Errorf("store: migrate: begin: %w", err)
	}
	defer func() {
		if err != nil {
			_ = tx.Rollback()
		}
	}()
	if d == postgresDialect {
		if _, err := tx.ExecContext(ctx, `SELECT pg_advisory_xact_lock($1)`, int64(migrateLockKey)); err != nil {
			return 0, fmt.Errorf("store: migrate: lock: %w", err)
		}
	}
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
	if _, err := tx.ExecContext(ctx, d.q(`INSERT INTO schema_version (id, version) VALUES (1, $1)
		ON CONFLICT (id) DO UPDATE SET version = excluded.version`), len(steps)); err != nil {
		return from, fmt.Errorf("store: migrate: write schema_version: %w", err)
	}
	if err := tx.Commit(); err != nil {
		return from, fmt.Errorf("store: migrate: commit: %w", err)
	}
	return from, nil
}
