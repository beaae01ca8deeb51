package store

import (
	"context"
	"sync"
	"time"
)

// memState is what every capability of the memory store shares, under one lock: the
// threads with their runs, messages and journals, and the suspensions, which a thread's
// view, a run's fencing and a thread's deletion all read. The journal's methods
// (memory_journal.go) and the suspensions' (memory_suspensions.go) are its own.
type memState struct {
	mu          sync.Mutex
	closed      bool
	suspensions map[string]memRow
	resolved    map[string]*resolvedIDs
	threads     map[string]*memThread
}

// thread returns the thread's state, or nil. m.mu is held.
func (m *memState) thread(threadID string) *memThread {
	return m.threads[threadID]
}

// ensure returns the thread's state, creating an ownerless placeholder for runs and
// messages written before ClaimThread (the SQL backends allow that too). m.mu is held.
func (m *memState) ensure(threadID string) *memThread {
	th := m.threads[threadID]
	if th == nil {
		th = &memThread{}
		m.threads[threadID] = th
	}
	return th
}

func (m *memState) begin(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	m.mu.Lock()
	if m.closed {
		m.mu.Unlock()
		return ErrClosed
	}
	return nil
}

// owned returns run runID of threadID when its epoch is epoch; ErrFenced when it has
// another, ErrNotFound when there is no such run. m.mu is held.
func (m *memState) owned(threadID, runID string, epoch int64) (*memRun, error) {
	r := m.run(threadID, runID)
	switch {
	case r == nil:
		return nil, ErrNotFound
	case r.r.Epoch != epoch:
		return nil, ErrFenced
	}
	return r, nil
}

func (m *memState) run(threadID, runID string) *memRun {
	if th := m.thread(threadID); th != nil {
		return th.run(runID)
	}
	return nil
}

// running reports whether a run of the thread is running with its lease holding. m.mu is
// held.
func (m *memState) running(threadID string) bool {
	th := m.thread(threadID)
	if th == nil {
		return false
	}
	now := time.Now()
	for _, r := range th.runs {
		if r.r.State == RunRunning && r.r.LeaseUntil.After(now) {
			return true
		}
	}
	return false
}
