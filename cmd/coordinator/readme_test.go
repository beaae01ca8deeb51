package main

import (
	"context"
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

// fencedSh finds the ```sh blocks of a Markdown file.
var fencedSh = regexp.MustCompile("(?s)```sh\n(.*?)```")

// readmeAddr is the address the README's examples use (the demo's default listen).
const readmeAddr = "http://127.0.0.1:8080"

// TestREADMECurlExamples runs the README's curl examples, as written, against the demo
// stack (`go run ./cmd/coordinator`), in order: a plain run, an A2A question answered on
// the same thread, an MCP elicitation answered with the payload shape the README shows, an
// approval answered with edited arguments, and a reconnect to the answered run.
func TestREADMECurlExamples(t *testing.T) {
	if _, err := exec.LookPath("curl"); err != nil {
		if os.Getenv("CI") != "" {
			t.Fatal("curl is required for the README examples (CI is set)")
		}
		t.Skip("curl not found; the README's curl examples were not run")
	}
	b, err := os.ReadFile(filepath.Join("..", "..", "README.md"))
	require.NoError(t, err)
	var examples []string
	for _, m := range fencedSh.FindAllStringSubmatch(string(b), -1) {
		if strings.Contains(m[1], readmeAddr+"/agui") {
			examples = append(examples, m[1])
		}
	}
	require.Len(t, examples, 5, "the README's curl examples: a run, a resumed A2A question, a resumed MCP elicitation, an approval, a reconnect")

	t.Setenv("BATON_LISTEN", "127.0.0.1:0")
	url, _, done := startRun(t, nil)
	defer func() {
		require.NoError(t, syscall.Kill(os.Getpid(), syscall.SIGTERM))
		<-done
	}()

	want := []struct {
		name     string
		contains []string
	}{
		{"a run", []string{`"type":"RUN_FINISHED"`, `[COMPLETED]`}},
		{"the travel agent's question, answered on its thread", []string{`"threadId":"trip"`, `"runId":"r2"`, `12-19 May`, `"type":"SUBAGENT_FINISHED"`, `"type":"RUN_FINISHED"`}},
		{"the deploy tool's question, answered with its payload shape", []string{`"threadId":"ship"`, `to staging`, `"type":"RUN_FINISHED"`}},
		{"an approval with edited arguments", []string{`"threadId":"t3"`, `Would delete release v1.2.4 of web`, `"type":"RUN_FINISHED"`}},
		{"a reconnect replays the trip's second run", []string{"id: 4\n", `"type":"RUN_STARTED"`, `12-19 May`, `"type":"RUN_FINISHED"`}},
	}
	for i, ex := range examples {
		t.Run(want[i].name, func(t *testing.T) {
			script := strings.ReplaceAll(ex, readmeAddr, url)
			ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
			defer cancel()
			out, err := exec.CommandContext(ctx, "sh", "-e", "-c", script).CombinedOutput()
			require.NoError(t, err, "%s", out)
			for _, s := range want[i].contains {
				assert.Contains(t, string(out), s)
			}
			assert.NotContains(t, string(out), `"type":"RUN_ERROR"`)
			assert.NotContains(t, string(out), `"outcome":{"type":"interrupt"`, "every question was answered")
		})
	}
}
