package mcpserver

import (
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/baton-dev/baton/agui"
)

// A budget warning of the run reaches the MCP client as a progress message carrying the
// [BUDGET_WARNING] note; a malformed one (not an object) makes none.
func TestBudgetWarningIsProgress(t *testing.T) {
	t.Parallel()
	r := newRelay()
	msg := r.event(&agui.Custom{Name: "baton.budget_warning", Value: map[string]any{"budget": "principal", "unit": "tokens", "used": 80, "limit": 100, "remaining": 20}})
	assert.Equal(t, `[BUDGET_WARNING] {"budget":"principal","limit":100,"remaining":20,"unit":"tokens","used":80}`, msg)
	assert.Empty(t, r.event(&agui.Custom{Name: "baton.budget_warning", Value: "not an object"}))
	assert.Empty(t, r.event(&agui.Custom{Name: "something.else", Value: map[string]any{"a": 1}}))
}

// TestUsageInResultMeta: the run's last baton.usage (cumulative) reaches the tool result's
// _meta as baton/usage, for a calling Baton to count; a run that reported none adds none,
// and a malformed report is not relayed.
func TestUsageInResultMeta(t *testing.T) {
	t.Parallel()
	r := newRelay()
	r.event(&agui.Custom{Name: "baton.usage", Value: map[string]any{"inputTokens": 10, "outputTokens": 1, "costUsd": 0.1}})
	r.event(&agui.Custom{Name: "baton.usage", Value: map[string]any{"inputTokens": 40, "outputTokens": 5, "costUsd": 0.5}})
	r.event(&agui.Custom{Name: "baton.usage", Value: "not an object"})
	r.event(&agui.RunFinished{})
	res := r.outcome().withUsage(r.outcome().result(tool{name: "ask"}))
	assert.Equal(t, map[string]any{"inputTokens": 40.0, "outputTokens": 5.0, "costUsd": 0.5}, res.Meta["baton/usage"])

	none := newRelay()
	none.event(&agui.RunFinished{})
	assert.NotContains(t, none.outcome().withUsage(none.outcome().result(tool{name: "ask"})).Meta, "baton/usage")
}
