package store

import (
	"context"
	"path/filepath"
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
			require.NoError(t, s.SavePendingCancel(ctx, PendingCancel{Agent: "research", TaskID: "t1", Since: t0}))
			require.NoError(t, s.SavePendingCancel(ctx, PendingCancel{Agent: "travel", TaskID: "t1", Since: t0.Add(2 * time.Second)}))
			// Saved again: the first Since stays (the horizon counts from the decision).
			require.NoError(t, s.SavePendingCancel(ctx, PendingCancel{Agent: "research", TaskID: "t1", Since: t0.Add(time.Hour)}))

			got, err := s.PendingCancels(ctx, 10)
			require.NoError(t, err)
			require.Len(t, got, 3)
			assert.Equal(t, PendingCancel{Agent: "research", TaskID: "t1", Since: t0}, got[0], "oldest first, first Since kept")
			assert.Equal(t, "t2", got[1].TaskID)
			assert.Equal(t, "travel", got[2].Agent)

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
	require.NoError(t, s.SavePendingCancel(ctx, PendingCancel{Agent: "research", TaskID: "t1", Since: t0}))
	require.NoError(t, s.Close())
	s, err = Open(ctx, dsn)
	require.NoError(t, err)
	defer s.Close()
	got, err := s.PendingCancels(ctx, 10)
	require.NoError(t, err)
	assert.Equal(t, []PendingCancel{{Agent: "research", TaskID: "t1", Since: t0}}, got)
}
