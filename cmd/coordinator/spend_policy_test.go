package main

import (
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/baton-dev/baton/failure"
	"github.com/baton-dev/baton/internal/config"
)

// TestGuardPolicyBudget: the engine gets the whole run budget of policy.budget: the cost
// limit and warn_at too, not only the token and tool-call limits.
func TestGuardPolicyBudget(t *testing.T) {
	cfg := &config.Config{Policy: config.Policy{Budget: config.Budget{MaxToolCalls: 7, MaxTokens: 5000, MaxCostUSD: 0.5, WarnAt: 0.9}}}
	assert.Equal(t, failure.Budget{MaxToolCalls: 7, MaxTokens: 5000, MaxCostUSD: 0.5, WarnAt: 0.9}, guardPolicy(cfg).Budget)
}
