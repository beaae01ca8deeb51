package store

import (
	"context"
	"database/sql"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestThreadCountFromV12 migrates a database of schema version 12, whose threads were never
// counted, forward: the backfill counts them, so the cap holds for threads made before the
// migration, and the count follows every later insert, delete and sweep.
func TestThreadCountFromV12(t *testing.T) {
	ctx := context.Background()
	backends := append([]struct {
		name string
		dsn  func(t *testing.T) string
	}{{"sqlite", func(t *testing.T) string { return dsnSQLite + filepath.Join(t.TempDir(), "baton.db") }}}, sharedBackends...)
	for _, b := range backends {
		t.Run(b.name, func(t *testing.T) {
			dsn := b.dsn(t)
			d, steps := sqliteDialect, migrations
			driver, source := "sqlite", strings.TrimPrefix(dsn, dsnSQLite)+sqliteParams
			if IsPostgresDSN(dsn) {
				d, steps, driver, source = postgresDialect, pgMigrations, "pgx", dsn
			}
			require.Greater(t, len(steps), 12, "version 13 exists")
			db, err := sql.Open(driver, source)
			require.NoError(t, err)
			_, err = migrate(ctx, db, d, steps[:12])
			require.NoError(t, err)
			for i := range 3 {
				_, err = db.ExecContext(ctx, d.q(`INSERT INTO threads (thread_id, owner, title, created_at, updated_at) VALUES ($1, 'alice', '', 1, 1)`), fmt.Sprintf("old%d", i))
				require.NoError(t, err)
			}
			defer db.Close()

			s, err := Open(ctx, dsn)
			require.NoError(t, err)
			defer s.Close()
			count := func(owner string) int {
				t.Helper()
				var n int
				require.NoError(t, db.QueryRowContext(ctx, d.q(countOwnerThreads), owner).Scan(&n))
				return n
			}
			assert.Equal(t, 3, count("alice"), "the backfill counts the threads made before")
			_, err = s.ClaimThreadCapped(ctx, "new", "alice", "", 3)
			require.ErrorIs(t, err, ErrTooManyThreads, "threads made before the migration count against the cap")
			require.NoError(t, claimCapped(ctx, s, true, "new", "alice", 4))
			_, err = s.ClaimThreadCapped(ctx, "new", "alice", "", 4)
			require.NoError(t, err, "an existing thread is not counted again")
			assert.Equal(t, 4, count("alice"))
			require.NoError(t, s.DeleteThread(ctx, "old0"))
			assert.Equal(t, 3, count("alice"), "a deleted thread is uncounted")
			n, err := s.SweepThreads(ctx, time.Now().Add(time.Hour), 10)
			require.NoError(t, err)
			assert.EqualValues(t, 3, n)
			assert.Equal(t, 0, count("alice"), "swept threads are uncounted")
			assert.Equal(t, 0, count("bob"))
		})
	}
}
