package spend

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/baton-dev/baton/store"
)

// dayLedger is a ledger of one principal's day.
type dayLedger struct{ day store.Spend }

func (l *dayLedger) AddSpend(context.Context, store.SpendAdd) (store.Spend, error) { return l.day, nil }
func (l *dayLedger) DaySpend(context.Context, string, string) (store.Spend, error) { return l.day, nil }
func (l *dayLedger) ThreadSpend(context.Context, string) (store.Spend, error) {
	return store.Spend{}, nil
}

// TestDayLeft: what is left of a principal's day, in the units with a limit, never below
// zero; nothing without a daily budget.
func TestDayLeft(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	now := func() time.Time { return time.Date(2026, 12, 7, 12, 0, 0, 0, time.UTC) }
	l := &dayLedger{day: store.Spend{InputTokens: 3000, OutputTokens: 500, CostUSD: 0.25}}
	m := NewMeter(MeterConfig{Ledger: l, Daily: Limits{Tokens: 10_000, CostUSD: 1}, Now: now})
	left, err := m.DayLeft(ctx, "alice")
	require.NoError(t, err)
	assert.Equal(t, Limits{Tokens: 6500, CostUSD: 0.75}, left)
	assert.Equal(t, Limits{Tokens: 10_000, CostUSD: 1}, m.Daily())

	l.day = store.Spend{InputTokens: 20_000, CostUSD: 3}
	left, err = m.DayLeft(ctx, "alice")
	require.NoError(t, err)
	assert.Equal(t, Limits{}, left, "a spent day has nothing left, never less")

	tokensOnly := NewMeter(MeterConfig{Ledger: l, Daily: Limits{Tokens: 50_000}, Now: now})
	left, err = tokensOnly.DayLeft(ctx, "alice")
	require.NoError(t, err)
	assert.Equal(t, Limits{Tokens: 30_000}, left, "no cost limit, no cost left")

	for _, none := range []*Meter{nil, NewMeter(MeterConfig{Ledger: l}), NewMeter(MeterConfig{Daily: Limits{Tokens: 5}})} {
		left, err = none.DayLeft(ctx, "alice")
		require.NoError(t, err)
		assert.Equal(t, Limits{}, left)
		assert.Equal(t, Limits{}, none.Daily())
	}
}
