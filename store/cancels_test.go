package store

import (
	"context"
	"database/sql"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestPendingCancels(t *testing.T) {
	ctx := context.Background()
	for _, b := range backends {
		t.Run(b.name, func(t *testing.T) {
			s := b.open(t)
			none, err := s.PendingCancels(ctx, 10)
			require.NoError(t, err)
			assert.Empty(t, none)

			require.NoError(t, s.SavePendingCancel(ctx, PendingCancel{Agent: "research", TaskID: "t2", Since: t0.Add(time.Second)}))
			require.NoError(t, s.SavePendingCancel(ctx, PendingCancel{Agent: "research", TaskID: "t1", Since: t0, Owner: "p-alice"}))
			require.NoError(t, s.SavePendingCancel(ctx, PendingCancel{Agent: "travel", TaskID: "t1", Since: t0.Add(2 * time.Second), Owner: "p-bob"}))
			// Saved again: the first Since and Owner stay (the horizon counts from the
			// decision; the task's owner does not change).
			require.NoError(t, s.SavePendingCancel(ctx, PendingCancel{Agent: "research", TaskID: "t1", Since: t0.Add(time.Hour), Owner: "p-mallory"}))

			got, err := s.PendingCancels(ctx, 10)
			require.NoError(t, err)
			require.Len(t, got, 3)
			assert.Equal(t, PendingCancel{Agent: "research", TaskID: "t1", Since: t0, Owner: "p-alice"}, got[0], "oldest first, first Since and Owner kept")
			assert.Equal(t, PendingCancel{Agent: "research", TaskID: "t2", Since: t0.Add(time.Second)}, got[1], "no owner: the anonymous principal")
			assert.Equal(t, PendingCancel{Agent: "travel", TaskID: "t1", Since: t0.Add(2 * time.Second), Owner: "p-bob"}, got[2])

			limited, err := s.PendingCancels(ctx, 2)
			require.NoError(t, err)
			assert.Len(t, limited, 2)

			require.NoError(t, s.DeletePendingCancel(ctx, "research", "t1"))
			require.NoError(t, s.DeletePendingCancel(ctx, "research", "absent"), "deleting an absent cancel is no error")
			got, err = s.PendingCancels(ctx, 10)
			require.NoError(t, err)
			require.Len(t, got, 2)
			assert.Equal(t, "t2", got[0].TaskID)

			// Bad input is refused and changes nothing.
			require.Error(t, s.SavePendingCancel(ctx, PendingCancel{Agent: "", TaskID: "x", Since: t0}))
			require.Error(t, s.SavePendingCancel(ctx, PendingCancel{Agent: "a", TaskID: "", Since: t0}))
			got, err = s.PendingCancels(ctx, 10)
			require.NoError(t, err)
			assert.Len(t, got, 2)
		})
	}
}

// TestPendingCancelsSurviveRestart reopens an SQLite file.
func TestPendingCancelsSurviveRestart(t *testing.T) {
	ctx := context.Background()
	dsn := "sqlite:" + filepath.Join(t.TempDir(), "baton.db")
	s, err := Open(ctx, dsn)
	require.NoError(t, err)
	require.NoError(t, s.SavePendingCancel(ctx, PendingCancel{Agent: "research", TaskID: "t1", Since: t0, Owner: "p-alice"}))
	require.NoError(t, s.Close())
	s, err = Open(ctx, dsn)
	require.NoError(t, err)
	defer s.Close()
	got, err := s.PendingCancels(ctx, 10)
	require.NoError(t, err)
	assert.Equal(t, []PendingCancel{{Agent: "research", TaskID: "t1", Since: t0, Owner: "p-alice"}}, got)
}

// TestPendingCancelsFromV7 migrates a database of schema version 7, whose pending cancels
// have no owner, forward: they keep everything and get the empty owner (continued without
// credentials, as version 7 did), and new ones keep theirs.
func TestPendingCancelsFromV7(t *testing.T) {
	ctx := context.Background()
	for _, b := range sharedBackends {
		t.Run(b.name, func(t *testing.T) {
			dsn := b.dsn(t)
			d, steps := sqliteDialect, migrations
			driver, source := "sqlite", strings.TrimPrefix(dsn, dsnSQLite)+sqliteParams
			if IsPostgresDSN(dsn) {
				d, steps, driver, source = postgresDialect, pgMigrations, "pgx", dsn
			}
			require.Greater(t, len(steps), 7, "version 8 exists")
			db, err := sql.Open(driver, source)
			require.NoError(t, err)
			_, err = migrate(ctx, db, d, steps[:7])
			require.NoError(t, err)
			_, err = db.ExecContext(ctx, `INSERT INTO pending_cancels (agent, task_id, since) VALUES ('research', 'old', 42)`)
			require.NoError(t, err)
			require.NoError(t, db.Close())

			s, err := Open(ctx, dsn)
			require.NoError(t, err)
			defer s.Close()
			require.NoError(t, s.SavePendingCancel(ctx, PendingCancel{Agent: "research", TaskID: "new", Since: t0, Owner: "p-alice"}))
			got, err := s.PendingCancels(ctx, 10)
			require.NoError(t, err)
			assert.Equal(t, []PendingCancel{
				{Agent: "research", TaskID: "old", Since: time.Unix(0, 42).UTC()},
				{Agent: "research", TaskID: "new", Since: t0, Owner: "p-alice"},
			}, got)
		})
	}
}
