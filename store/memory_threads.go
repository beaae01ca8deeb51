package store

import (
	"cmp"
	"context"
	"slices"
	"time"
)

func (m *memory) SweepThreads(ctx context.Context, cutoff time.Time, limit int) (int64, error) {
	if err := m.begin(ctx); err != nil {
		return 0, err
	}
	defer m.mu.Unlock()
	if limit <= 0 {
		return 0, nil
	}
	var due []*memThread
	for id, th := range m.threads {
		if th.claimed() && th.t.UpdatedAt.Before(cutoff) && !th.touchedSince(cutoff) {
			if _, parked := m.suspensions[id]; !parked {
				due = append(due, th)
			}
		}
	}
	slices.SortFunc(due, func(a, b *memThread) int {
		if c := a.t.UpdatedAt.Compare(b.t.UpdatedAt); c != 0 {
			return c
		}
		return cmp.Compare(a.t.ID, b.t.ID)
	})
	if len(due) > limit {
		due = due[:limit]
	}
	for _, th := range due {
		m.deleteThread(th.t.ID)
	}
	return int64(len(due)), nil
}

// touchedSince reports whether a run of the thread keeps it from the sweep: running, lost
// with leftovers not cleaned up, or updated since cutoff.
func (th *memThread) touchedSince(cutoff time.Time) bool {
	for _, r := range th.runs {
		if r.r.State == RunRunning || (r.r.State == RunLost && !r.reaped) || !r.r.UpdatedAt.Before(cutoff) {
			return true
		}
	}
	return false
}
