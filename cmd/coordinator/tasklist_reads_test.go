package main

import (
	"context"
	"path/filepath"
	"sync/atomic"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/baton-dev/baton/store"
)

// readCountingStore counts the store's reads of threads and run logs.
type readCountingStore struct {
	store.Store
	gets, pages, events atomic.Int64
}

func (s *readCountingStore) GetThread(ctx context.Context, threadID string) (*store.Thread, error) {
	s.gets.Add(1)
	return s.Store.GetThread(ctx, threadID)
}

func (s *readCountingStore) ThreadsPage(ctx context.Context, owner, prefix string, before *store.ThreadCursor, limit int) ([]store.Thread, error) {
	s.pages.Add(1)
	return s.Store.ThreadsPage(ctx, owner, prefix, before, limit)
}

func (s *readCountingStore) Events(ctx context.Context, threadID, runID string, after int64, limit int) ([]store.Event, error) {
	s.events.Add(1)
	return s.Store.Events(ctx, threadID, runID, after, limit)
}

// A tasks/list page through the whole path (the MCP surface, the engine's port, SQLite)
// reads one page of threads and then one run log a listed task: no thread is looked up
// again, and each task's status still comes from its log.
func TestTasksListReadsOneLogPerTask(t *testing.T) {
	t.Parallel()
	dsn := "sqlite:" + filepath.Join(t.TempDir(), "reads.db")
	st, err := store.Open(context.Background(), dsn)
	require.NoError(t, err)
	t.Cleanup(func() { _ = st.Close() })
	fillTasks(t, dsn, 30)
	counted := &readCountingStore{Store: st}
	cs := taskServerOver(t, counted, 30)

	gets, pages, events := counted.gets.Load(), counted.pages.Load(), counted.events.Load()
	page, err := mcp.CallCustomMethod[*benchListParams, *benchListResult](context.Background(), cs, "tasks/list", &benchListParams{})
	require.NoError(t, err)
	require.Len(t, page.Tasks, 20)
	assert.NotEmpty(t, page.NextCursor)
	for _, tk := range page.Tasks {
		assert.Equal(t, "completed", tk.Status, "the status read from the run's log")
	}
	assert.Equal(t, int64(0), counted.gets.Load()-gets, "threads looked up")
	assert.Equal(t, int64(1), counted.pages.Load()-pages, "pages of threads read")
	assert.Equal(t, int64(20), counted.events.Load()-events, "run logs read: one a listed task")
}
