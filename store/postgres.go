package store

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/jackc/pgx/v5/stdlib"
)

// idleInTxTimeout is the server's idle_in_transaction_session_timeout for Baton's sessions,
// in ms: well under a lease, far above any pause between two statements of one transaction.
const idleInTxTimeout = "2000"

// openPostgres connects a pgx pool to dsn and migrates the schema. The queries go through
// database/sql over the pool (stdlib.OpenDBFromPool), so that the SQLite and PostgreSQL
// backends share one implementation; the pool itself stays available for what only
// PostgreSQL has (LISTEN/NOTIFY, session locks, the pipelined writes of pgWriter). tune,
// when given, adjusts the pool's configuration before it connects (tests: a tracer).
func openPostgres(ctx context.Context, dsn string, tune ...func(*pgxpool.Config)) (*sqlStore, error) {
	shown := redactDSN(dsn)
	cfg, err := pgxpool.ParseConfig(dsn)
	if err != nil {
		// pgx's parse errors can quote the DSN, password included: say only what is wrong.
		return nil, fmt.Errorf("%w %q: not a valid PostgreSQL connection string", ErrBadDSN, shown)
	}
	// A replica paused inside a transaction that share-locks a run row (a fenced write)
	// would make every takeover of that run wait for it: the server ends such a
	// transaction after a while (unless the DSN sets another value), and the takeover goes
	// on (design/fencing.md).
	if _, set := cfg.ConnConfig.RuntimeParams["idle_in_transaction_session_timeout"]; !set {
		cfg.ConnConfig.RuntimeParams["idle_in_transaction_session_timeout"] = idleInTxTimeout
	}
	for _, f := range tune {
		f(cfg)
	}
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("store: open %s: %w", shown, err)
	}
	db := stdlib.OpenDBFromPool(pool)
	fail := func(err error) (*sqlStore, error) {
		_ = db.Close()
		pool.Close()
		return nil, fmt.Errorf("store: open %s: %w", shown, err)
	}
	if err := db.PingContext(ctx); err != nil {
		return fail(err)
	}
	if _, err := migrate(ctx, db, postgresDialect, pgMigrations); err != nil {
		return fail(err)
	}
	l := startListener(pool)
	s := newSQLStore(&sqlConn{db: db, lockThread: postgresDialect.q(postgresDialect.lockThread), pg: &pgWriter{pool: pool, d: postgresDialect}}, postgresDialect)
	s.signals = l.sig
	s.onClose = func() { l.close(); pool.Close() }
	return s, nil
}
