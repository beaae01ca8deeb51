package store

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"time"
)

// The memory store's suspensions and their answered interrupts, settling a resume
// included, are memState's: a thread's view, a run's fencing and a thread's deletion all
// read them under the store's lock.

func (m *memState) SaveSuspension(ctx context.Context, s *Suspension) error {
	if err := checkSave(s); err != nil {
		return err
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return ErrClosed
	}
	if s.Epoch != 0 {
		if _, err := m.owned(s.ThreadID, s.writer(), s.Epoch); err != nil {
			return fmt.Errorf("store: save suspension of thread %q: %w", s.ThreadID, ErrFenced)
		}
	}
	stamp(s, time.Now().UTC())
	b, err := encode(s)
	if err != nil {
		return err
	}
	m.suspensions[s.ThreadID] = memRow{body: b, nextExpiry: nextExpiry(s), open: len(s.Interrupts)}
	return nil
}

func (m *memState) LoadSuspension(ctx context.Context, threadID string) (*Suspension, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	m.mu.Lock()
	if m.closed {
		m.mu.Unlock()
		return nil, ErrClosed
	}
	row, ok := m.suspensions[threadID]
	m.mu.Unlock()
	if !ok {
		return nil, notFound(threadID)
	}
	return decode(row.body) // body is never modified in place, so decoding unlocked is safe
}

func (m *memState) DeleteSuspension(ctx context.Context, threadID string) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return ErrClosed
	}
	delete(m.suspensions, threadID)
	return nil
}

func (m *memState) MarkResolved(ctx context.Context, threadID string, ids []string) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return ErrClosed
	}
	m.markResolved(threadID, ids)
	return nil
}

func (m *memState) IsResolved(ctx context.Context, threadID, interruptID string) (bool, error) {
	if err := ctx.Err(); err != nil {
		return false, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return false, ErrClosed
	}
	r := m.resolved[threadID]
	if r == nil {
		return false, nil
	}
	_, ok := r.set[interruptID]
	return ok, nil
}

func (m *memState) Expired(ctx context.Context, now time.Time) ([]*Suspension, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	type hit struct {
		threadID string
		row      memRow
	}
	var hits []hit
	m.mu.Lock()
	if m.closed {
		m.mu.Unlock()
		return nil, ErrClosed
	}
	for id, row := range m.suspensions {
		if !row.nextExpiry.IsZero() && !row.nextExpiry.After(now) {
			hits = append(hits, hit{id, row})
		}
	}
	m.mu.Unlock()
	slices.SortFunc(hits, func(a, b hit) int {
		if c := a.row.nextExpiry.Compare(b.row.nextExpiry); c != 0 {
			return c
		}
		return cmp.Compare(a.threadID, b.threadID)
	})
	out := make([]*Suspension, 0, len(hits))
	for _, h := range hits {
		s, err := decode(h.row.body)
		if err != nil {
			return nil, err
		}
		out = append(out, s)
	}
	return out, nil
}

func (m *memState) CloseSuspension(ctx context.Context, threadID, runID string, epoch int64, ids []string) error {
	if err := m.begin(ctx); err != nil {
		return err
	}
	defer m.mu.Unlock()
	if epoch != 0 {
		if _, err := m.owned(threadID, runID, epoch); err != nil {
			return fmt.Errorf("store: settle suspension of thread %q for run %q: %w", threadID, runID, ErrFenced)
		}
	}
	m.markResolved(threadID, ids)
	delete(m.suspensions, threadID)
	return nil
}

// markResolved records ids as answered, keeping the newest MaxResolvedPerThread of the
// thread. m.mu is held.
func (m *memState) markResolved(threadID string, ids []string) {
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

func (m *memState) ClaimExpired(ctx context.Context, now time.Time, limit int) ([]*Suspension, error) {
	if err := m.begin(ctx); err != nil {
		return nil, err
	}
	defer m.mu.Unlock()
	type hit struct {
		threadID string
		row      memRow
	}
	var hits []hit
	for id, row := range m.suspensions {
		if row.nextExpiry.IsZero() || row.nextExpiry.After(now) || m.running(id) {
			continue
		}
		hits = append(hits, hit{id, row})
	}
	slices.SortFunc(hits, func(a, b hit) int {
		if c := a.row.nextExpiry.Compare(b.row.nextExpiry); c != 0 {
			return c
		}
		return cmp.Compare(a.threadID, b.threadID)
	})
	if len(hits) > limit {
		hits = hits[:max(limit, 0)]
	}
	out := make([]*Suspension, 0, len(hits))
	for _, h := range hits {
		s, err := decode(h.row.body)
		if err != nil {
			return nil, err
		}
		delete(m.suspensions, h.threadID)
		out = append(out, s)
	}
	return out, nil
}
