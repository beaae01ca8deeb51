package spend

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"

	"github.com/baton-dev/baton/internal/config"
	"github.com/baton-dev/baton/llm"
)

func TestPricerUsesTheAnsweringModel(t *testing.T) {
	t.Parallel()
	p := NewPricer(config.LLM{Model: "gpt-4.1-mini", Prices: config.Prices{InputPerMTok: 0.4, OutputPerMTok: 1.6},
		Fallback: []config.FallbackModel{{Provider: "anthropic", Model: "claude-sonnet-4-5", Prices: config.Prices{InputPerMTok: 3, OutputPerMTok: 15}}}})
	u := llm.Usage{InputTokens: 1_000_000, OutputTokens: 500_000}
	assert.InDelta(t, 1.2, p.Price("", u).CostUSD, 1e-12, "the primary's prices for a completion naming no model")
	assert.InDelta(t, 1.2, p.Price("gpt-4.1-mini", u).CostUSD, 1e-12)
	assert.InDelta(t, 10.5, p.Price("claude-sonnet-4-5", u).CostUSD, 1e-12, "the fallback's own prices")
	assert.Zero(t, p.Price("unknown", u).CostUSD, "a model without prices costs nothing")
	assert.Equal(t, int64(1_500_000), p.Price("", u).Tokens())
}

func TestCrossed(t *testing.T) {
	t.Parallel()
	lim := Limits{Tokens: 1000, CostUSD: 2}
	tests := []struct {
		name          string
		before, after Usage
		warn          []Warning
		exceeded      string
	}{
		{"below", Usage{InputTokens: 100}, Usage{InputTokens: 700}, nil, ""},
		{"passes warn_at", Usage{InputTokens: 700}, Usage{InputTokens: 850}, []Warning{{Budget: "run", Unit: "tokens", Used: 850, Limit: 1000, Remaining: 150}}, ""},
		{"already past warn_at", Usage{InputTokens: 850}, Usage{InputTokens: 900}, nil, ""},
		{"reaches the limit", Usage{InputTokens: 900}, Usage{InputTokens: 1000}, nil, "tokens"},
		{"cost passes warn_at", Usage{CostUSD: 1}, Usage{CostUSD: 1.7}, []Warning{{Budget: "run", Unit: "usd", Used: 1.7, Limit: 2, Remaining: 0.3}}, ""},
		{"cost reaches the limit", Usage{CostUSD: 1.9}, Usage{CostUSD: 2.1}, nil, "usd"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			w, ex := Crossed(BudgetRun, tt.before, tt.after, lim, 0.8)
			assert.Equal(t, tt.warn, w)
			if tt.exceeded == "" {
				assert.Nil(t, ex)
			} else if assert.NotNil(t, ex) {
				assert.Equal(t, tt.exceeded, ex.Unit)
			}
		})
	}
}

func TestWarningNoteAndExceeded(t *testing.T) {
	t.Parallel()
	w := Warning{Budget: "principal", Unit: "usd", Used: 4, Limit: 5, Remaining: 1}
	assert.Equal(t, `[BUDGET_WARNING] {"budget":"principal","unit":"usd","used":4,"limit":5,"remaining":1}`, w.Note())
	now := time.Date(2026, 12, 7, 15, 0, 0, 0, time.UTC)
	ex := &Exceeded{Budget: BudgetPrincipal, Unit: UnitUSD, Limit: 5, ResetsAt: DayEnd(now)}
	assert.Equal(t, "You have used your daily budget of $5.00; it resets at 2026-12-08T00:00:00Z (UTC midnight).", ex.Message())
	assert.Equal(t, "policy.principal_budget.daily_cost_usd", ex.Raise())
	assert.Equal(t, "2026-12-07", Day(now))
}

// TestGivenBudgetNamesTheCaller: a run stopped on the budget its caller gave it says so,
// and names no config key of this Baton (its operator cannot raise the caller's budget).
func TestGivenBudgetNamesTheCaller(t *testing.T) {
	t.Parallel()
	own := &Exceeded{Budget: BudgetRun, Unit: UnitTokens, Limit: 500}
	assert.Equal(t, "This run has used its budget of 500 tokens; an operator can raise policy.budget.max_tokens.", own.Message())
	given := &Exceeded{Budget: BudgetRun, Unit: UnitTokens, Limit: 490, Given: true}
	assert.Equal(t, "This run has used the budget of 490 tokens its caller gave it (baton/budget); only the caller can give it more.", given.Message())
	assert.Empty(t, given.Raise())
}
