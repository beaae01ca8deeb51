package integration

import (
	"context"
	"os/exec"
	"path/filepath"
	"regexp"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
)

// mcpServerScenarios are the server scenarios of @modelcontextprotocol/conformance 0.1.16
// that apply to Baton's /mcp. The others need the suite's reference server features, which
// Baton does not have and the contract does not ask for:
//
//   - tools-call-simple-text, -image, -audio, -embedded-resource, -mixed-content,
//     -with-logging, -error, -with-progress, -sampling, -elicitation: they call the reference
//     tools (test_simple_text, test_error_handling, …) by name;
//   - json-schema-2020-12, elicitation-sep1034-defaults, elicitation-sep1330-enums: they
//     call reference tools too;
//   - completion-complete, resources-*, prompts-*: Baton serves no completions, resources
//     or prompts;
//   - server-sse-polling: it checks SHOULDs (a priming event, a retry field) that go-sdk's
//     handler does not send; it reports warnings, no failure.
var mcpServerScenarios = []string{
	"server-initialize", "ping", "tools-list", "logging-set-level",
	"dns-rebinding-protection", "server-sse-multiple-streams",
}

var conformancePassedRE = regexp.MustCompile(`Passed: (\d+)/(\d+), (\d+) failed`)

// TestMCPServerConformance runs the applicable server scenarios of the MCP conformance suite
// (Node 22, as the client scenarios run) against Baton's /mcp.
func TestMCPServerConformance(t *testing.T) {
	t.Parallel()
	node := requireNode22(t)
	dir := requirePeers(t)
	url, _, _ := startMCPBaton(t)
	for _, sc := range mcpServerScenarios {
		t.Run(sc, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			cmd := exec.CommandContext(ctx, node, filepath.Join(dir, "node_modules", "@modelcontextprotocol", "conformance", "dist", "index.js"),
				"server", "--url", url, "--scenario", sc)
			cmd.Dir = t.TempDir() // its results directory
			out, err := cmd.CombinedOutput()
			m := conformancePassedRE.FindStringSubmatch(string(out))
			if !assert.NotNil(t, m, "no summary line (err %v):\n%s", err, out) {
				return
			}
			assert.Equal(t, "0", m[3], "failed checks:\n%s", out)
			assert.Equal(t, m[2], m[1], "%s", out)
			assert.NotEqual(t, "0", m[2], "the scenario ran no check:\n%s", out)
		})
	}
}
