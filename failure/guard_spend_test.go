package failure

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/baton-dev/baton/spend"
)

// TestGuardCostBudget: the run's cost budget warns once at warn_at and stops at the limit,
// naming the key to raise.
func TestGuardCostBudget(t *testing.T) {
	t.Parallel()
	g := NewGuard(GuardConfig{Policy: GuardPolicy{Budget: Budget{MaxCostUSD: 1, WarnAt: 0.8}}, Tools: []string{"research"}})
	var warnings []spend.Warning
	var stop *Failure
	calls := 0
	for stop == nil {
		calls++
		w, f := g.AddUsage(spend.Usage{InputTokens: 100, OutputTokens: 10, CostUSD: 0.1})
		warnings = append(warnings, w...)
		stop = f
	}
	assert.Equal(t, 10, calls, "ten calls of $0.10 spend $1")
	require.Len(t, warnings, 1, "one warning, at 80%")
	assert.Equal(t, spend.Warning{Budget: "run", Unit: "usd", Used: 0.8, Limit: 1, Remaining: 0.2}, warnings[0])
	assert.Equal(t, KindPolicyViolation, stop.Kind)
	assert.Contains(t, stop.Explanation, "policy.budget.max_cost_usd")
	assert.NotNil(t, g.AddTokens(0), "the next model call is refused")
	sig, ok := g.CheckSignal("research")
	require.False(t, ok)
	assert.Equal(t, "budget_exceeded", sig.Code)
	assert.Equal(t, "policy.budget.max_cost_usd", sig.Resolution.Raise)
	assert.InDelta(t, 1.0, g.Used().CostUSD, 1e-9)
	assert.Equal(t, int64(1000), g.Used().InputTokens)
}
