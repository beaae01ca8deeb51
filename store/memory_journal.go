package store

import (
	"context"
	"fmt"
	"slices"
	"time"
)

// maxMemSteps bounds the journal kept per thread by the memory store; the oldest steps go
// first.
const maxMemSteps = 10000

// The memory store's journal of a run's effects (Journal) is kept in each thread's state:
// its methods are memState's.

func (m *memState) RecordStep(ctx context.Context, s *Step) error {
	if err := m.begin(ctx); err != nil {
		return err
	}
	defer m.mu.Unlock()
	if s.Epoch != 0 {
		if _, err := m.owned(s.ThreadID, s.RunID, s.Epoch); err != nil {
			return fmt.Errorf("store: record %s step of run %q: %w", s.Kind, s.RunID, ErrFenced)
		}
	}
	m.recordLocked(s)
	return nil
}

// recordLocked appends s to its thread's journal; m.mu is held.
func (m *memState) recordLocked(s *Step) {
	s.normalize(time.Now())
	th := m.ensure(s.ThreadID)
	th.seq++
	s.Seq = th.seq
	th.steps = append(th.steps, *s)
	if len(th.steps) > maxMemSteps {
		th.steps = slices.Delete(th.steps, 0, len(th.steps)-maxMemSteps)
	}
}

// step returns the thread's step seq, or nil. m.mu is held.
func (m *memState) step(threadID string, seq int64) *Step {
	th := m.thread(threadID)
	if th == nil {
		return nil
	}
	i, ok := slices.BinarySearchFunc(th.steps, seq, func(s Step, q int64) int { return int(s.Seq - q) })
	if !ok {
		return nil
	}
	return &th.steps[i]
}

func (m *memState) EndStep(ctx context.Context, threadID string, seq int64, end StepEnd) error {
	if err := m.begin(ctx); err != nil {
		return err
	}
	defer m.mu.Unlock()
	end.normalize()
	s := m.step(threadID, seq)
	if s != nil && end.Epoch != 0 {
		if _, err := m.owned(threadID, s.RunID, end.Epoch); err != nil {
			return fmt.Errorf("store: end step %d of thread %q: %w", seq, threadID, ErrFenced)
		}
	}
	if s == nil || s.Outcome != StepPending {
		return fmt.Errorf("store: end step %d of thread %q: %w", seq, threadID, ErrNotFound)
	}
	s.Outcome, s.Tag, s.FailureKind, s.InDoubt = end.Outcome, end.Tag, end.FailureKind, end.InDoubt
	if end.Detail != "" {
		s.Detail = end.Detail
	}
	return nil
}

func (m *memState) Steps(ctx context.Context, threadID string, after int64, limit int) ([]Step, error) {
	if err := m.begin(ctx); err != nil {
		return nil, err
	}
	defer m.mu.Unlock()
	if limit <= 0 || limit > MaxStepsRead {
		limit = MaxStepsRead
	}
	out := []Step{}
	if th := m.thread(threadID); th != nil {
		for _, s := range th.steps {
			if s.Seq > after && len(out) < limit {
				out = append(out, s)
			}
		}
	}
	return out, nil
}

func (m *memState) PendingSteps(ctx context.Context, threadID, runID string) ([]Step, error) {
	if err := m.begin(ctx); err != nil {
		return nil, err
	}
	defer m.mu.Unlock()
	out := []Step{}
	if th := m.thread(threadID); th != nil {
		for _, s := range th.steps {
			if s.RunID == runID && s.Outcome == StepPending && len(out) < MaxStepsRead {
				out = append(out, s)
			}
		}
	}
	return out, nil
}

func (m *memState) MarkInDoubt(ctx context.Context, threadID, runID string, epoch int64, seqs []int64, detail string) (int, error) {
	if err := m.begin(ctx); err != nil {
		return 0, err
	}
	defer m.mu.Unlock()
	if epoch != 0 {
		if _, err := m.owned(threadID, runID, epoch); err != nil {
			return 0, fmt.Errorf("store: mark steps of run %q in doubt: %w", runID, ErrFenced)
		}
	}
	n := 0
	for _, q := range seqs {
		if s := m.step(threadID, q); s != nil && s.RunID == runID && s.Outcome == StepPending {
			s.Outcome, s.InDoubt = StepInDoubt, true
			s.Detail = inDoubtDetail(s.Detail, detail)
			n++
		}
	}
	return n, nil
}
