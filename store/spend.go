package store

import (
	"context"
	"fmt"
	"math"
)

// StepModelFallback is the journal kind of a run's switch to a fallback model.
const StepModelFallback = "model_fallback"

// Spend is what model calls used: tokens in and out and their price in USD.
type Spend struct {
	InputTokens  int64
	OutputTokens int64
	CostUSD      float64
}

// SpendAdd is one model call's usage, counted for its principal's UTC day and its thread.
type SpendAdd struct {
	Principal string
	// Day is the UTC day, "2006-01-02".
	Day      string
	ThreadID string
	Spend    Spend
}

// SpendLedger keeps the usage of each principal per UTC day and of each thread, shared by
// every replica of the store (a capability found by type assertion, as RunStarter).
type SpendLedger interface {
	// AddSpend adds a call's usage to its principal's day and its thread in one atomic
	// increment, and returns the day's total after it.
	AddSpend(ctx context.Context, a SpendAdd) (day Spend, err error)
	// DaySpend returns the principal's usage on day (zero when none).
	DaySpend(ctx context.Context, principal, day string) (Spend, error)
	// ThreadSpend returns the thread's usage (zero when none).
	ThreadSpend(ctx context.Context, threadID string) (Spend, error)
}

// errBadSpend is wrapped by the refusal of a malformed SpendAdd.
var errBadSpend = fmt.Errorf("%w: spend", errInvalid)

func checkSpend(a SpendAdd) error {
	s := a.Spend
	switch {
	case a.Day == "" || len(a.Day) > 10:
		return fmt.Errorf("store: add spend: %w: day %q", errBadSpend, a.Day)
	case s.InputTokens < 0 || s.OutputTokens < 0 || s.CostUSD < 0 || math.IsNaN(s.CostUSD) || math.IsInf(s.CostUSD, 0):
		return fmt.Errorf("store: add spend: %w: negative or not a number", errBadSpend)
	}
	return nil
}

// schemaSpend adds the spend ledger (SpendLedger): per principal per UTC day, per thread.
const schemaSpend = `CREATE TABLE spend_days (
		principal     TEXT NOT NULL,
		day           TEXT NOT NULL,   -- UTC, 2006-01-02
		input_tokens  BIGINT NOT NULL DEFAULT 0,
		output_tokens BIGINT NOT NULL DEFAULT 0,
		cost_usd      DOUBLE PRECISION NOT NULL DEFAULT 0,
		PRIMARY KEY (principal, day)
	);
	CREATE TABLE spend_threads (
		thread_id     TEXT PRIMARY KEY,
		input_tokens  BIGINT NOT NULL DEFAULT 0,
		output_tokens BIGINT NOT NULL DEFAULT 0,
		cost_usd      DOUBLE PRECISION NOT NULL DEFAULT 0
	);`
