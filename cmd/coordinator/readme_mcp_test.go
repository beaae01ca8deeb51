package main

import (
	"context"
	"encoding/json"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// fencedJSON finds the ```json blocks of a Markdown file.
var fencedJSON = regexp.MustCompile("(?s)```json\n(.*?)```")

// mcpDocLines are the lines of docs/mcp-server.md's walk-through that build, start and stop
// the coordinator: the test starts it itself (in this process, with MCP on), so it drops
// exactly these and runs every other line as written.
var mcpDocLines = []string{
	"make build",
	"BATON_MCP_SERVER_ENABLED=true bin/coordinator & BATON=$!",
	"kill $BATON",
}

// TestMCPServerDocExample runs docs/mcp-server.md's curl walk-through against the demo
// stack with the MCP server on: initialize, tools/list, a completed call, a question and
// its answer with resume.
func TestMCPServerDocExample(t *testing.T) {
	if _, err := exec.LookPath("curl"); err != nil {
		if os.Getenv("CI") != "" {
			t.Fatal("curl is required for the docs' MCP example (CI is set)")
		}
		t.Skip("curl not found; docs/mcp-server.md's example was not run")
	}
	b, err := os.ReadFile(filepath.Join("..", "..", "docs", "mcp-server.md"))
	require.NoError(t, err)
	var script string
	for _, m := range fencedSh.FindAllStringSubmatch(string(b), -1) {
		if strings.Contains(m[1], readmeAddr+"/mcp") {
			require.Empty(t, script, "one curl walk-through in docs/mcp-server.md")
			script = m[1]
		}
	}
	require.NotEmpty(t, script, "docs/mcp-server.md has a curl walk-through")
	var kept []string
	dropped := 0
	for _, line := range strings.Split(script, "\n") {
		drop := false
		for _, l := range mcpDocLines {
			drop = drop || line == l
		}
		if drop {
			dropped++
			continue
		}
		kept = append(kept, line)
	}
	require.Equal(t, len(mcpDocLines), dropped, "the walk-through builds, starts and stops the coordinator as %q", mcpDocLines)

	t.Setenv("BATON_LISTEN", "127.0.0.1:0")
	t.Setenv("BATON_MCP_SERVER_ENABLED", "true")
	t.Setenv("BATON_STORE", "sqlite:"+filepath.Join(t.TempDir(), "baton.db"))
	url, _, done := startRun(t, nil)
	defer func() {
		require.NoError(t, syscall.Kill(os.Getpid(), syscall.SIGTERM))
		<-done
	}()

	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, "sh", "-e", "-c", strings.ReplaceAll(strings.Join(kept, "\n"), readmeAddr, url)).CombinedOutput()
	require.NoError(t, err, "%s", out)
	for _, s := range []string{
		`"id":2,"result":{`, `"name":"research"`, `"name":"travel"`, `"name":"ask"`,
		`"id":3,"result":{`, `Report: Go generics`,
		`"id":4,"result":{`, `"status":"input_required"`,
		`"id":5,"result":{`, `Booked: a weekend in Lisbon for 12-19 May`,
	} {
		assert.Contains(t, string(out), s)
	}
	assert.NotContains(t, string(out), `"error":`)
	assert.NotContains(t, string(out), `"isError":true`)
}

// TestMCPServerDocClientConfigs: the MCP client configurations of docs/mcp-server.md are
// valid JSON of the mcpServers shape, the stdio one launches coordinator --mcp-stdio on the
// demo stack, and the HTTP one names the demo's /mcp URL.
func TestMCPServerDocClientConfigs(t *testing.T) {
	t.Parallel()
	b, err := os.ReadFile(filepath.Join("..", "..", "docs", "mcp-server.md"))
	require.NoError(t, err)
	blocks := fencedJSON.FindAllStringSubmatch(string(b), -1)
	require.Len(t, blocks, 2, "a stdio and an HTTP client configuration")
	type server struct {
		Type    string            `json:"type"`
		Command string            `json:"command"`
		Args    []string          `json:"args"`
		URL     string            `json:"url"`
		Headers map[string]string `json:"headers"`
	}
	var cfgs []server
	for _, m := range blocks {
		var c struct {
			MCPServers map[string]server `json:"mcpServers"`
		}
		require.NoError(t, json.Unmarshal([]byte(m[1]), &c), "%s", m[1])
		require.Contains(t, c.MCPServers, "baton")
		cfgs = append(cfgs, c.MCPServers["baton"])
	}
	assert.Equal(t, "coordinator", cfgs[0].Command)
	fl, code, done := parseFlags(cfgs[0].Args, io.Discard, io.Discard)
	require.False(t, done, "the stdio config's arguments are the coordinator's flags (exit code %d)", code)
	assert.True(t, fl.mcpStdio, "the stdio config serves --mcp-stdio")
	assert.Empty(t, fl.configPath, "as written, the stdio config serves the demo stack")
	assert.Equal(t, "http", cfgs[1].Type)
	assert.Equal(t, readmeAddr+"/mcp", cfgs[1].URL)
	assert.True(t, strings.HasPrefix(cfgs[1].Headers["Authorization"], "Bearer "))
}
