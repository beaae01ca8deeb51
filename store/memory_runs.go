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

// memRuns are the memory store's runs and their event logs.
type memRuns struct {
	*memState
	// eventAt lists appended events oldest first, for the retention sweep.
	eventAt []memEventRef
}

// memRun is a run in the memory backend, with its event log.
type memRun struct {
	r      RunRecord
	events []Event
	// reaped: a replica has cleaned up after the run (ClaimLapsedRuns).
	reaped bool
	// watchedUntil is the last HoldRunForFollower's end.
	watchedUntil time.Time
}

func (m *memRuns) BeginRun(ctx context.Context, threadID, runID, replica string, lease time.Duration) (int64, error) {
	if err := m.begin(ctx); err != nil {
		return 0, err
	}
	defer m.mu.Unlock()
	r, err := m.beginLocked(threadID, runID, replica, lease)
	if err != nil {
		return 0, err
	}
	return r.r.Epoch, nil
}

// beginLocked is BeginRun with m.mu held. A refusal changes nothing but marking lost the
// running runs whose lease lapsed, as BeginRun does.
func (m *memRuns) beginLocked(threadID, runID, replica string, lease time.Duration) (*memRun, error) {
	now := time.Now().UTC()
	if th := m.thread(threadID); th != nil {
		for _, r := range th.runs {
			if r.r.State != RunRunning {
				continue
			}
			if !r.r.LeaseUntil.After(now) {
				r.r.State = RunLost
				continue
			}
			return nil, fmt.Errorf("store: begin run %q of thread %q: %w", runID, threadID, ErrThreadBusy)
		}
	}
	th := m.ensure(threadID)
	epoch := int64(1)
	if old := th.run(runID); old != nil {
		old.events = nil // a reused run id starts over without its old events
		epoch = old.r.Epoch + 1
	}
	r := &memRun{r: RunRecord{ThreadID: threadID, RunID: runID, Replica: replica, State: RunRunning,
		StartedAt: now, UpdatedAt: now, LeaseUntil: now.Add(lease), Work: json.RawMessage(`{}`), Epoch: epoch}}
	th.putRun(r)
	th.t.LastRunID, th.t.LastRunAt = runID, now
	if th.claimed() {
		th.t.UpdatedAt = now
	}
	return r, nil
}

func (m *memRuns) EndRun(ctx context.Context, threadID, runID string, epoch int64, state string) error {
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

func (m *memRuns) EndRunStep(ctx context.Context, threadID, runID string, epoch int64, state string, step *Step) error {
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
	step.ThreadID, step.RunID, step.Epoch = threadID, runID, epoch
	r.r.State, r.r.UpdatedAt = state, time.Now().UTC()
	m.recordLocked(step)
	return nil
}

func (m *memRuns) EndRunMessages(ctx context.Context, threadID, runID string, epoch int64, state string, step *Step, msgs []Message) error {
	if state == "" || state == RunRunning {
		return fmt.Errorf("store: end run %q: state %q is not an end state", runID, state)
	}
	if err := checkMessages(msgs); err != nil {
		return fmt.Errorf("store: end run %q of thread %q: %w", runID, threadID, err)
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
	if step != nil {
		step.ThreadID, step.RunID, step.Epoch = threadID, runID, epoch
		m.recordLocked(step)
	}
	if len(msgs) > 0 {
		saveMessagesLocked(m.ensure(threadID), msgs)
	}
	return nil
}

func (m *memRuns) HeartbeatRuns(ctx context.Context, replica string, lease time.Duration) ([]RunRef, error) {
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

func (m *memRuns) GetRun(ctx context.Context, threadID, runID string) (*RunRecord, error) {
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

func (m *memRuns) ActiveRun(ctx context.Context, threadID string) (*RunRecord, error) {
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

func (m *memRuns) RequestStop(ctx context.Context, threadID, runID string) (*RunRecord, error) {
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

func (m *memRuns) StopRequests(ctx context.Context, replica string) ([]RunRecord, error) {
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

func (m *memRuns) ClaimLapsedRuns(ctx context.Context, replica string, limit int) ([]RunRecord, error) {
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

func (m *memRuns) TakeOverRuns(ctx context.Context, replica string, lease time.Duration, limit int, anyLease bool) ([]RunRecord, error) {
	now := time.Now().UTC()
	return m.takeOver(ctx, replica, lease, limit, func(r *RunRecord) bool { return anyLease || r.LeaseUntil.Before(now) })
}

func (m *memRuns) TakeOverReleasedRuns(ctx context.Context, replica string, lease time.Duration, limit int) ([]RunRecord, error) {
	return m.takeOver(ctx, replica, lease, limit, func(r *RunRecord) bool { return r.LeaseUntil.Equal(memReleased) })
}

// takeOver is TakeOverRuns for the running runs of other replicas that match.
func (m *memRuns) takeOver(ctx context.Context, replica string, lease time.Duration, limit int, match func(*RunRecord) bool) ([]RunRecord, error) {
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
			if r.r.State == RunRunning && r.r.Replica != replica && match(&r.r) {
				r.r.Replica, r.r.UpdatedAt, r.r.LeaseUntil = replica, now, now.Add(lease)
				r.r.Epoch++
				out = append(out, *copyRun(r.r))
			}
		}
	}
	return out, nil
}

// memReleased is the LeaseUntil of a run that its replica released (ReleaseRuns): lapsed
// for every claimer, and told apart from a lease that lapsed.
var memReleased = time.Unix(0, 0).UTC()

func (m *memRuns) ReleaseRuns(ctx context.Context, replica string) (int, error) {
	if err := m.begin(ctx); err != nil {
		return 0, err
	}
	defer m.mu.Unlock()
	n := 0
	for _, th := range m.threads {
		for _, r := range th.runs {
			if r.r.Replica == replica && r.r.State == RunRunning {
				r.r.LeaseUntil = memReleased
				n++
			}
		}
	}
	return n, nil
}

func (m *memRuns) ThreadRuns(ctx context.Context, threadID string, limit int) ([]RunRecord, error) {
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

func (m *memRuns) SaveRunWork(ctx context.Context, threadID, runID string, epoch int64, work json.RawMessage) error {
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

func (m *memRuns) AppendEvents(ctx context.Context, threadID, runID string, epoch int64, evs []Event) error {
	if err := m.begin(ctx); err != nil {
		return err
	}
	defer m.mu.Unlock()
	r, err := m.owned(threadID, runID, epoch)
	if err != nil {
		// A run that does not exist has no owner either: nobody may write its log.
		return fmt.Errorf("store: append events of run %q: %w", runID, ErrFenced)
	}
	return m.appendLocked(r, runID, evs)
}

// appendLocked appends evs to r's log, or nothing when a seq is not after the last stored;
// m.mu is held.
func (m *memRuns) appendLocked(r *memRun, runID string, evs []Event) error {
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

func (m *memRuns) SaveRunLog(ctx context.Context, threadID, runID string, epoch int64, evs []Event, work json.RawMessage) error {
	if work != nil && !json.Valid(work) {
		return fmt.Errorf("store: save log of run %q: the work document is not JSON", runID)
	}
	if err := m.begin(ctx); err != nil {
		return err
	}
	defer m.mu.Unlock()
	r, err := m.owned(threadID, runID, epoch)
	if err != nil {
		return fmt.Errorf("store: save log of run %q: %w", runID, ErrFenced)
	}
	if err := m.appendLocked(r, runID, evs); err != nil {
		return err
	}
	if work != nil {
		r.r.Work, r.r.UpdatedAt = slices.Clone(work), time.Now().UTC()
	}
	return nil
}

func (m *memRuns) Events(ctx context.Context, threadID, runID string, after int64, limit int) ([]Event, error) {
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

func (m *memRuns) SweepEvents(ctx context.Context, cutoff time.Time) (int64, error) {
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

func (m *memRuns) HoldRunForFollower(ctx context.Context, threadID, runID string, ttl time.Duration) error {
	if err := m.begin(ctx); err != nil {
		return err
	}
	defer m.mu.Unlock()
	r := m.run(threadID, runID)
	if r == nil || r.r.State != RunRunning {
		return fmt.Errorf("store: hold run %q for a follower of thread %q: %w", runID, threadID, ErrNotFound)
	}
	r.watchedUntil = time.Now().Add(ttl)
	return nil
}

func (m *memRuns) RunHeldFor(ctx context.Context, threadID, runID string) (time.Duration, error) {
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

func (m *memRuns) SweepRuns(ctx context.Context, cutoff time.Time) (int64, error) {
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

func copyRun(r RunRecord) *RunRecord {
	r.Work = slices.Clone(r.Work)
	return &r
}
