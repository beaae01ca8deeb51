package mcpserver

import (
	"log/slog"
	"testing"

	"github.com/baton-dev/baton/agui"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A calling Baton's depth (its _meta baton/depth) makes the run one deeper; any other
// client's call starts at the top; a depth that is not a small whole number is refused.
func TestCallerDepth(t *testing.T) {
	t.Parallel()
	req := func(meta mcp.Meta) *mcp.CallToolRequest {
		return &mcp.CallToolRequest{Params: &mcp.CallToolParamsRaw{Meta: meta}}
	}
	d, err := callerDepth(req(nil))
	require.NoError(t, err)
	assert.Zero(t, d, "a client that is not a Baton")
	d, err = callerDepth(req(mcp.Meta{"baton/depth": float64(3)}))
	require.NoError(t, err)
	assert.Equal(t, 4, d)
	for _, bad := range []any{"3", 2.5, float64(-1), float64(1 << 20), true} {
		_, err := callerDepth(req(mcp.Meta{"baton/depth": bad}))
		assert.Error(t, err, "%v", bad)
	}
}

// A calling Baton's remaining budget (its _meta baton/budget) reaches the run; a client
// that sends none gives none; a malformed one is ignored, never raising a limit.
func TestCallerBudget(t *testing.T) {
	t.Parallel()
	s := &Server{cfg: Config{Logger: slog.New(slog.DiscardHandler)}}
	req := func(meta mcp.Meta) *mcp.CallToolRequest {
		return &mcp.CallToolRequest{Params: &mcp.CallToolParamsRaw{Meta: meta}}
	}
	assert.Nil(t, s.callerBudget(req(nil)), "a client that is not a Baton")
	got := s.callerBudget(req(mcp.Meta{"baton/budget": map[string]any{"tokens": float64(490), "costUsd": 0.25}}))
	require.NotNil(t, got)
	assert.Equal(t, agui.CallerBudget{Tokens: 490, CostUSD: 0.25}, *got)
	for _, bad := range []any{"490", map[string]any{"tokens": -1.0}, map[string]any{"tokens": 2.5}, map[string]any{}} {
		assert.Nil(t, s.callerBudget(req(mcp.Meta{"baton/budget": bad})), "%v", bad)
	}
}
