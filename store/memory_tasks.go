package store

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"
)

// memTasks is the memory store's A2A tasks (Tasks). It holds the store's lock while it
// works, as every other capability of the store does, so that Close ends it too.
type memTasks struct {
	m *memState
	// byID are the tasks, by id; guarded by m.mu.
	byID map[string]TaskRecord
}

func (ts *memTasks) CreateTask(ctx context.Context, t *TaskRecord) error {
	if err := checkTask(t); err != nil {
		return err
	}
	if err := ts.m.begin(ctx); err != nil {
		return err
	}
	defer ts.m.mu.Unlock()
	if _, ok := ts.byID[t.TaskID]; ok {
		return fmt.Errorf("store: create task %q: %w", t.TaskID, ErrTaskExists)
	}
	now := time.Unix(0, time.Now().UnixNano()).UTC()
	t.Version, t.CreatedAt, t.UpdatedAt = 1, now, now
	c := *t
	c.Body = slices.Clone(t.Body)
	ts.byID[t.TaskID] = c
	return nil
}

func (ts *memTasks) UpdateTask(ctx context.Context, t *TaskRecord, prev int64) error {
	if err := checkTask(t); err != nil {
		return err
	}
	if err := ts.m.begin(ctx); err != nil {
		return err
	}
	defer ts.m.mu.Unlock()
	old, ok := ts.byID[t.TaskID]
	if !ok {
		return fmt.Errorf("store: update task %q: %w", t.TaskID, ErrNotFound)
	}
	if old.Version != prev {
		return fmt.Errorf("store: update task %q: %w", t.TaskID, ErrTaskVersion)
	}
	t.Version, t.Principal, t.CreatedAt = prev+1, old.Principal, old.CreatedAt
	t.UpdatedAt = time.Unix(0, time.Now().UnixNano()).UTC()
	c := *t
	c.Body = slices.Clone(t.Body)
	ts.byID[t.TaskID] = c
	return nil
}

func (ts *memTasks) GetTask(ctx context.Context, taskID string) (*TaskRecord, error) {
	if err := ts.m.begin(ctx); err != nil {
		return nil, err
	}
	defer ts.m.mu.Unlock()
	t, ok := ts.byID[taskID]
	if !ok {
		return nil, fmt.Errorf("store: task %q: %w", taskID, ErrNotFound)
	}
	t.Body = slices.Clone(t.Body)
	return &t, nil
}

func (ts *memTasks) ListTasks(ctx context.Context, q TaskQuery) ([]TaskRecord, int, error) {
	if err := ts.m.begin(ctx); err != nil {
		return nil, 0, err
	}
	defer ts.m.mu.Unlock()
	q.normalize()
	var all []TaskRecord
	for _, t := range ts.byID {
		if t.Principal != q.Principal || q.ContextID != "" && t.ContextID != q.ContextID ||
			q.State != "" && t.State != q.State || !q.UpdatedAfter.IsZero() && !t.UpdatedAt.After(q.UpdatedAfter) {
			continue
		}
		all = append(all, t)
	}
	slices.SortFunc(all, compareTasks)
	total := len(all)
	page := []TaskRecord{}
	if q.Offset < total {
		page = all[q.Offset:min(total, q.Offset+q.Limit)]
	}
	for i := range page {
		page[i].Body = slices.Clone(page[i].Body)
	}
	return page, total, nil
}

// compareTasks orders tasks newest update first, then by id (the SQL stores' order).
func compareTasks(a, b TaskRecord) int {
	if c := b.UpdatedAt.Compare(a.UpdatedAt); c != 0 {
		return c
	}
	return strings.Compare(a.TaskID, b.TaskID)
}

func (ts *memTasks) SweepTasks(ctx context.Context, cutoff time.Time) (int64, error) {
	if err := ts.m.begin(ctx); err != nil {
		return 0, err
	}
	defer ts.m.mu.Unlock()
	var n int64
	for id, t := range ts.byID {
		if t.UpdatedAt.Before(cutoff) {
			delete(ts.byID, id)
			n++
		}
	}
	return n, nil
}
