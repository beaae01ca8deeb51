package store

import (
	"context"
	"time"
)

// memory is the "memory:" Store: its capabilities, each a type of its own over the shared
// locked state, composed. Suspensions are kept encoded, exactly as SQLite keeps them, so that
// a caller never shares maps or slices with the store and both backends return the same
// values.
type memory struct {
	*memState
	memSuspensions
	memThreads
	memRuns
	memJournal
	memSecrets
	memCancels
	// tasks are the A2A tasks.
	tasks memTasks
}

// memRow is a stored suspension: its encoding, with what the expiry and the threads' view
// read without decoding it.
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
	st := &memState{suspensions: map[string]memRow{}, resolved: map[string]*resolvedIDs{}, threads: map[string]*memThread{}}
	return &memory{
		memState:       st,
		memSuspensions: memSuspensions{st},
		memThreads:     memThreads{memState: st, perOwner: map[string]int{}},
		memRuns:        memRuns{memState: st},
		memJournal:     memJournal{st},
		memSecrets:     memSecrets{memState: st},
		memCancels:     memCancels{memState: st},
		tasks:          memTasks{m: st, byID: map[string]TaskRecord{}},
	}
}

// Tasks returns the store's A2A tasks.
func (m *memory) Tasks() Tasks { return &m.tasks }

// StopSignals implements Signaler: one process holds a memory store, so no stop is
// recorded elsewhere; nil never receives.
func (m *memory) StopSignals() <-chan struct{} { return nil }

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
