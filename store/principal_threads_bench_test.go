package store

import (
	"context"
	"database/sql"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/baton-dev/baton/internal/testutil/pgtest"
)

// BenchmarkStartRunCappedAtScale measures a capped run start of a new thread (the admission
// check of server.max_threads_per_principal) for a principal that already holds 100 or
// 1,000,000 threads, on SQLite and PostgreSQL: the check must cost the same at both sizes.
// The threads are inserted with one SQL statement before the timer starts.
//
//	go test -run '^$' -bench StartRunCappedAtScale -benchtime 2000x ./store/
func BenchmarkStartRunCappedAtScale(b *testing.B) {
	for _, backend := range []string{"sqlite", "postgres"} {
		for _, held := range []int{100, 1_000_000} {
			b.Run(fmt.Sprintf("%s/held=%d", backend, held), func(b *testing.B) {
				ctx := context.Background()
				var dsn string
				if backend == "sqlite" {
					dsn = dsnSQLite + filepath.Join(b.TempDir(), "bench.db")
				} else {
					dsn = pgtest.DSN(b)
				}
				st, err := Open(ctx, dsn)
				if err != nil {
					b.Fatal(err)
				}
				defer func() { _ = st.Close() }()
				fillThreads(b, dsn, held)
				b.ResetTimer()
				for i := 0; b.Loop(); i++ {
					thread, run := fmt.Sprintf("new%d", i), fmt.Sprintf("r%d", i)
					if _, err := st.StartRun(ctx, RunStart{ThreadID: thread, RunID: run, Owner: "alice", Title: "go",
						Replica: "a", Lease: time.Minute, MaxThreads: held + 1_000_000}); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
}

// fillThreads inserts n threads of alice (and as many of bob, so that the owner's threads are not
// the whole table) straight into the database behind dsn.
func fillThreads(b *testing.B, dsn string, n int) {
	b.Helper()
	driver, source, series := "sqlite", strings.TrimPrefix(dsn, dsnSQLite)+sqliteParams,
		`WITH RECURSIVE s(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM s WHERE i < %d) SELECT i FROM s`
	if IsPostgresDSN(dsn) {
		driver, source, series = "pgx", dsn, `SELECT generate_series(1, %d) AS i`
	}
	db, err := sql.Open(driver, source)
	if err != nil {
		b.Fatal(err)
	}
	defer db.Close()
	for _, owner := range []string{"alice", "bob"} {
		q := fmt.Sprintf(`INSERT INTO threads (thread_id, owner, title, created_at, updated_at)
			SELECT '%s-' || i, '%s', '', 1, 1 FROM (`+series+`) AS s`, owner, owner, n)
		if _, err := db.ExecContext(context.Background(), q); err != nil {
			b.Fatal(err)
		}
	}
}
