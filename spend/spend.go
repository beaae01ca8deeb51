// Package spend counts and prices what model calls use, and keeps the principals' daily
// budgets (DESIGN §4 llm.prices and policy.principal_budget, §7 budgets).
//
// Design note: usage is counted from the tokens the provider reports for each call and
// priced with the prices of the model that answered (llm.prices, or the fallback's). A
// principal's day lives in the store (store.SpendLedger): every call adds its usage with
// one atomic increment that returns the day's new total, so replicas share the day and a
// restart keeps it. A threshold (warn_at, the limit) is crossed by exactly one increment:
// the one whose total before was below it and after is not; that increment's caller
// warns, once per budget and threshold, without any state of its own. See
// design/spend.md for what is exact and what may overshoot.
package spend

import (
	"encoding/json"
	"fmt"
	"time"

	"github.com/baton-dev/baton/internal/config"
	"github.com/baton-dev/baton/llm"
)

// Usage is what model calls used: tokens in and out, and their price in USD.
type Usage struct {
	InputTokens  int64   `json:"inputTokens"`
	OutputTokens int64   `json:"outputTokens"`
	CostUSD      float64 `json:"costUsd"`
}

// Tokens is the sum of input and output tokens.
func (u Usage) Tokens() int64 { return u.InputTokens + u.OutputTokens }

// Plus returns u with o added.
func (u Usage) Plus(o Usage) Usage {
	return Usage{InputTokens: u.InputTokens + o.InputTokens, OutputTokens: u.OutputTokens + o.OutputTokens, CostUSD: u.CostUSD + o.CostUSD}
}

// Pricer prices a call's usage with the prices of the model that answered.
type Pricer struct {
	primary string
	prices  map[string]config.Prices
}

// NewPricer returns the pricer of the llm section: llm.prices for llm.model (and for a
// completion that names no model), each fallback's prices for its model.
func NewPricer(l config.LLM) *Pricer {
	p := &Pricer{primary: l.Model, prices: map[string]config.Prices{l.Model: l.Prices}}
	for _, f := range l.Fallback {
		if _, seen := p.prices[f.Model]; !seen {
			p.prices[f.Model] = f.Prices
		}
	}
	return p
}

// Model is the name of the model that answered: model, or the primary's when "".
func (p *Pricer) Model(model string) string {
	if model == "" && p != nil {
		return p.primary
	}
	return model
}

// Price returns the usage of one call answered by model ("" for the primary). A model
// without prices (or a nil Pricer) costs nothing.
func (p *Pricer) Price(model string, u llm.Usage) Usage {
	out := Usage{InputTokens: int64(max(u.InputTokens, 0)), OutputTokens: int64(max(u.OutputTokens, 0))}
	if p != nil {
		out.CostUSD = p.prices[p.Model(model)].Cost(out.InputTokens, out.OutputTokens)
	}
	return out
}

// The budgets and units of a Warning.
const (
	BudgetRun       = "run"
	BudgetPrincipal = "principal"
	UnitTokens      = "tokens"
	UnitUSD         = "usd"
)

// Warning is a budget that passed its warn_at: the JSON of the [BUDGET_WARNING] note and
// of CUSTOM baton.budget_warning (DESIGN §7).
type Warning struct {
	Budget    string  `json:"budget"`
	Unit      string  `json:"unit"`
	Used      float64 `json:"used"`
	Limit     float64 `json:"limit"`
	Remaining float64 `json:"remaining"`
}

// Note is the warning as the model reads it: "[BUDGET_WARNING] {json}".
func (w Warning) Note() string {
	b, _ := json.Marshal(w)
	return "[BUDGET_WARNING] " + string(b)
}

// Crossed returns the warnings and the exhaustion of one budget that an increment from
// before to after crossed: a warning when it passed warnAt×limit (and not the limit
// itself), exceeded when it reached the limit. Zero limits are no budget; a zero warnAt
// never warns.
func Crossed(budget string, before, after Usage, limits Limits, warnAt float64) (warnings []Warning, exceeded *Exceeded) {
	check := func(unit string, b, a, limit float64) {
		if limit <= 0 {
			return
		}
		if unit == UnitUSD {
			// Sums of dollar amounts carry float noise far below a nano-dollar: $0.10
			// eight times is 0.7999…, which has spent 80% of $1.
			b, a = b+usdEpsilon, a+usdEpsilon
		}
		if a >= limit {
			if exceeded == nil {
				exceeded = &Exceeded{Budget: budget, Unit: unit, Used: a, Limit: limit}
			}
			return
		}
		if t := warnAt * limit; warnAt > 0 && b < t && a >= t {
			warnings = append(warnings, Warning{Budget: budget, Unit: unit, Used: round(a, unit), Limit: limit, Remaining: round(limit-a, unit)})
		}
	}
	check(UnitTokens, float64(before.Tokens()), float64(after.Tokens()), float64(limits.Tokens))
	check(UnitUSD, before.CostUSD, after.CostUSD, limits.CostUSD)
	return warnings, exceeded
}

// usdEpsilon is the float noise tolerated in sums of dollars.
const usdEpsilon = 1e-9

// Over reports the first limit u has reached, nil when none.
func Over(budget string, u Usage, limits Limits) *Exceeded {
	_, ex := Crossed(budget, Usage{}, u, limits, 0)
	return ex
}

// round keeps dollars to the micro-dollar (float sums show noise below it).
func round(v float64, unit string) float64 {
	if unit == UnitUSD {
		return float64(int64(v*1e6+0.5)) / 1e6
	}
	return v
}

// Limits are a budget's limits; 0 means none.
type Limits struct {
	Tokens  int64
	CostUSD float64
}

// Set reports whether any limit is set.
func (l Limits) Set() bool { return l.Tokens > 0 || l.CostUSD > 0 }

// Exceeded says which budget a run or principal has spent.
type Exceeded struct {
	Budget string
	Unit   string
	Used   float64
	Limit  float64
	// ResetsAt is when a principal's day ends (zero for a run).
	ResetsAt time.Time
	// Given: the spent limit is the one the run's caller gave it (baton/budget), which
	// only the caller can raise.
	Given bool
}

// Message is the refusal in words, saying what to raise or when the budget resets.
func (e *Exceeded) Message() string {
	amount := fmt.Sprintf("%d tokens", int64(e.Limit))
	if e.Unit == UnitUSD {
		amount = fmt.Sprintf("$%.2f", e.Limit)
	}
	if e.Budget == BudgetPrincipal {
		return fmt.Sprintf("You have used your daily budget of %s; it resets at %s (UTC midnight).", amount, e.ResetsAt.UTC().Format(time.RFC3339))
	}
	if e.Given {
		return fmt.Sprintf("This run has used the budget of %s its caller gave it (baton/budget); only the caller can give it more.", amount)
	}
	return fmt.Sprintf("This run has used its budget of %s; an operator can raise %s.", amount, e.Raise())
}

// Raise names the config key that sets the spent limit: none for a limit the run's caller
// gave it.
func (e *Exceeded) Raise() string {
	switch {
	case e.Given:
		return ""
	case e.Budget == BudgetPrincipal && e.Unit == UnitUSD:
		return "policy.principal_budget.daily_cost_usd"
	case e.Budget == BudgetPrincipal:
		return "policy.principal_budget.daily_tokens"
	case e.Unit == UnitUSD:
		return "policy.budget.max_cost_usd"
	default:
		return "policy.budget.max_tokens"
	}
}

// Day is the UTC day of t, as the ledger keys it ("2006-01-02").
func Day(t time.Time) string { return t.UTC().Format(time.DateOnly) }

// DayEnd is when the UTC day of t ends.
func DayEnd(t time.Time) time.Time {
	y, m, d := t.UTC().Date()
	return time.Date(y, m, d+1, 0, 0, 0, 0, time.UTC)
}

// Call is one model call as metrics record it: who answered, which model it was sent to
// and which answered, and what it used.
type Call struct {
	// Provider is gen_ai.provider.name (openai, anthropic, ...).
	Provider string
	// RequestModel is gen_ai.request.model: the configured model the call was sent to
	// (llm.model, or the fallback the run is on).
	RequestModel string
	// ResponseModel is gen_ai.response.model: the model that answered, whose prices
	// priced it.
	ResponseModel string
	Usage
}
