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

// resumerOf continues the cancels of the agents it knows, and records them.
type resumerOf struct {
	known map[string]bool
	got   []store.PendingCancel
}

func (r *resumerOf) ResumeCancel(c store.PendingCancel) bool {
	if !r.known[c.Agent] {
		return false
	}
	r.got = append(r.got, c)
	return true
}

// listFails is a store whose pending cancels cannot be read.
type listFails struct{ store.Store }

func (listFails) PendingCancels(context.Context, int) ([]store.PendingCancel, error) {
	return nil, store.ErrUnavailable
}

// TestPendingCancelsResume: at start, every cancel left pending is handed to the resumer
// with its owner; one whose agent it does not know any more is forgotten in the store,
// the others stay recorded until they settle; a store that cannot be read continues
// nothing and says so.
func TestPendingCancelsResume(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st := memoryStore(t)
	p := NewPendingCancels(st, slog.New(slog.DiscardHandler))
	since := time.Now().Truncate(time.Millisecond)
	p.Record("research", "task-1", "alice", since)
	p.Record("gone", "task-2", "bob", since)
	p.Record("research", "task-3", "", since)

	r := &resumerOf{known: map[string]bool{"research": true}}
	n, err := p.Resume(ctx, r)
	require.NoError(t, err)
	assert.Equal(t, 2, n)
	got := map[string]string{}
	for _, c := range r.got {
		got[c.TaskID] = c.Owner
	}
	assert.Equal(t, map[string]string{"task-1": "alice", "task-3": ""}, got)
	left, err := p.List(ctx)
	require.NoError(t, err)
	var ids []string
	for _, c := range left {
		ids = append(ids, c.TaskID)
	}
	assert.ElementsMatch(t, []string{"task-1", "task-3"}, ids, "the unknown agent's cancel is forgotten; the others stay until settled")

	r = &resumerOf{known: map[string]bool{"research": true}}
	n, err = NewPendingCancels(listFails{st}, slog.New(slog.DiscardHandler)).Resume(ctx, r)
	require.ErrorIs(t, err, store.ErrUnavailable)
	assert.Zero(t, n)
	assert.Empty(t, r.got)
}
