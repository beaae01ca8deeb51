package store

import (
	"context"
	"fmt"
	"slices"
)

// memSettler is memory's settling of resumes under the store's lock; a type of its own,
// embedded in memory, as sqlSettler is in sqlStore.
type memSettler struct{ m *memory }

func (st memSettler) SettleSuspension(ctx context.Context, threadID, runID string, epoch int64, ids []string) error {
	m := st.m
	if err := m.begin(ctx); err != nil {
		return err
	}
	defer m.mu.Unlock()
	if epoch != 0 {
		if _, err := m.owned(threadID, runID, epoch); err != nil {
			return fmt.Errorf("store: settle suspension of thread %q for run %q: %w", threadID, runID, ErrFenced)
		}
	}
	st.markResolved(threadID, ids)
	delete(m.suspensions, threadID)
	return nil
}

// markResolved records ids as answered, keeping the newest MaxResolvedPerThread of the
// thread. m.mu is held.
func (st memSettler) markResolved(threadID string, ids []string) {
	m := st.m
	r := m.resolved[threadID]
	if r == nil {
		r = &resolvedIDs{set: map[string]struct{}{}}
		m.resolved[threadID] = r
	}
	for _, id := range ids {
		if _, ok := r.set[id]; ok {
			// Marking again makes the id the most recent one, as in SQLite.
			r.order = slices.DeleteFunc(r.order, func(x string) bool { return x == id })
		}
		r.order = append(r.order, id)
		r.set[id] = struct{}{}
	}
	if n := len(r.order) - MaxResolvedPerThread; n > 0 {
		for _, id := range r.order[:n] {
			delete(r.set, id)
		}
		r.order = slices.Clone(r.order[n:])
	}
}
