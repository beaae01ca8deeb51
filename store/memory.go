package store

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"time"
)

// memory is the "memory:" Store: its capabilities, each a type of its own over the shared
// locked state, composed. Suspensions are kept encoded, exactly as SQLite keeps them, so that
// a caller never shares maps or slices with the store and both backends return the same
// values.
type memory struct {
	*memState // with the suspensions and the journal
	memThreads
	memRuns
	memSecrets
	memCancels
	spend memSpend
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
		memState:   st,
		memThreads: memThreads{memState: st, perOwner: map[string]int{}, swept: map[string]string{}},
		memRuns:    memRuns{memState: st},
		memSecrets: memSecrets{memState: st},
		memCancels: memCancels{memState: st},
		tasks:      memTasks{m: st, byID: map[string]TaskRecord{}},
	}
}

// Tasks returns the store's A2A tasks.
func (m *memory) Tasks() Tasks { return &m.tasks }

// StartRun implements RunStarter: the claim, the run's record, its work and the input's
// messages under one lock, as the SQL stores write them in one transaction. A refused start
// records nothing.
func (m *memory) StartRun(ctx context.Context, rs RunStart) (int64, error) {
	started, err := m.StartRunReport(ctx, rs)
	return started.Epoch, err
}

// StartRunReport implements RunStarter: StartRun, reporting the thread as new when the
// store held nothing of it (no record, message, run or suspension).
func (m *memory) StartRunReport(ctx context.Context, rs RunStart) (Started, error) {
	if err := checkMessages(rs.Messages); err != nil {
		return Started{}, fmt.Errorf("store: start run %q of thread %q: %w", rs.RunID, rs.ThreadID, err)
	}
	if rs.Work != nil && !json.Valid(rs.Work) {
		return Started{}, fmt.Errorf("store: start run %q: its work is not JSON", rs.RunID)
	}
	if err := m.begin(ctx); err != nil {
		return Started{}, err
	}
	defer m.mu.Unlock()
	th := m.thread(rs.ThreadID)
	_, suspended := m.suspensions[rs.ThreadID]
	fresh := !suspended && (th == nil || (!th.claimed() && len(th.msgs) == 0 && len(th.runs) == 0))
	epoch, err := m.startLocked(rs)
	return Started{Epoch: epoch, NewThread: fresh && err == nil}, err
}

// startLocked is StartRun under m.mu.
func (m *memory) startLocked(rs RunStart) (int64, error) {
	// The refusals come first, in the SQL stores' order (another owner's thread, then a
	// run holding it), since the claim below changes the thread; the claim can then only
	// refuse a new thread over the cap, before it changes anything, and the run's begin
	// cannot be refused (the same lock is held).
	if th := m.thread(rs.ThreadID); th != nil {
		if th.claimed() && th.t.Owner != rs.Owner {
			return 0, fmt.Errorf("store: start run %q: claim thread %q: %w", rs.RunID, rs.ThreadID, ErrThreadOwned)
		}
		now := time.Now()
		for _, r := range th.runs {
			if r.r.State == RunRunning && r.r.LeaseUntil.After(now) {
				return 0, fmt.Errorf("store: start run %q of thread %q: %w", rs.RunID, rs.ThreadID, ErrThreadBusy)
			}
		}
	}
	th, err := m.claimLocked(rs.ThreadID, rs.Owner, rs.Title, rs.MaxThreads)
	if err != nil {
		return 0, err
	}
	r, err := m.beginLocked(rs.ThreadID, rs.RunID, rs.Replica, rs.Lease)
	if err != nil {
		return 0, err
	}
	if rs.Work != nil {
		r.r.Work = slices.Clone(rs.Work)
	}
	saveMessagesLocked(th, rs.Messages)
	if st := rs.Step; st != nil {
		st.ThreadID, st.RunID, st.Epoch = rs.ThreadID, rs.RunID, r.r.Epoch
		m.recordLocked(st)
	}
	return r.r.Epoch, nil
}

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
