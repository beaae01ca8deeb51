package integration

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/baton-dev/baton/internal/testutil/fakellm"
)

// TestDegradedStartMCP: an MCP server that never answers initialize does not hold the
// coordinator's listener (it serves while the server's first 30 s attempt still runs),
// /readyz names it, and a call of its tools answers [UNREACHABLE], not unknown_action.
func TestDegradedStartMCP(t *testing.T) {
	model := fakellm.Start(mcpModel)
	t.Cleanup(model.Close)
	coord, _ := startMCPCoordinator(t, mcpCoordinatorYAML(model.URL, "30s",
		mcpServerEntry{Name: "mute", Command: []string{"sleep", "300"}}))

	resp, err := http.Get(coord + "/healthz")
	require.NoError(t, err)
	resp.Body.Close()
	assert.Equal(t, http.StatusOK, resp.StatusCode)

	resp, err = http.Get(coord + "/readyz")
	require.NoError(t, err)
	var ready struct {
		Status string
		Checks struct {
			Store struct{ Status string }
			MCP   map[string]struct{ Status, Error string }
		}
	}
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&ready))
	resp.Body.Close()
	assert.Equal(t, http.StatusOK, resp.StatusCode)
	assert.Equal(t, "degraded", ready.Status)
	assert.Equal(t, "up", ready.Checks.Store.Status)
	assert.Equal(t, "down", ready.Checks.MCP["mute"].Status)
	assert.Equal(t, "connecting", ready.Checks.MCP["mute"].Error, "the listener opened during the server's first attempt")

	c := runMCPRaw(t, coord, model, "mute__anything", `{}`)
	assert.True(t, strings.HasPrefix(c.result, "[UNREACHABLE]\n"), "result %q, want tag [UNREACHABLE]", c.result)
	assert.Contains(t, c.result, `"mute"`)
}
