package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
)

// sqlSpend is a SQL store's spend ledger (SpendLedger). A call's increment is one upsert
// per row: the database serialises increments of one row, so replicas adding to a
// principal's day at once each see the total their own increment made.
type sqlSpend struct {
	*sqlConn
	d *dialect // the SQL it writes
}

func (s sqlSpend) AddSpend(ctx context.Context, a SpendAdd) (Spend, error) {
	if err := checkSpend(a); err != nil {
		return Spend{}, err
	}
	if err := s.check(); err != nil {
		return Spend{}, err
	}
	var day Spend
	err := s.tx(ctx, "", func(ctx context.Context, tx *sql.Tx) error {
		u := a.Spend
		if err := s.txQueryRow(ctx, tx, s.d.q(`INSERT INTO spend_days (principal, day, input_tokens, output_tokens, cost_usd)
			VALUES ($1, $2, $3, $4, $5)
			ON CONFLICT (principal, day) DO UPDATE SET input_tokens = spend_days.input_tokens + excluded.input_tokens,
				output_tokens = spend_days.output_tokens + excluded.output_tokens, cost_usd = spend_days.cost_usd + excluded.cost_usd
			RETURNING input_tokens, output_tokens, cost_usd`),
			a.Principal, a.Day, u.InputTokens, u.OutputTokens, u.CostUSD).Scan(&day.InputTokens, &day.OutputTokens, &day.CostUSD); err != nil {
			return err
		}
		if a.ThreadID == "" {
			return nil
		}
		_, err := s.txExec(ctx, tx, s.d.q(`INSERT INTO spend_threads (thread_id, input_tokens, output_tokens, cost_usd)
			VALUES ($1, $2, $3, $4)
			ON CONFLICT (thread_id) DO UPDATE SET input_tokens = spend_threads.input_tokens + excluded.input_tokens,
				output_tokens = spend_threads.output_tokens + excluded.output_tokens, cost_usd = spend_threads.cost_usd + excluded.cost_usd`),
			a.ThreadID, u.InputTokens, u.OutputTokens, u.CostUSD)
		return err
	})
	if err != nil {
		return Spend{}, fmt.Errorf("store: add spend of %q: %w", a.ThreadID, err)
	}
	return day, nil
}

func (s sqlSpend) DaySpend(ctx context.Context, principal, day string) (Spend, error) {
	return s.one(ctx, `SELECT input_tokens, output_tokens, cost_usd FROM spend_days WHERE principal = $1 AND day = $2`, principal, day)
}

func (s sqlSpend) ThreadSpend(ctx context.Context, threadID string) (Spend, error) {
	return s.one(ctx, `SELECT input_tokens, output_tokens, cost_usd FROM spend_threads WHERE thread_id = $1`, threadID)
}

func (s sqlSpend) one(ctx context.Context, q string, args ...any) (Spend, error) {
	if err := s.check(); err != nil {
		return Spend{}, err
	}
	var out Spend
	err := s.queryRow(ctx, s.d.q(q), args...).Scan(&out.InputTokens, &out.OutputTokens, &out.CostUSD)
	if errors.Is(err, sql.ErrNoRows) {
		return Spend{}, nil
	}
	if err != nil {
		return Spend{}, fmt.Errorf("store: read spend: %w", err)
	}
	return out, nil
}
