package integration

// The per-run retry budget, loops within one turn and duplicated structured content,
// through the processes where their defects were found: the coordinator
// binary with @modelcontextprotocol/server-filesystem (pinned in peers/) over stdio, the
// model scripted by fakellm.

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/baton-dev/baton/internal/testutil/fakellm"
	"github.com/baton-dev/baton/llm"
)

// fsCallsMarker starts a user message holding a JSON array of calls
// ([{"name":…,"args":{…}}]) that the fake model makes in one turn.
const fsCallsMarker = "fs-calls:"

func fsModel(req fakellm.Request) fakellm.Reply {
	rest, reply, ok := markedTurn(req, fsCallsMarker)
	if !ok {
		return reply
	}
	var calls []struct {
		Name string          `json:"name"`
		Args json.RawMessage `json:"args"`
	}
	if err := json.Unmarshal([]byte(rest), &calls); err != nil {
		return fakellm.Reply{Text: "fake model: bad script: " + err.Error()}
	}
	var out []llm.ToolCall
	for _, c := range calls {
		out = append(out, llm.ToolCall{ID: fmt.Sprintf("call_fs_%d", mcpCallSeq.Add(1)), Name: c.Name, Arguments: string(c.Args)})
	}
	return fakellm.Reply{ToolCalls: out}
}

// fsRun is one run: its tool results (in stream order) and its baton.failure values.
type fsRun struct {
	results  []string
	failures []map[string]any
	last     string
}

// runFS posts a run whose model makes calls in one turn, on a fresh thread.
func runFS(t *testing.T, coord string, calls ...string) fsRun {
	t.Helper()
	text := fsCallsMarker + " [" + strings.Join(calls, ",") + "]"
	body, err := json.Marshal(runInput(newThreadID("fs"), newThreadID("run"), text))
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), aguiClientTimeout)
	defer cancel()
	resp, err := postAGUI(ctx, coord, body)
	require.NoError(t, err)
	defer resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)
	evs, err := readSSE(resp.Body, nil)
	require.NoError(t, err)
	require.NotEmpty(t, evs)
	var r fsRun
	for _, ev := range evs {
		switch ev["type"] {
		case "TOOL_CALL_RESULT":
			c, _ := ev["content"].(string)
			r.results = append(r.results, c)
		case "CUSTOM":
			if ev["name"] == "baton.failure" {
				v, _ := ev["value"].(map[string]any)
				r.failures = append(r.failures, v)
			}
		}
	}
	r.last, _ = evs[len(evs)-1]["type"].(string)
	return r
}

func fsCall(name, args string) string {
	return fmt.Sprintf(`{"name":%q,"args":%s}`, name, args)
}

func TestServerFilesystemThroughCoordinator(t *testing.T) {
	t.Parallel()
	dir := requirePeers(t)
	node, _ := requireNode(t)
	entry := filepath.Join(dir, "node_modules", "@modelcontextprotocol", "server-filesystem", "dist", "index.js")
	_, err := os.Stat(entry)
	require.NoError(t, err, "server-filesystem entry point (npm ci in integration/peers)")
	root, err := filepath.EvalSymlinks(t.TempDir())
	require.NoError(t, err)
	hello := filepath.Join(root, "hello.txt")
	require.NoError(t, os.WriteFile(hello, []byte("hello from the filesystem\nsecond line"), 0o600))

	model := fakellm.Start(fsModel)
	t.Cleanup(model.Close)
	coord, _ := startMCPCoordinator(t, mcpCoordinatorYAML(model.URL, "30s",
		mcpServerEntry{Name: "fs", Command: []string{node, entry, root}}))
	waitStrictReady(t, coord)

	// The text and the structuredContent carry the same file; it is sent once.
	t.Run("structured content once", func(t *testing.T) {
		r := runFS(t, coord, fsCall("fs__read_text_file", fmt.Sprintf(`{"path":%q}`, hello)))
		require.Len(t, r.results, 1)
		assert.True(t, strings.HasPrefix(r.results[0], "[OK]\n"), r.results[0])
		assert.Equal(t, 1, strings.Count(r.results[0], "hello from the filesystem"), r.results[0])
	})

	// Every fresh thread's first failure gets the full budget; with the old
	// process-wide count every third thread's first call was "its retry budget is spent".
	t.Run("retry budget per run", func(t *testing.T) {
		missing := fmt.Sprintf(`{"path":%q}`, filepath.Join(root, "missing.txt"))
		for i := range 6 {
			r := runFS(t, coord, fsCall("fs__read_text_file", missing))
			require.Len(t, r.results, 1)
			sig := retrySignal(t, r.results[0], "tool_error", "fs__read_text_file")
			assert.Equal(t, 2.0, sig["attempts_left"], "thread %d", i)
			require.Len(t, r.failures, 1)
			assert.Contains(t, r.failures[0]["explanation"], "retry 1 of 2", "thread %d", i)
		}
	})

	// Three parallel reads of missing files in one turn are one attempt, not
	// "do not call it again".
	t.Run("parallel failures in one turn", func(t *testing.T) {
		var calls []string
		for _, f := range []string{"a", "b", "c"} {
			calls = append(calls, fsCall("fs__read_text_file", fmt.Sprintf(`{"path":%q}`, filepath.Join(root, f+".txt"))))
		}
		r := runFS(t, coord, calls...)
		require.Len(t, r.results, 3)
		for _, res := range r.results {
			assert.NotContains(t, res, "Do not call it again")
			assert.Equal(t, 2.0, retrySignal(t, res, "tool_error", "fs__read_text_file")["attempts_left"])
		}
		require.Len(t, r.failures, 1, "one attempt: %v", r.failures)
		assert.Equal(t, "RUN_FINISHED", r.last)
	})

	// Three different calls with bad arguments in one turn are no loop.
	t.Run("parallel bad arguments are no loop", func(t *testing.T) {
		r := runFS(t, coord,
			fsCall("fs__read_text_file", `{"path":1}`),
			fsCall("fs__read_text_file", `{"path":true}`),
			fsCall("fs__read_text_file", `{"path":null}`))
		require.Len(t, r.results, 3)
		for _, res := range r.results {
			sig := retrySignal(t, res, "validation_failed", "fs__read_text_file")
			reason, _ := sig["reason"].(string)
			assert.NotContains(t, reason, "reflect", "plain words")
			assert.Contains(t, reason, "path")
		}
		for _, f := range r.failures {
			assert.NotEqual(t, "loop_detected", f["kind"], "%v", r.failures)
		}
		// Nothing the model asked for ran: its text reply is no_progress (a text turn
		// while tool work is pending), nudged once; the reply after the nudge stands.
		require.Len(t, r.failures, 1, "%v", r.failures)
		assert.Equal(t, "no_progress", r.failures[0]["kind"])
		assert.Equal(t, "narrow_scope", r.failures[0]["action"])
		assert.Equal(t, "RUN_FINISHED", r.last)
	})
}

// waitStrictReady waits until GET /readyz?strict=1 answers 200: every MCP server is
// connected (the coordinator listens before slow servers are up).
func waitStrictReady(t *testing.T, coord string) {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for {
		resp, err := http.Get(coord + "/readyz?strict=1")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("the coordinator's MCP servers did not connect within 60s (last: %v)", err)
		}
		time.Sleep(200 * time.Millisecond)
	}
}
