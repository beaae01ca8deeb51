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
