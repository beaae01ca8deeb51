package store

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"sync"
	"time"
)

// memory is the "memory:" Store. Suspensions are kept encoded, exactly as SQLite keeps them,
// so that a caller never shares maps or slices with the store and both backends return the
// same values.
type memory struct {
	mu          sync.Mutex
	closed      bool
	suspensions map[string]memRow
	resolved    map[string]*resolvedIDs
	threads     map[string]*memThread
	// perOwner counts the claimed threads of each owner (ClaimThreadCapped's cap).
	perOwner map[string]int
	secrets  map[secretKey]memSecret
	// eventAt lists appended events oldest first, for the retention sweep.
	eventAt []memEventRef
	// cancels are the pending cancels, with their Since and Owner.
	cancels map[cancelKey]cancelRecord
	// tasks are the A2A tasks.
	tasks memTasks
	// memSettler settles resumes (memory_settler.go).
	memSettler
}

type memRow struct {
	body       []byte
	nextExpiry time.Time
	open       int // interrupts in the suspension
}

// resolvedIDs is one thread's resolved ids, oldest first, bounded by MaxResolvedPerThread.
type resolvedIDs struct {
	order []string
	set   map[string]struct{}
}

func newMemory() *memory {
	m := &memory{suspensions: map[string]memRow{}, resolved: map[string]*resolvedIDs{}, threads: map[string]*memThread{}, perOwner: map[string]int{}}
	m.tasks = memTasks{m: m, byID: map[string]TaskRecord{}}
	m.memSettler = memSettler{m}
	return m
}

func (m *memory) SaveSuspension(ctx context.Context, s *Suspension) error {
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

func (m *memory) LoadSuspension(ctx context.Context, threadID string) (*Suspension, error) {
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

func (m *memory) DeleteSuspension(ctx context.Context, threadID string) error {
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

func (m *memory) MarkResolved(ctx context.Context, threadID string, ids []string) error {
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

func (m *memory) IsResolved(ctx context.Context, threadID, interruptID string) (bool, error) {
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

func (m *memory) Expired(ctx context.Context, now time.Time) ([]*Suspension, error) {
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

func (m *memory) Ping(ctx context.Context) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return ErrClosed
	}
	return ctx.Err()
}

func (m *memory) Close() error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.closed = true
	m.suspensions, m.resolved, m.threads, m.eventAt = nil, nil, nil, nil
	return nil
}
