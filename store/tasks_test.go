package store

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestTasks: a task is created once, updated only by a writer that read its current
// version, read back as written, listed by principal (never another's) and context in
// pages, newest update first, and swept once not updated since the cutoff. On every
// backend.
func TestTasks(t *testing.T) {
	ctx := context.Background()
	for _, b := range backends {
		t.Run(b.name, func(t *testing.T) {
			t.Parallel()
			s := b.open(t).Tasks()
			first := &TaskRecord{TaskID: "task-1", ContextID: "ctx-a", RunID: "r1", Principal: "alice", State: "submitted", Body: []byte(`{"a":1}`)}
			require.NoError(t, s.CreateTask(ctx, first))
			assert.Equal(t, int64(1), first.Version)
			assert.False(t, first.CreatedAt.IsZero())
			require.ErrorIs(t, s.CreateTask(ctx, &TaskRecord{TaskID: "task-1", ContextID: "x", Principal: "bob", State: "submitted"}), ErrTaskExists)
			require.Error(t, s.CreateTask(ctx, &TaskRecord{ContextID: "no-id", Principal: "alice", State: "submitted"}))

			up := &TaskRecord{TaskID: "task-1", ContextID: "ctx-a", RunID: "r2", Principal: "mallory", State: "working", Body: []byte(`{"a":2}`)}
			require.NoError(t, s.UpdateTask(ctx, up, 1))
			assert.Equal(t, int64(2), up.Version)
			assert.Equal(t, "alice", up.Principal, "an update never changes whose task it is")
			stale := &TaskRecord{TaskID: "task-1", ContextID: "ctx-a", Principal: "alice", State: "canceled"}
			require.ErrorIs(t, s.UpdateTask(ctx, stale, 1), ErrTaskVersion)
			require.ErrorIs(t, s.UpdateTask(ctx, &TaskRecord{TaskID: "nope", Principal: "alice", State: "x"}, 1), ErrNotFound)

			got, err := s.GetTask(ctx, "task-1")
			require.NoError(t, err)
			assert.Equal(t, "ctx-a", got.ContextID)
			assert.Equal(t, "r2", got.RunID)
			assert.Equal(t, "alice", got.Principal)
			assert.Equal(t, "working", got.State)
			assert.Equal(t, int64(2), got.Version)
			assert.JSONEq(t, `{"a":2}`, string(got.Body))
			assert.Equal(t, first.CreatedAt, got.CreatedAt)
			assert.False(t, got.UpdatedAt.Before(got.CreatedAt))
			_, err = s.GetTask(ctx, "nope")
			require.ErrorIs(t, err, ErrNotFound)

			// Seven more of alice's tasks in ctx-b, two of bob's.
			for i := range 7 {
				require.NoError(t, s.CreateTask(ctx, &TaskRecord{TaskID: fmt.Sprintf("b-%d", i), ContextID: "ctx-b", Principal: "alice", State: "completed", Body: []byte(`{}`)}))
				time.Sleep(time.Millisecond) // distinct update times, for a defined order
			}
			for i := range 2 {
				require.NoError(t, s.CreateTask(ctx, &TaskRecord{TaskID: fmt.Sprintf("bob-%d", i), ContextID: "ctx-b", Principal: "bob", State: "completed", Body: []byte(`{}`)}))
			}

			var seen []string
			for off := 0; ; off += 3 {
				page, total, err := s.ListTasks(ctx, TaskQuery{Principal: "alice", ContextID: "ctx-b", Offset: off, Limit: 3})
				require.NoError(t, err)
				assert.Equal(t, 7, total)
				if len(page) == 0 {
					break
				}
				for _, p := range page {
					assert.Equal(t, "alice", p.Principal)
					seen = append(seen, p.TaskID)
				}
			}
			assert.Equal(t, []string{"b-6", "b-5", "b-4", "b-3", "b-2", "b-1", "b-0"}, seen, "newest first, every task once")

			all, total, err := s.ListTasks(ctx, TaskQuery{Principal: "alice"})
			require.NoError(t, err)
			assert.Equal(t, 8, total)
			assert.Len(t, all, 8)
			working, total, err := s.ListTasks(ctx, TaskQuery{Principal: "alice", State: "working"})
			require.NoError(t, err)
			require.Equal(t, 1, total)
			assert.Equal(t, "task-1", working[0].TaskID)
			bobs, total, err := s.ListTasks(ctx, TaskQuery{Principal: "bob", ContextID: "ctx-a"})
			require.NoError(t, err)
			assert.Zero(t, total, "bob does not see alice's context")
			assert.Empty(t, bobs)
			later, _, err := s.ListTasks(ctx, TaskQuery{Principal: "alice", UpdatedAfter: got.UpdatedAt})
			require.NoError(t, err)
			for _, l := range later {
				assert.True(t, l.UpdatedAt.After(got.UpdatedAt))
			}

			n, err := s.SweepTasks(ctx, time.Now().Add(time.Hour))
			require.NoError(t, err)
			assert.Equal(t, int64(10), n)
			_, err = s.GetTask(ctx, "task-1")
			require.ErrorIs(t, err, ErrNotFound)
		})
	}
}
