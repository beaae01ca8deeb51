package durable

import (
	"context"
	"log/slog"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/baton-dev/baton/store"
)

// A cancel recorded is listed for a restart, with its owner and since; one forgotten is not.
func TestPendingCancels(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st, err := store.Open(ctx, "memory:")
	require.NoError(t, err)
	t.Cleanup(func() { _ = st.Close() })
	p := NewPendingCancels(st, slog.New(slog.DiscardHandler))
	since := time.Now().Truncate(time.Millisecond)
	p.Record("research", "task-1", "alice", since)
	p.Record("research", "task-2", "", since)
	p.Forget("research", "task-2")
	got, err := p.List(ctx)
	require.NoError(t, err)
	require.Len(t, got, 1)
	assert.Equal(t, "research", got[0].Agent)
	assert.Equal(t, "task-1", got[0].TaskID)
	assert.Equal(t, "alice", got[0].Owner)
	assert.True(t, got[0].Since.Equal(since), "since %v, got %v", since, got[0].Since)
}
