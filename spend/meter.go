package spend

import (
	"context"
	"time"

	"github.com/baton-dev/baton/llm"
	"github.com/baton-dev/baton/store"
)

// Ledger is where principals' days and threads are counted (store.SpendLedger).
type Ledger interface {
	AddSpend(ctx context.Context, a store.SpendAdd) (store.Spend, error)
	DaySpend(ctx context.Context, principal, day string) (store.Spend, error)
	ThreadSpend(ctx context.Context, threadID string) (store.Spend, error)
}

// MeterConfig configures a Meter.
type MeterConfig struct {
	Pricer *Pricer
	// Ledger keeps the days and threads; nil: none are kept (no principal budget, no
	// thread usage).
	Ledger Ledger
	// Daily is policy.principal_budget's limits, WarnAt its warn_at.
	Daily  Limits
	WarnAt float64
	// Now is the clock; default time.Now.
	Now func() time.Time
}

// Meter prices model calls and counts them against the principals' days. A nil *Meter
// prices nothing and keeps nothing.
type Meter struct{ c MeterConfig }

// NewMeter returns the meter of c.
func NewMeter(c MeterConfig) *Meter {
	if c.Now == nil {
		c.Now = time.Now
	}
	return &Meter{c: c}
}

// Price returns one call's usage, priced with the prices of model ("" for the primary).
func (m *Meter) Price(model string, u llm.Usage) Usage {
	if m == nil {
		return (*Pricer)(nil).Price(model, u)
	}
	return m.c.Pricer.Price(model, u)
}

// Model is the name of the model that answered ("" for the primary).
func (m *Meter) Model(model string) string {
	if m == nil {
		return model
	}
	return m.c.Pricer.Model(model)
}

// Daily is policy.principal_budget's limits (zero without a ledger or a meter).
func (m *Meter) Daily() Limits {
	if !m.DailyBudget() {
		return Limits{}
	}
	return m.c.Daily
}

// DailyBudget reports whether a principal budget is set.
func (m *Meter) DailyBudget() bool { return m != nil && m.c.Ledger != nil && m.c.Daily.Set() }

// Record counts a call's usage for the principal's day and the thread. It returns the
// principal warnings the call crossed and, when the day is spent, the exhaustion; the
// first caller to cross a threshold is the one that warns.
func (m *Meter) Record(ctx context.Context, principal, threadID string, u Usage) ([]Warning, *Exceeded, error) {
	if m == nil || m.c.Ledger == nil || (u.Tokens() == 0 && u.CostUSD == 0) {
		return nil, nil, nil
	}
	now := m.c.Now()
	after, err := m.c.Ledger.AddSpend(ctx, store.SpendAdd{Principal: principal, Day: Day(now), ThreadID: threadID,
		Spend: store.Spend{InputTokens: u.InputTokens, OutputTokens: u.OutputTokens, CostUSD: u.CostUSD}})
	if err != nil || !m.c.Daily.Set() {
		return nil, nil, err
	}
	a := fromStore(after)
	before := Usage{InputTokens: a.InputTokens - u.InputTokens, OutputTokens: a.OutputTokens - u.OutputTokens, CostUSD: a.CostUSD - u.CostUSD}
	w, ex := Crossed(BudgetPrincipal, before, a, m.c.Daily, m.c.WarnAt)
	if ex != nil {
		ex.ResetsAt = DayEnd(now)
	}
	return w, ex, nil
}

// DayOver returns the principal's spent daily budget, nil while it lasts (or when none
// is set).
func (m *Meter) DayOver(ctx context.Context, principal string) (*Exceeded, error) {
	if !m.DailyBudget() {
		return nil, nil
	}
	now := m.c.Now()
	day, err := m.c.Ledger.DaySpend(ctx, principal, Day(now))
	if err != nil {
		return nil, err
	}
	ex := Over(BudgetPrincipal, fromStore(day), m.c.Daily)
	if ex != nil {
		ex.ResetsAt = DayEnd(now)
	}
	return ex, nil
}

// DayLeft returns what is left of the principal's daily budget, in the units it has a
// limit in (never below zero); zero Limits when none is set.
func (m *Meter) DayLeft(ctx context.Context, principal string) (Limits, error) {
	if !m.DailyBudget() {
		return Limits{}, nil
	}
	day, err := m.c.Ledger.DaySpend(ctx, principal, Day(m.c.Now()))
	if err != nil {
		return Limits{}, err
	}
	var left Limits
	if l := m.c.Daily.Tokens; l > 0 {
		left.Tokens = max(l-day.InputTokens-day.OutputTokens, 0)
	}
	if l := m.c.Daily.CostUSD; l > 0 {
		left.CostUSD = max(l-day.CostUSD, 0)
	}
	return left, nil
}

// ThreadUsage returns what the thread's model calls used, zero without a ledger.
func (m *Meter) ThreadUsage(ctx context.Context, threadID string) (Usage, error) {
	if m == nil || m.c.Ledger == nil {
		return Usage{}, nil
	}
	s, err := m.c.Ledger.ThreadSpend(ctx, threadID)
	return fromStore(s), err
}

func fromStore(s store.Spend) Usage {
	return Usage{InputTokens: s.InputTokens, OutputTokens: s.OutputTokens, CostUSD: s.CostUSD}
}
