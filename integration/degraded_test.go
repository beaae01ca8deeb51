package integration

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"path/filepath"
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
	t.Parallel()
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

// TestMCPStdioEnv: mcp_servers[].env reaches the stdio child (with ${VAR} expanded), the
// child inherits nothing else of the coordinator's environment, and the value never
// appears in the coordinator's log, at debug level.
func TestMCPStdioEnv(t *testing.T) {
	const secret = "env-s3cret-VALUE-0042"
	t.Setenv("OPS_TEST_MCP_SECRET", secret)
	t.Setenv("OPS_TEST_NOT_PASSED", "should-not-reach-the-child")
	bin := buildFaultMCP(t)
	model := fakellm.Start(mcpModel)
	t.Cleanup(model.Close)
	cfg := mcpCoordinatorYAML(model.URL, "30s", mcpServerEntry{Name: "fault", Command: []string{bin, "--log", filepath.Join(t.TempDir(), "fault.log"), "stdio"}})
	cfg = strings.Replace(cfg, "    command: [", "    env: {SERVICE_TOKEN: \"tok ${OPS_TEST_MCP_SECRET}\"}\n    command: [", 1)
	require.Contains(t, cfg, "env: {SERVICE_TOKEN")
	coord, p := startMCPCoordinator(t, cfg)

	sum := sha256.Sum256([]byte("tok " + secret))
	c := runMCPRaw(t, coord, model, "fault__envdigest", `{"text":"SERVICE_TOKEN"}`)
	assert.Equal(t, fmt.Sprintf("[OK]\nlen=%d sha256=%s", len("tok "+secret), hex.EncodeToString(sum[:8])), c.result)
	c = runMCPRaw(t, coord, model, "fault__envdigest", `{"text":"OPS_TEST_NOT_PASSED"}`)
	assert.Equal(t, "[OK]\nunset", c.result, "the child does not inherit the coordinator's environment")

	stopCoordinator(t, p)
	stdout, stderr := p.Logs()
	// startMCPCoordinator runs it with --log-level debug.
	assert.Contains(t, stderr, "mcp server connected")
	assert.NotContains(t, stdout+stderr, secret)
}
