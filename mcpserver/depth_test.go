package mcpserver

import (
	"testing"

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
