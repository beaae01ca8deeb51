package store

import (
	"context"
	"sync"
	"time"
)

// memSpend is the memory store's spend ledger.
type memSpend struct {
	mu      sync.Mutex
	days    map[[2]string]Spend // principal, day
	threads map[string]Spend
}

func (m *memSpend) AddSpend(ctx context.Context, a SpendAdd) (Spend, error) {
	if err := checkSpend(a); err != nil {
		return Spend{}, err
	}
	if err := ctx.Err(); err != nil {
		return Spend{}, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.days == nil {
		m.days, m.threads = map[[2]string]Spend{}, map[string]Spend{}
	}
	k := [2]string{a.Principal, a.Day}
	m.days[k] = addSpend(m.days[k], a.Spend)
	if a.ThreadID != "" {
		m.threads[a.ThreadID] = addSpend(m.threads[a.ThreadID], a.Spend)
	}
	return m.days[k], nil
}

func (m *memSpend) DaySpend(ctx context.Context, principal, day string) (Spend, error) {
	if err := ctx.Err(); err != nil {
		return Spend{}, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.days[[2]string{principal, day}], nil
}

func (m *memSpend) ThreadSpend(ctx context.Context, threadID string) (Spend, error) {
	if err := ctx.Err(); err != nil {
		return Spend{}, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.threads[threadID], nil
}

func addSpend(a, b Spend) Spend {
	return Spend{InputTokens: a.InputTokens + b.InputTokens, OutputTokens: a.OutputTokens + b.OutputTokens, CostUSD: a.CostUSD + b.CostUSD}
}

// AddSpend implements SpendLedger.
func (m *memory) AddSpend(ctx context.Context, a SpendAdd) (Spend, error) {
	return m.spend.AddSpend(ctx, a)
}

// DaySpend implements SpendLedger.
func (m *memory) DaySpend(ctx context.Context, principal, day string) (Spend, error) {
	return m.spend.DaySpend(ctx, principal, day)
}

// ThreadSpend implements SpendLedger.
func (m *memory) ThreadSpend(ctx context.Context, threadID string) (Spend, error) {
	return m.spend.ThreadSpend(ctx, threadID)
}

// DeleteThread deletes the thread (memThreads) and its usage; the principal's day keeps
// what the thread spent.
func (m *memory) DeleteThread(ctx context.Context, threadID string) error {
	if err := m.memThreads.DeleteThread(ctx, threadID); err != nil {
		return err
	}
	m.spend.mu.Lock()
	delete(m.spend.threads, threadID)
	m.spend.mu.Unlock()
	return nil
}

// SweepThreads sweeps threads as memThreads does, and drops the usage of the threads it
// swept (the principal's day keeps what they spent), as DeleteThread does.
func (m *memory) SweepThreads(ctx context.Context, cutoff time.Time, limit int) (int64, error) {
	n, err := m.memThreads.SweepThreads(ctx, cutoff, limit)
	if err != nil || n == 0 {
		return n, err
	}
	if err := m.begin(ctx); err != nil {
		return n, nil // swept; the usage rows go with the next sweep
	}
	defer m.mu.Unlock()
	m.spend.mu.Lock()
	defer m.spend.mu.Unlock()
	for id := range m.spend.threads {
		if th := m.thread(id); th == nil || !th.claimed() {
			delete(m.spend.threads, id)
		}
	}
	return n, nil
}
