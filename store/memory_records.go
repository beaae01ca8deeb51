package store

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"time"
)

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

type memRun struct {
	r      RunRecord
	events []Event
	// reaped: a replica has cleaned up after the run (ClaimLapsedRuns).
	reaped bool
	// watchedUntil is the last WatchRun's end.
	watchedUntil time.Time
}

// lookup returns the thread's state, or nil. m.mu is held.
func (m *memory) thread(threadID string) *memThread {
	return m.threads[threadID]
}

// ensure returns the thread's state, creating an ownerless placeholder for runs and
// messages written before ClaimThread (the SQL backends allow that too). m.mu is held.
func (m *memory) ensure(threadID string) *memThread {
	th := m.threads[threadID]
	if th == nil {
		th = &memThread{}
		m.threads[threadID] = th
	}
	return th
}

func (m *memory) begin(ctx context.Context) error {
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

// view fills the derived fields of a thread. m.mu is held.
func (m *memory) view(th *memThread, now time.Time) Thread {
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

func (m *memory) ClaimThread(ctx context.Context, threadID, owner, title string) (*Thread, error) {
	return m.ClaimThreadCapped(ctx, threadID, owner, title, 0)
}

func (m *memory) ClaimThreadCapped(ctx context.Context, threadID, owner, title string, max int) (*Thread, error) {
	if err := m.begin(ctx); err != nil {
		return nil, err
	}
	defer m.mu.Unlock()
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
	t := m.view(th, time.Now())
	return &t, nil
}

func (th *memThread) claimed() bool { return !th.t.CreatedAt.IsZero() }

func (m *memory) GetThread(ctx context.Context, threadID string) (*Thread, error) {
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

func (m *memory) ListThreads(ctx context.Context, owner string, limit int) ([]Thread, error) {
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

func (m *memory) DeleteThread(ctx context.Context, threadID string) error {
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
func (m *memory) deleteThread(threadID string) {
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

func (m *memory) BeginRun(ctx context.Context, threadID, runID, replica string, lease time.Duration) (int64, error) {
	if err := m.begin(ctx); err != nil {
		return 0, err
	}
	defer m.mu.Unlock()
	now := time.Now().UTC()
	th := m.ensure(threadID)
	for _, r := range th.runs {
		if r.r.State != RunRunning {
			continue
		}
		if !r.r.LeaseUntil.After(now) {
			r.r.State = RunLost
			continue
		}
		return 0, fmt.Errorf("store: begin run %q of thread %q: %w", runID, threadID, ErrThreadBusy)
	}
	epoch := int64(1)
	if old := th.run(runID); old != nil {
		old.events = nil // a reused run id starts over without its old events
		epoch = old.r.Epoch + 1
	}
	th.putRun(&memRun{r: RunRecord{ThreadID: threadID, RunID: runID, Replica: replica, State: RunRunning,
		StartedAt: now, UpdatedAt: now, LeaseUntil: now.Add(lease), Work: json.RawMessage(`{}`), Epoch: epoch}})
	th.t.LastRunID, th.t.LastRunAt = runID, now
	if th.claimed() {
		th.t.UpdatedAt = now
	}
	return epoch, nil
}

// owned returns run runID of threadID when its epoch is epoch; ErrFenced when it has
// another, ErrNotFound when there is no such run. m.mu is held.
func (m *memory) owned(threadID, runID string, epoch int64) (*memRun, error) {
	r := m.run(threadID, runID)
	switch {
	case r == nil:
		return nil, ErrNotFound
	case r.r.Epoch != epoch:
		return nil, ErrFenced
	}
	return r, nil
}

func (m *memory) run(threadID, runID string) *memRun {
	if th := m.thread(threadID); th != nil {
		return th.run(runID)
	}
	return nil
}

func (m *memory) EndRun(ctx context.Context, threadID, runID string, epoch int64, state string) error {
	if state == "" || state == RunRunning {
		return fmt.Errorf("store: end run %q: state %q is not an end state", runID, state)
	}
	if err := m.begin(ctx); err != nil {
		return err
	}
	defer m.mu.Unlock()
	r, err := m.owned(threadID, runID, epoch)
	if err != nil {
		return fmt.Errorf("store: end run %q of thread %q: %w", runID, threadID, err)
	}
	r.r.State, r.r.UpdatedAt = state, time.Now().UTC()
	return nil
}

func (m *memory) HeartbeatRuns(ctx context.Context, replica string, lease time.Duration) ([]RunRef, error) {
	if err := m.begin(ctx); err != nil {
		return nil, err
	}
	defer m.mu.Unlock()
	var out []RunRef
	until := time.Now().UTC().Add(lease)
	for _, th := range m.threads {
		for _, r := range th.runs {
			if r.r.Replica == replica && r.r.State == RunRunning {
				r.r.LeaseUntil = until
				out = append(out, RunRef{ThreadID: r.r.ThreadID, RunID: r.r.RunID, Epoch: r.r.Epoch})
			}
		}
	}
	return out, nil
}

func copyRun(r RunRecord) *RunRecord {
	r.Work = slices.Clone(r.Work)
	return &r
}

func (m *memory) GetRun(ctx context.Context, threadID, runID string) (*RunRecord, error) {
	if err := m.begin(ctx); err != nil {
		return nil, err
	}
	defer m.mu.Unlock()
	r := m.run(threadID, runID)
	if r == nil {
		return nil, fmt.Errorf("store: run %q of thread %q: %w", runID, threadID, ErrNotFound)
	}
	return copyRun(r.r), nil
}

func (m *memory) ActiveRun(ctx context.Context, threadID string) (*RunRecord, error) {
	if err := m.begin(ctx); err != nil {
		return nil, err
	}
	defer m.mu.Unlock()
	now := time.Now()
	if th := m.thread(threadID); th != nil {
		for _, r := range th.runs {
			if r.r.State == RunRunning && r.r.LeaseUntil.After(now) {
				return copyRun(r.r), nil
			}
		}
	}
	return nil, fmt.Errorf("store: active run of thread %q: %w", threadID, ErrNotFound)
}

func (m *memory) RequestStop(ctx context.Context, threadID, runID string) (*RunRecord, error) {
	if err := m.begin(ctx); err != nil {
		return nil, err
	}
	defer m.mu.Unlock()
	r := m.run(threadID, runID)
	if r == nil || r.r.State != RunRunning {
		return nil, fmt.Errorf("store: request stop of run %q of thread %q: %w", runID, threadID, ErrNotFound)
	}
	r.r.StopRequested = true
	return copyRun(r.r), nil
}

func (m *memory) StopRequests(ctx context.Context, replica string) ([]RunRecord, error) {
	if err := m.begin(ctx); err != nil {
		return nil, err
	}
	defer m.mu.Unlock()
	var out []RunRecord
	for _, th := range m.threads {
		for _, r := range th.runs {
			if r.r.Replica == replica && r.r.State == RunRunning && r.r.StopRequested {
				out = append(out, *copyRun(r.r))
			}
		}
	}
	return out, nil
}

func (m *memory) ClaimLapsedRuns(ctx context.Context, replica string, limit int) ([]RunRecord, error) {
	if err := m.begin(ctx); err != nil {
		return nil, err
	}
	defer m.mu.Unlock()
	now := time.Now().UTC()
	var out []RunRecord
	for _, th := range m.threads {
		for _, r := range th.runs {
			if len(out) >= limit {
				return out, nil
			}
			if r.r.State == RunLost && !r.reaped {
				r.r.Replica, r.r.UpdatedAt, r.reaped = replica, now, true
				r.r.Epoch++
				out = append(out, *copyRun(r.r))
			}
		}
	}
	return out, nil
}

func (m *memory) TakeOverRuns(ctx context.Context, replica string, lease time.Duration, limit int, anyLease bool) ([]RunRecord, error) {
	if err := m.begin(ctx); err != nil {
		return nil, err
	}
	defer m.mu.Unlock()
	now := time.Now().UTC()
	var out []RunRecord
	for _, th := range m.threads {
		for _, r := range th.runs {
			if len(out) >= limit {
				return out, nil
			}
			if r.r.State == RunRunning && r.r.Replica != replica && (anyLease || r.r.LeaseUntil.Before(now)) {
				r.r.Replica, r.r.UpdatedAt, r.r.LeaseUntil = replica, now, now.Add(lease)
				r.r.Epoch++
				out = append(out, *copyRun(r.r))
			}
		}
	}
	return out, nil
}

func (m *memory) ReleaseRuns(ctx context.Context, replica string) (int, error) {
	if err := m.begin(ctx); err != nil {
		return 0, err
	}
	defer m.mu.Unlock()
	now := time.Now().UTC().Add(-time.Millisecond)
	n := 0
	for _, th := range m.threads {
		for _, r := range th.runs {
			if r.r.Replica == replica && r.r.State == RunRunning {
				r.r.LeaseUntil = now
				n++
			}
		}
	}
	return n, nil
}

func (m *memory) ThreadRuns(ctx context.Context, threadID string, limit int) ([]RunRecord, error) {
	if err := m.begin(ctx); err != nil {
		return nil, err
	}
	defer m.mu.Unlock()
	th := m.thread(threadID)
	if th == nil || limit <= 0 {
		return nil, nil
	}
	out := make([]RunRecord, 0, len(th.runs))
	for _, r := range th.runs {
		out = append(out, *copyRun(r.r))
	}
	slices.SortFunc(out, func(a, b RunRecord) int {
		if c := b.StartedAt.Compare(a.StartedAt); c != 0 {
			return c
		}
		return strings.Compare(b.RunID, a.RunID)
	})
	if len(out) > limit {
		out = out[:limit]
	}
	return out, nil
}

func (m *memory) SaveRunWork(ctx context.Context, threadID, runID string, epoch int64, work json.RawMessage) error {
	if !json.Valid(work) {
		return fmt.Errorf("store: save work of run %q: not JSON", runID)
	}
	if err := m.begin(ctx); err != nil {
		return err
	}
	defer m.mu.Unlock()
	r, err := m.owned(threadID, runID, epoch)
	if err != nil {
		return fmt.Errorf("store: save work of run %q of thread %q: %w", runID, threadID, err)
	}
	r.r.Work, r.r.UpdatedAt = slices.Clone(work), time.Now().UTC()
	return nil
}

func (m *memory) AppendEvents(ctx context.Context, threadID, runID string, epoch int64, evs []Event) error {
	if err := m.begin(ctx); err != nil {
		return err
	}
	defer m.mu.Unlock()
	r, err := m.owned(threadID, runID, epoch)
	if err != nil {
		// A run that does not exist has no owner either: nobody may write its log.
		return fmt.Errorf("store: append events of run %q: %w", runID, ErrFenced)
	}
	last := int64(0)
	if n := len(r.events); n > 0 {
		last = r.events[n-1].Seq
	}
	for _, ev := range evs {
		if ev.Seq <= last {
			return fmt.Errorf("store: append events of run %q: seq %d is not after %d", runID, ev.Seq, last)
		}
		last = ev.Seq
	}
	now := time.Now().UnixNano()
	for _, ev := range evs {
		r.events = append(r.events, Event{Seq: ev.Seq, Data: slices.Clone(ev.Data)})
		m.eventAt = append(m.eventAt, memEventRef{at: now, run: r, seq: ev.Seq})
	}
	return nil
}

func (m *memory) Events(ctx context.Context, threadID, runID string, after int64, limit int) ([]Event, error) {
	if err := m.begin(ctx); err != nil {
		return nil, err
	}
	defer m.mu.Unlock()
	if limit <= 0 || limit > MaxEventsRead {
		limit = MaxEventsRead
	}
	r := m.run(threadID, runID)
	if r == nil {
		return nil, nil
	}
	i, _ := slices.BinarySearchFunc(r.events, after+1, func(e Event, seq int64) int { return cmp.Compare(e.Seq, seq) })
	var out []Event
	for ; i < len(r.events) && len(out) < limit; i++ {
		out = append(out, Event{Seq: r.events[i].Seq, Data: slices.Clone(r.events[i].Data)})
	}
	return out, nil
}

// memEventRef is one appended event in append order, for the retention sweep. It points at
// the run record itself, so that a run id begun again (a new record) is not swept by the
// old one's references.
type memEventRef struct {
	at  int64
	run *memRun
	seq int64
}

func (m *memory) SweepEvents(ctx context.Context, cutoff time.Time) (int64, error) {
	if err := m.begin(ctx); err != nil {
		return 0, err
	}
	defer m.mu.Unlock()
	c := cutoff.UnixNano()
	var n int64
	i := 0
	for ; i < len(m.eventAt) && m.eventAt[i].at < c; i++ {
		ref := m.eventAt[i]
		r := ref.run
		// Events are appended in seq order, so an old one is at the front of its run.
		if len(r.events) > 0 && r.events[0].Seq == ref.seq {
			r.events[0] = Event{}
			r.events = r.events[1:]
			n++
			if len(r.events) == 0 {
				r.events = nil // a swept log keeps no array behind its run record
			}
		}
	}
	m.eventAt = slices.Clone(m.eventAt[i:])
	return n, nil
}

func (m *memory) SaveMessages(ctx context.Context, threadID string, msgs []Message) error {
	for _, msg := range msgs {
		if msg.ID == "" {
			return fmt.Errorf("store: save messages of thread %q: a message has no id", threadID)
		}
		if !json.Valid(msg.Data) {
			return fmt.Errorf("store: save messages of thread %q: message %q is not JSON", threadID, msg.ID)
		}
	}
	if err := m.begin(ctx); err != nil {
		return err
	}
	defer m.mu.Unlock()
	th := m.ensure(threadID)
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
	return nil
}

func (m *memory) LoadMessages(ctx context.Context, threadID string) ([]Message, error) {
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

func (m *memory) WatchRun(ctx context.Context, threadID, runID string, ttl time.Duration) error {
	if err := m.begin(ctx); err != nil {
		return err
	}
	defer m.mu.Unlock()
	r := m.run(threadID, runID)
	if r == nil || r.r.State != RunRunning {
		return fmt.Errorf("store: watch run %q of thread %q: %w", runID, threadID, ErrNotFound)
	}
	r.watchedUntil = time.Now().Add(ttl)
	return nil
}

func (m *memory) RunWatchedFor(ctx context.Context, threadID, runID string) (time.Duration, error) {
	if err := m.begin(ctx); err != nil {
		return 0, err
	}
	defer m.mu.Unlock()
	r := m.run(threadID, runID)
	if r == nil || r.watchedUntil.IsZero() {
		return 0, nil
	}
	return time.Until(r.watchedUntil), nil
}

func (m *memory) SweepRuns(ctx context.Context, cutoff time.Time) (int64, error) {
	if err := m.begin(ctx); err != nil {
		return 0, err
	}
	defer m.mu.Unlock()
	var n int64
	for _, th := range m.threads {
		th.runs = slices.DeleteFunc(th.runs, func(r *memRun) bool {
			if r.r.State == RunRunning || (r.r.State == RunLost && !r.reaped) || !r.r.UpdatedAt.Before(cutoff) {
				return false
			}
			r.events = nil // the event sweep's references to them find nothing
			n++
			return true
		})
	}
	return n, nil
}

func (m *memory) ClaimExpired(ctx context.Context, now time.Time, limit int) ([]*Suspension, error) {
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

// running reports whether a run of the thread is running with its lease holding. m.mu is
// held.
func (m *memory) running(threadID string) bool {
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
