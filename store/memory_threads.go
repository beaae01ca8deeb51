package store

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"time"
)

// memThreads are the memory store's threads and their messages.
type memThreads struct {
	*memState
	// perOwner counts the claimed threads of each owner (ClaimThreadCapped's cap).
	perOwner map[string]int
	// swept holds the owner of each thread SweepThreads deleted (ExpiredThread).
	swept map[string]string
}

func (m *memThreads) SweepThreads(ctx context.Context, cutoff time.Time, limit int) (int64, error) {
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
		m.swept[th.t.ID] = th.t.Owner
		m.deleteThread(th.t.ID)
	}
	return int64(len(due)), nil
}

// memThread is a thread in the memory backend, with its messages and runs.
//
// A thread has a few runs and, usually, a few messages, so runs are a slice and the index
// of messages by id is made only once they are many (memIndexFrom): every open run's
// thread is here, and small maps would be most of what it retains.
type memThread struct {
	t        Thread
	msgs     []Message
	msgIndex map[string]int // nil while len(msgs) < memIndexFrom
	runs     []*memRun
	// steps is the thread's journal, oldest first (bounded by maxMemSteps), seq the last
	// number given.
	steps []Step
	seq   int64
}

// memIndexFrom is the number of messages from which a thread indexes them by id.
const memIndexFrom = 32

// run returns the thread's run runID, or nil.
func (th *memThread) run(runID string) *memRun {
	for _, r := range th.runs {
		if r.r.RunID == runID {
			return r
		}
	}
	return nil
}

// putRun records r, replacing the run of the same id.
func (th *memThread) putRun(r *memRun) {
	for i, old := range th.runs {
		if old.r.RunID == r.r.RunID {
			th.runs[i] = r
			return
		}
	}
	th.runs = append(th.runs, r)
}

// msgAt returns the index of message id, or -1.
func (th *memThread) msgAt(id string) int {
	if th.msgIndex != nil {
		if i, ok := th.msgIndex[id]; ok {
			return i
		}
		return -1
	}
	return slices.IndexFunc(th.msgs, func(m Message) bool { return m.ID == id })
}

// reindex rebuilds the index of messages, or drops it while they are few.
func (th *memThread) reindex() {
	if len(th.msgs) < memIndexFrom {
		th.msgIndex = nil
		return
	}
	th.msgIndex = make(map[string]int, len(th.msgs))
	for i, msg := range th.msgs {
		th.msgIndex[msg.ID] = i
	}
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

// claimed reports whether the thread was claimed (a placeholder of runs and messages
// written before ClaimThread is not).
func (th *memThread) claimed() bool { return !th.t.CreatedAt.IsZero() }

// view fills the derived fields of a thread. m.mu is held.
func (m *memThreads) view(th *memThread, now time.Time) Thread {
	t := th.t
	for _, r := range th.runs {
		if r.r.State == RunRunning && r.r.LeaseUntil.After(now) {
			t.Running = true
		}
	}
	if row, ok := m.suspensions[t.ID]; ok {
		t.OpenInterrupts = row.open
	}
	return t
}

func (m *memThreads) ClaimThread(ctx context.Context, threadID, owner, title string) (*Thread, error) {
	return m.ClaimThreadCapped(ctx, threadID, owner, title, 0)
}

func (m *memThreads) ClaimThreadCapped(ctx context.Context, threadID, owner, title string, max int) (*Thread, error) {
	if err := m.begin(ctx); err != nil {
		return nil, err
	}
	defer m.mu.Unlock()
	th, err := m.claimLocked(threadID, owner, title, max)
	if err != nil {
		return nil, err
	}
	t := m.view(th, time.Now())
	return &t, nil
}

// claimLocked is ClaimThreadCapped with m.mu held; a refusal changes nothing.
func (m *memThreads) claimLocked(threadID, owner, title string, max int) (*memThread, error) {
	th := m.thread(threadID)
	if th == nil || !th.claimed() {
		if max > 0 && m.perOwner[owner] >= max {
			return nil, fmt.Errorf("store: claim thread %q: %w", threadID, ErrTooManyThreads)
		}
		now := time.Now().UTC()
		th = m.ensure(threadID)
		th.t = Thread{ID: threadID, Owner: owner, Title: title, CreatedAt: now, UpdatedAt: now,
			LastRunID: th.t.LastRunID, LastRunAt: th.t.LastRunAt}
		m.perOwner[owner]++
	}
	if th.t.Owner != owner {
		return nil, fmt.Errorf("store: claim thread %q: %w", threadID, ErrThreadOwned)
	}
	return th, nil
}

func (m *memThreads) GetThread(ctx context.Context, threadID string) (*Thread, error) {
	if err := m.begin(ctx); err != nil {
		return nil, err
	}
	defer m.mu.Unlock()
	th := m.thread(threadID)
	if th == nil || !th.claimed() {
		return nil, fmt.Errorf("store: thread %q: %w", threadID, ErrNotFound)
	}
	t := m.view(th, time.Now())
	return &t, nil
}

func (m *memThreads) ListThreads(ctx context.Context, owner string, limit int) ([]Thread, error) {
	if err := m.begin(ctx); err != nil {
		return nil, err
	}
	defer m.mu.Unlock()
	if limit <= 0 {
		return nil, nil
	}
	now := time.Now()
	out := []Thread{}
	for _, th := range m.threads {
		if th.claimed() && th.t.Owner == owner {
			out = append(out, m.view(th, now))
		}
	}
	slices.SortFunc(out, func(a, b Thread) int {
		if c := b.UpdatedAt.Compare(a.UpdatedAt); c != 0 {
			return c
		}
		return cmp.Compare(a.ID, b.ID)
	})
	if len(out) > limit {
		out = out[:limit]
	}
	return out, nil
}

func (m *memThreads) DeleteThread(ctx context.Context, threadID string) error {
	if err := m.begin(ctx); err != nil {
		return err
	}
	defer m.mu.Unlock()
	if th := m.thread(threadID); th != nil {
		if m.view(th, time.Now()).Running {
			return fmt.Errorf("store: delete thread %q: %w", threadID, ErrThreadBusy)
		}
	}
	m.deleteThread(threadID)
	return nil
}

// deleteThread removes everything of a thread. m.mu is held.
func (m *memThreads) deleteThread(threadID string) {
	if th := m.thread(threadID); th != nil {
		for _, r := range th.runs {
			r.events = nil // the sweep's references to them find nothing
		}
		if th.claimed() {
			if m.perOwner[th.t.Owner]--; m.perOwner[th.t.Owner] <= 0 {
				delete(m.perOwner, th.t.Owner)
			}
		}
	}
	delete(m.threads, threadID)
	delete(m.suspensions, threadID)
	delete(m.resolved, threadID)
}

func (m *memThreads) SaveMessages(ctx context.Context, threadID string, msgs []Message) error {
	if err := checkMessages(msgs); err != nil {
		return fmt.Errorf("store: save messages of thread %q: %w", threadID, err)
	}
	if err := m.begin(ctx); err != nil {
		return err
	}
	defer m.mu.Unlock()
	saveMessagesLocked(m.ensure(threadID), msgs)
	return nil
}

// saveMessagesLocked is SaveMessages to th with the store's lock held and msgs checked.
func saveMessagesLocked(th *memThread, msgs []Message) {
	for _, msg := range msgs {
		msg.Data = slices.Clone(msg.Data)
		if i := th.msgAt(msg.ID); i >= 0 {
			th.msgs[i] = msg
			continue
		}
		if th.msgIndex != nil {
			th.msgIndex[msg.ID] = len(th.msgs)
		}
		th.msgs = append(th.msgs, msg)
		if th.msgIndex == nil && len(th.msgs) >= memIndexFrom {
			th.reindex()
		}
	}
	if n := len(th.msgs) - MaxMessagesPerThread; n > 0 {
		th.msgs = slices.Clone(th.msgs[n:])
		th.reindex()
	}
}

func (m *memThreads) LoadMessages(ctx context.Context, threadID string) ([]Message, error) {
	if err := m.begin(ctx); err != nil {
		return nil, err
	}
	defer m.mu.Unlock()
	out := []Message{}
	if th := m.thread(threadID); th != nil {
		for _, msg := range th.msgs {
			out = append(out, Message{ID: msg.ID, Data: slices.Clone(msg.Data)})
		}
	}
	return out, nil
}

func (m *memThreads) LoadRecentMessages(ctx context.Context, threadID string, start func(Message) bool) ([]Message, error) {
	if err := m.begin(ctx); err != nil {
		return nil, err
	}
	// A stored message's Data is never changed in place (a save replaces the entry): the
	// messages are read without the lock, which start must not be called under.
	var msgs []Message
	if th := m.thread(threadID); th != nil {
		msgs = slices.Clone(th.msgs)
	}
	m.mu.Unlock()
	from := 0
	for i := len(msgs) - 1; i >= 0; i-- {
		if start(msgs[i]) {
			from = i
			break
		}
	}
	out := make([]Message, 0, len(msgs)-from)
	for _, msg := range msgs[from:] {
		out = append(out, Message{ID: msg.ID, Data: slices.Clone(msg.Data)})
	}
	return out, nil
}

// ThreadStatus implements Threads: the thread's record, its suspension's owner and its
// tombstone, under one lock.
func (m *memThreads) ThreadStatus(ctx context.Context, threadID string) (ThreadStatus, error) {
	if err := m.begin(ctx); err != nil {
		return ThreadStatus{}, err
	}
	th := m.thread(threadID)
	st := ThreadStatus{HasMessages: th != nil && len(th.msgs) > 0}
	st.ExpiredOwner, st.Expired = m.swept[threadID]
	row, suspended := m.suspensions[threadID]
	m.mu.Unlock()
	if suspended {
		// body is never modified in place, so decoding unlocked is safe.
		s, err := decode(row.body)
		if err != nil {
			return ThreadStatus{}, fmt.Errorf("store: thread %q: %w", threadID, err)
		}
		st.Suspended, st.SuspensionOwner = true, s.Owner
	}
	return st, nil
}

func (m *memThreads) ExpiredThread(ctx context.Context, threadID string) (string, bool, error) {
	if err := m.begin(ctx); err != nil {
		return "", false, err
	}
	defer m.mu.Unlock()
	owner, ok := m.swept[threadID]
	return owner, ok, nil
}
