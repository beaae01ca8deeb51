package integration

// End-to-end tests of MCP tools through the coordinator: the coordinator binary
// with the real openai provider (scripted by fakellm) calling MCP tools of
// @modelcontextprotocol/server-everything (pinned in peers/) over stdio and streamable HTTP,
// and of testdata/faultmcp, a server that crashes or hangs on purpose. Streams are consumed
// by the official AG-UI client 1.0.0; every assertion is on the exact tag of the
// TOOL_CALL_RESULT, which must also be exactly what the model was given.
//
// Design note: the fake model is scripted from the user's text, "mcp-call: <tool> <json
// arguments>", so that one coordinator serves every subtest: the model calls <tool> with the
// arguments, and answers "done" once a tool result follows that user message. The marker
// keeps the script from mistaking a message the coordinator might add for the user's
// request. (The A2A tests' script in coordinator_harness_test.go wraps arguments in
// {"prompt": …}, which MCP tools do not take.)

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/baton-dev/baton/internal/testutil/fakellm"
	"github.com/baton-dev/baton/llm"
)

const (
	// mcpCallMarker starts the user messages of the MCP script.
	mcpCallMarker = "mcp-call:"
	// coordinatorExitBound bounds the coordinator's exit after SIGTERM: its shutdown grace
	// (3 s in mcpCoordinatorYAML) plus the HTTP shutdown (5 s) plus slack. Exceeding it
	// means something hangs.
	coordinatorExitBound = 20 * time.Second
)

var mcpCallSeq atomic.Int64

// markedTurn finds the last user message that starts with marker and returns the rest of
// it, to be turned into tool calls. When there is none, or a tool result already answers
// it, ok is false and reply is the model's text answer.
func markedTurn(req fakellm.Request, marker string) (rest string, reply fakellm.Reply, ok bool) {
	at := -1
	for i, m := range req.Messages {
		if m.Role == "user" && strings.HasPrefix(m.Content, marker) {
			at = i
		}
	}
	if at < 0 {
		return "", fakellm.Reply{Text: "fake model: no " + marker + " message"}, false
	}
	for _, m := range req.Messages[at+1:] {
		if m.Role == "tool" {
			return "", fakellm.Reply{Text: modelDoneText}, false
		}
	}
	return strings.TrimSpace(strings.TrimPrefix(req.Messages[at].Content, marker)), fakellm.Reply{}, true
}

// mcpModel is the fake model's script for the MCP tests (see the file comment).
func mcpModel(req fakellm.Request) fakellm.Reply {
	rest, reply, ok := markedTurn(req, mcpCallMarker)
	if !ok {
		return reply
	}
	tool, args, _ := strings.Cut(rest, " ")
	if args = strings.TrimSpace(args); args == "" {
		args = "{}"
	}
	return fakellm.Reply{ToolCalls: []llm.ToolCall{{
		ID: fmt.Sprintf("call_mcp_%d", mcpCallSeq.Add(1)), Name: tool, Arguments: args}}}
}

// mcpServerEntry is one mcp_servers[] item of a coordinator config.
type mcpServerEntry struct {
	Name    string
	Command []string
	URL     string
}

// mcpCoordinatorYAML renders a coordinator config for the openai provider at llmURL with the
// given MCP servers, no agents, the tool timeout toolTimeout and an in-memory store.
func mcpCoordinatorYAML(llmURL, toolTimeout string, servers ...mcpServerEntry) string {
	return testConfig{LLMURL: llmURL, MCP: servers, ToolTimeout: toolTimeout}.yaml()
}

// startMCPCoordinator starts the coordinator binary like startCoordinator does, but also
// returns its process, so that a test can stop it itself and see how it exits. In Cleanup
// the process is stopped (if the test did not) and must have exited with code 0.
func startMCPCoordinator(t *testing.T, cfg string) (baseURL string, p *proc) {
	t.Helper()
	bin, ok := buildBinaries(t)["coordinator"]
	require.True(t, ok, "cmd/coordinator has no Go files to build")
	var err error
	for attempt := 0; attempt < 3; attempt++ { // freePort can race with another listener
		path := filepath.Join(t.TempDir(), "baton.yaml")
		text := "listen: 127.0.0.1:" + strconv.Itoa(freePort(t)) + "\n" + cfg
		require.NoError(t, os.WriteFile(path, []byte(text), 0o600))
		p, err = startProcErr(t, "coordinator", []string{bin, "--config", path, "--log-level", "debug"},
			[]string{llmKeyEnv + "=fake-key"}, readyOnLine(`Baton coordinator listening on (http://\S+)`))
		if err == nil {
			t.Cleanup(func() {
				if code := p.Stop(); code != 0 {
					t.Errorf("coordinator exited with code %d, want 0", code)
				}
			})
			return p.Match[1], p
		}
	}
	t.Fatalf("starting the coordinator: %v\nconfig:\n%s", err, cfg)
	return "", nil
}

// stopCoordinator sends SIGTERM to the coordinator alone (not its process group, so that
// the coordinator itself must stop the stdio servers it started) and asserts that it exits
// with code 0 within coordinatorExitBound.
func stopCoordinator(t *testing.T, p *proc) {
	t.Helper()
	require.NoError(t, syscall.Kill(p.cmd.Process.Pid, syscall.SIGTERM))
	timer := time.NewTimer(coordinatorExitBound)
	defer timer.Stop()
	select {
	case <-p.Done():
	case <-timer.C:
		t.Fatalf("the coordinator did not exit within %v of SIGTERM", coordinatorExitBound)
	}
	assert.Equal(t, 0, p.Stop(), "the coordinator's exit code after SIGTERM")
}

// everythingEntry returns node and server-everything's entry point (pinned in peers/).
func everythingEntry(t *testing.T) (node, entry string) {
	t.Helper()
	dir := requirePeers(t)
	node, _ = requireNode(t)
	entry = filepath.Join(dir, "node_modules", "@modelcontextprotocol", "server-everything", "dist", "index.js")
	_, err := os.Stat(entry)
	require.NoError(t, err, "server-everything entry point")
	return node, entry
}

// startEverythingHTTP runs server-everything over streamable HTTP on port (0: a free one)
// and returns its process and MCP endpoint.
func startEverythingHTTP(t *testing.T, port int) (*proc, string) {
	t.Helper()
	node, entry := everythingEntry(t)
	var err error
	for attempt := 0; attempt < 3; attempt++ {
		pt := port
		if pt == 0 {
			pt = freePort(t)
		}
		var p *proc
		p, err = startProcErr(t, "everything-http", []string{node, entry, "streamableHttp"},
			[]string{"PORT=" + strconv.Itoa(pt)}, readyOnLine(`MCP Streamable HTTP Server listening on port \d+`))
		if err == nil {
			return p, fmt.Sprintf("http://127.0.0.1:%d/mcp", pt)
		}
		if port != 0 {
			break // the caller chose the port: retrying cannot help
		}
	}
	t.Fatal(err)
	return nil, ""
}

var faultBuild struct {
	sync.Once
	path string
	err  error
}

// buildFaultMCP builds testdata/faultmcp once, next to the other binaries.
func buildFaultMCP(t *testing.T) string {
	t.Helper()
	buildBinaries(t) // creates binDir, which TestMain removes
	faultBuild.Do(func() {
		faultBuild.path = filepath.Join(binDir, "faultmcp")
		cmd := exec.Command("go", "build", "-o", faultBuild.path, "./integration/testdata/faultmcp")
		cmd.Dir = repoRoot(t)
		if out, err := cmd.CombinedOutput(); err != nil {
			faultBuild.err = fmt.Errorf("go build ./integration/testdata/faultmcp: %w\n%s", err, out)
		}
	})
	require.NoError(t, faultBuild.err)
	return faultBuild.path
}

// faultLog reads the event log of a faultmcp server: one line per event.
func faultLog(t *testing.T, path string) []string {
	t.Helper()
	b, err := os.ReadFile(path)
	if os.IsNotExist(err) {
		return nil
	}
	require.NoError(t, err)
	return strings.Split(strings.TrimRight(string(b), "\n"), "\n")
}

// countLines returns how many lines equal line (or start with it followed by a space).
func countLines(lines []string, line string) int {
	n := 0
	for _, l := range lines {
		if l == line || strings.HasPrefix(l, line+" ") {
			n++
		}
	}
	return n
}

// startedPIDs returns the process ids of the "start <pid>" lines of a faultmcp log.
func startedPIDs(t *testing.T, lines []string) []int {
	t.Helper()
	var pids []int
	for _, l := range lines {
		if s, ok := strings.CutPrefix(l, "start "); ok {
			pid, err := strconv.Atoi(s)
			require.NoError(t, err, "log line %q", l)
			pids = append(pids, pid)
		}
	}
	return pids
}

// mcpCall is one run of "mcp-call: <tool> <args>" through the official client.
type mcpCall struct {
	run aguiResult
	// id is the tool call id, result the content of its only TOOL_CALL_RESULT.
	id, result string
}

// runMCP runs a user message that makes the model call tool with args, through the official
// client of lane, and asserts what every such run must satisfy: a clean stream that ends
// with a terminal event (assertCleanClientRun), and what checkMCPRun checks.
func runMCP(t *testing.T, lane, coord string, model *fakellm.Server, tool, args string) mcpCall {
	t.Helper()
	r := runAGUIClient(t, lane, coord+"/agui", userJob("mcp-"+lane, mcpCallMarker+" "+tool+" "+args))
	assertCleanClientRun(t, r)
	c := checkMCPRun(t, r.Events, model, tool, args)
	c.run = r
	return c
}

// runMCPRaw is runMCP over a plain HTTP request instead of the official client, for a run
// that must start right after a change on the MCP side (the client's Node start-up takes a
// while). The stream must start with RUN_STARTED and end with RUN_FINISHED.
func runMCPRaw(t *testing.T, coord string, model *fakellm.Server, tool, args string) mcpCall {
	t.Helper()
	body, err := json.Marshal(runInput(newThreadID("mcp-raw"), newThreadID("run"), mcpCallMarker+" "+tool+" "+args))
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), aguiClientTimeout)
	defer cancel()
	resp, err := postAGUI(ctx, coord, body)
	require.NoError(t, err)
	defer resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)
	evs, err := readSSE(resp.Body, nil)
	require.NoError(t, err, "reading the stream (a hang ends at the %v deadline)", aguiClientTimeout)
	require.NotEmpty(t, evs, "no events")
	assert.Equal(t, "RUN_STARTED", evs[0]["type"], "first event")
	assert.Equal(t, "RUN_FINISHED", evs[len(evs)-1]["type"], "terminal event; events: %v", eventTypes(evs))
	c := checkMCPRun(t, evs, model, tool, args)
	c.run = aguiResult{Events: evs}
	return c
}

// checkMCPRun asserts that the run's events hold one tool call of tool with args, exactly
// one TOOL_CALL_RESULT whose content is exactly what the model was given, and the model's
// final "done"; it returns the call.
func checkMCPRun(t *testing.T, evs []map[string]any, model *fakellm.Server, tool, args string) mcpCall {
	t.Helper()
	ds := delegationsOf(t, evs)
	require.Len(t, ds, 1, "tool calls; events: %v", eventTypes(evs))
	d := ds[0]
	assert.Equal(t, tool, d.Tool, "tool name")
	var wantArgs map[string]any
	require.NoError(t, json.Unmarshal([]byte(args), &wantArgs))
	assert.Equal(t, wantArgs, d.Args, "tool call arguments in the stream")
	require.Len(t, d.Results, 1, "TOOL_CALL_RESULT events")
	assert.Equal(t, toolMessagesSeen(model)[d.CallID], d.Results[0], "TOOL_CALL_RESULT content must be exactly what the model got")
	assert.Equal(t, modelDoneText, plainText(evs), "the model's own text")
	return mcpCall{id: d.CallID, result: d.Results[0]}
}

// retrySignal asserts that res is "[RETRY:<code>] {json}" on one line, with the fields every
// signal has (DESIGN §7), and returns the JSON object.
func retrySignal(t *testing.T, res, code, requested string) map[string]any {
	t.Helper()
	prefix := "[RETRY:" + code + "] "
	require.True(t, strings.HasPrefix(res, prefix), "result %q, want tag %s", res, strings.TrimSpace(prefix))
	assert.NotContains(t, res, "\n", "a retry signal is one line")
	var sig map[string]any
	require.NoError(t, json.Unmarshal([]byte(res[len(prefix):]), &sig), "the JSON after the tag")
	assert.Equal(t, code, sig["error"], "error")
	assert.Equal(t, requested, sig["requested"], "requested")
	msg, _ := sig["message"].(string)
	assert.NotEmpty(t, msg, "message")
	assert.IsType(t, []any{}, sig["valid_next_actions"], "valid_next_actions")
	return sig
}

// names returns the strings of a JSON array.
func names(v any) []string {
	var out []string
	arr, _ := v.([]any)
	for _, x := range arr {
		if s, ok := x.(string); ok {
			out = append(out, s)
		}
	}
	return out
}

// TestMCPThroughCoordinatorEverything: server-everything over stdio and over HTTP, through
// the coordinator: echo, get-sum with bad arguments, an unknown tool, and a long-running
// operation whose progress reaches the AG-UI stream.
func TestMCPThroughCoordinatorEverything(t *testing.T) {
	t.Parallel()
	requirePeers(t)
	transports := []struct {
		name   string
		server func(t *testing.T) mcpServerEntry
	}{
		{"stdio", func(t *testing.T) mcpServerEntry {
			node, entry := everythingEntry(t)
			return mcpServerEntry{Name: "everything", Command: []string{node, entry, "stdio"}}
		}},
		{"http", func(t *testing.T) mcpServerEntry {
			_, url := startEverythingHTTP(t, 0)
			return mcpServerEntry{Name: "everything", URL: url}
		}},
	}
	for _, tr := range transports {
		t.Run(tr.name, func(t *testing.T) {
			t.Parallel() // a server, a model and a coordinator of its own
			model := fakellm.Start(mcpModel)
			t.Cleanup(model.Close)
			coord, _ := startMCPCoordinator(t, mcpCoordinatorYAML(model.URL, "30s", tr.server(t)))
			waitMCPSettled(t, coord)

			for _, lane := range lanes {
				t.Run(lane, func(t *testing.T) {
					t.Run("echo", func(t *testing.T) {
						c := runMCP(t, lane, coord, model, "everything__echo", `{"message":"hello through baton"}`)
						assert.Equal(t, "[OK]\nEcho: hello through baton", c.result)
					})
					t.Run("get-sum bad arguments", func(t *testing.T) {
						c := runMCP(t, lane, coord, model, "everything__get-sum", `{"a":"x","b":1}`)
						sig := retrySignal(t, c.result, "validation_failed", "everything__get-sum")
						reason, _ := sig["reason"].(string)
						assert.NotEmpty(t, reason, "reason")
						assert.Equal(t, map[string]any{"field": "a", "got": "x"}, sig["details"], "details")
						assert.Contains(t, names(sig["valid_next_actions"]), "everything__get-sum")
					})
					t.Run("unknown tool", func(t *testing.T) {
						c := runMCP(t, lane, coord, model, "everything__nope", `{}`)
						sig := retrySignal(t, c.result, "unknown_action", "everything__nope")
						known := names(sig["known_actions"])
						assert.Contains(t, known, "everything__echo")
						assert.Contains(t, known, "everything__get-sum")
						assert.LessOrEqual(t, len(known), 10, "the closest names only (DESIGN §7)")
						assert.LessOrEqual(t, len(names(sig["valid_next_actions"])), 8)
						assert.NotContains(t, known, "everything__nope")
					})
					t.Run("progress", func(t *testing.T) {
						c := runMCP(t, lane, coord, model, "everything__trigger-long-running-operation", `{"duration":2,"steps":4}`)
						assert.Equal(t, "[OK]\nLong running operation completed. Duration: 2 seconds, Steps: 4.", c.result)
						assertProgress(t, c, 4)
					})
				})
			}
		})
	}
}

// assertProgress checks the ACTIVITY_SNAPSHOT progress events of call c (DESIGN §8): one per
// step 1..steps, each naming the tool call and the total; the steps before the last are
// sent well before the result, so they must precede the TOOL_CALL_RESULT.
func assertProgress(t *testing.T, c mcpCall, steps int) {
	t.Helper()
	resultAt := slices.IndexFunc(c.run.Events, func(e map[string]any) bool { return e["type"] == "TOOL_CALL_RESULT" })
	require.GreaterOrEqual(t, resultAt, 0)
	seen := map[float64]int{} // progress value → index of its event
	for i, e := range c.run.Events {
		if e["type"] != "ACTIVITY_SNAPSHOT" {
			continue
		}
		assert.Equal(t, "progress", e["activityType"], "activityType: %v", e)
		content, _ := e["content"].(map[string]any)
		require.NotNil(t, content, "ACTIVITY_SNAPSHOT without content: %v", e)
		assert.Equal(t, c.id, content["toolCallId"], "content.toolCallId")
		assert.Equal(t, float64(steps), content["total"], "content.total")
		p, _ := content["progress"].(float64)
		_, dup := seen[p]
		assert.False(t, dup, "progress %v reported twice", p)
		seen[p] = i
	}
	want := make([]float64, 0, steps)
	for i := 1; i <= steps; i++ {
		want = append(want, float64(i))
	}
	got := make([]float64, 0, len(seen))
	for p := range seen {
		got = append(got, p)
	}
	slices.Sort(got)
	assert.Equal(t, want, got, "progress values in the stream; events: %v", eventTypes(c.run.Events))
	for i := 1; i < steps; i++ {
		if at, ok := seen[float64(i)]; ok {
			assert.Less(t, at, resultAt, "progress %d must come before the TOOL_CALL_RESULT", i)
		}
	}
}

// TestMCPThroughCoordinatorFaults: MCP servers that crash, hang or go away, behind the
// coordinator. Every run must end with a terminal event (runMCP), the model must get the
// exact tag, and the coordinator must still exit cleanly (code 0, within a bound) on SIGTERM
// afterwards, having stopped the stdio servers it started.
func TestMCPThroughCoordinatorFaults(t *testing.T) {
	t.Parallel()
	requirePeers(t)

	t.Run("stdio server exits mid-call", func(t *testing.T) {
		bin := buildFaultMCP(t)
		logPath := filepath.Join(t.TempDir(), "fault.log")
		model := fakellm.Start(mcpModel)
		t.Cleanup(model.Close)
		coord, p := startMCPCoordinator(t, mcpCoordinatorYAML(model.URL, "30s",
			mcpServerEntry{Name: "fault", Command: []string{bin, "--log", logPath, "stdio"}}))
		waitMCPSettled(t, coord)

		c := runMCP(t, "v1", coord, model, "fault__crash_once", `{}`)
		require.True(t, strings.HasPrefix(c.result, "[ERROR]\n"), "result %q, want tag [ERROR]", c.result)
		assert.Contains(t, c.result, "may or may not have run")
		assert.Equal(t, 1, countLines(faultLog(t, logPath), "call crash_once"),
			"a call that is not idempotent is not sent again after the crash")

		// The server is restarted for the next call.
		c = runMCP(t, "v1", coord, model, "fault__echo", `{"text":"after the crash"}`)
		assert.Equal(t, "[OK]\necho: after the crash", c.result)
		lines := faultLog(t, logPath)
		pids := startedPIDs(t, lines)
		assert.Len(t, pids, 2, "the crashed server was started again; log: %v", lines)

		stopCoordinator(t, p)
		assertGone(t, pids)
	})

	t.Run("tool never answers", func(t *testing.T) {
		bin := buildFaultMCP(t)
		for _, tr := range []string{"stdio", "http"} {
			t.Run(tr, func(t *testing.T) {
				logPath := filepath.Join(t.TempDir(), "fault.log")
				server := mcpServerEntry{Name: "fault"}
				if tr == "stdio" {
					server.Command = []string{bin, "--log", logPath, "stdio"}
				} else {
					fp := startProc(t, "faultmcp-http", []string{bin, "--log", logPath, "http", "--listen", "127.0.0.1:0"}, nil,
						readyOnLine(`faultmcp listening on (http://\S+)`))
					server.URL = fp.Match[1]
				}
				model := fakellm.Start(mcpModel)
				t.Cleanup(model.Close)
				coord, p := startMCPCoordinator(t, mcpCoordinatorYAML(model.URL, "1s", server))

				c := runMCP(t, "v1", coord, model, "fault__hang", `{}`)
				sig := retrySignal(t, c.result, "action_timeout", "fault__hang")
				assert.Equal(t, 1.0, sig["timeout_seconds"], "timeout_seconds")
				// The server saw the cancellation (notifications/cancelled).
				require.Eventually(t, func() bool {
					return countLines(faultLog(t, logPath), "cancelled hang") == 1
				}, 10*time.Second, 20*time.Millisecond, "the server never saw the cancellation; log: %v", faultLog(t, logPath))

				// The same session still serves calls.
				c = runMCP(t, "v1", coord, model, "fault__echo", `{"text":"still there"}`)
				assert.Equal(t, "[OK]\necho: still there", c.result)
				lines := faultLog(t, logPath)
				pids := startedPIDs(t, lines)
				assert.Len(t, pids, 1, "no restart was needed; log: %v", lines)

				stopCoordinator(t, p)
				if tr == "stdio" {
					assertGone(t, pids)
				}
			})
		}
	})

	t.Run("http server stopped and started again", func(t *testing.T) {
		ev, url := startEverythingHTTP(t, 0)
		model := fakellm.Start(mcpModel)
		t.Cleanup(model.Close)
		coord, p := startMCPCoordinator(t, mcpCoordinatorYAML(model.URL, "30s", mcpServerEntry{Name: "everything", URL: url}))
		waitMCPSettled(t, coord)
		echo := func(msg string) string {
			return runMCP(t, "v1", coord, model, "everything__echo", fmt.Sprintf(`{"message":%q}`, msg)).result
		}
		portOf := regexp.MustCompile(`:(\d+)/mcp$`).FindStringSubmatch(url)
		require.Len(t, portOf, 2)
		portNum, err := strconv.Atoi(portOf[1])
		require.NoError(t, err)

		assert.Equal(t, "[OK]\nEcho: before", echo("before"))

		// Stopped: the call gets [UNREACHABLE] once the reconnection budget is spent.
		ev.Stop()
		_, err = net.DialTimeout("tcp", fmt.Sprintf("127.0.0.1:%d", portNum), time.Second)
		require.Error(t, err, "the stopped server still accepts connections")
		res := echo("while down")
		require.True(t, strings.HasPrefix(res, "[UNREACHABLE]\n"), "result %q, want tag [UNREACHABLE]", res)
		assert.Contains(t, res, `"everything"`, "names the server")

		// Started again on the same port: the next run works.
		ev, _ = startEverythingHTTP(t, portNum)
		assert.Equal(t, "[OK]\nEcho: after restart", echo("after restart"))

		// Restarted between two calls, with no failed call in between: the session the
		// coordinator holds is unknown to the new process, which must not reach the model.
		// The raw request starts the run at once, so the call usually meets the stale session
		// before go-sdk's standalone stream has noticed the new process (it waits 1 s or more
		// between reconnections); either way the model must get [OK].
		ev.Stop()
		startEverythingHTTP(t, portNum)
		c := runMCPRaw(t, coord, model, "everything__echo", `{"message":"after a quiet restart"}`)
		assert.Equal(t, "[OK]\nEcho: after a quiet restart", c.result)

		stopCoordinator(t, p)
	})
}

// assertGone asserts that none of pids is a live process: the coordinator stopped (and
// reaped) the stdio servers it started.
func assertGone(t *testing.T, pids []int) {
	t.Helper()
	for _, pid := range pids {
		err := syscall.Kill(pid, 0)
		assert.ErrorIs(t, err, syscall.ESRCH, "stdio server pid %d is still there after the coordinator exited", pid)
	}
}
