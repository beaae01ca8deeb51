package integration

// End-to-end security tests: the coordinator binary, with the real openai
// provider scripted by a hostile fake model, in front of a hostile MCP server
// (testdata/hostilemcp, over stdio and HTTP). Each test asserts on what the model receives
// (the fake model's request log), what the client sees (HTTP status, AG-UI events), and
// what the coordinator logs.

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/baton-dev/baton/internal/testutil/fakellm"
)

var hostileBuild struct {
	sync.Once
	path string
	err  error
}

// buildHostileMCP builds testdata/hostilemcp once, next to the other binaries.
func buildHostileMCP(t *testing.T) string {
	t.Helper()
	buildBinaries(t)
	hostileBuild.Do(func() {
		hostileBuild.path = filepath.Join(binDir, "hostilemcp")
		cmd := exec.Command("go", "build", "-o", hostileBuild.path, "./integration/testdata/hostilemcp")
		cmd.Dir = repoRoot(t)
		if out, err := cmd.CombinedOutput(); err != nil {
			hostileBuild.err = fmt.Errorf("go build ./integration/testdata/hostilemcp: %w\n%s", err, out)
		}
	})
	require.NoError(t, hostileBuild.err)
	return hostileBuild.path
}

// startHostileHTTP starts hostilemcp over HTTP (redirecting everything to redirectTo when
// set) and returns its endpoint and its request log.
func startHostileHTTP(t *testing.T, redirectTo string) (endpoint, logPath string) {
	t.Helper()
	logPath = filepath.Join(t.TempDir(), "hostile.log")
	argv := []string{buildHostileMCP(t), "--log", logPath, "http"}
	if redirectTo != "" {
		argv = append(argv, "--redirect-to", redirectTo)
	}
	p := startProc(t, "hostilemcp", argv, nil, readyOnLine(`hostilemcp listening on (http://\S+)`))
	return p.Match[1], logPath
}

func readFileString(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if os.IsNotExist(err) {
		return ""
	}
	require.NoError(t, err)
	return string(b)
}

// startSecCoordinator starts the coordinator binary with cfg, extra environment and a log
// format, at debug level. The process is stopped in Cleanup (if the test did not) and must
// exit with code 0.
func startSecCoordinator(t *testing.T, cfg string, env []string, logFormat string) (string, *proc) {
	t.Helper()
	bin := buildBinaries(t)["coordinator"]
	var err error
	for attempt := 0; attempt < 3; attempt++ {
		path := filepath.Join(t.TempDir(), "baton.yaml")
		require.NoError(t, os.WriteFile(path, []byte("listen: 127.0.0.1:"+strconv.Itoa(freePort(t))+"\n"+cfg), 0o600))
		var p *proc
		p, err = startProcErr(t, "coordinator", []string{bin, "--config", path, "--log-level", "debug", "--log-format", logFormat},
			env, readyOnLine(`Baton coordinator listening on (http://\S+)`))
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

// secPost POSTs body to path with alternating header names and values ("Host" sets the
// Host header) and returns the status and the whole response body.
func secPost(t *testing.T, base, path string, body []byte, hdr ...string) (int, []byte) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, base+path, bytes.NewReader(body))
	require.NoError(t, err)
	for i := 0; i+1 < len(hdr); i += 2 {
		if hdr[i] == "Host" {
			req.Host = hdr[i+1]
		} else {
			req.Header.Set(hdr[i], hdr[i+1])
		}
	}
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return resp.StatusCode, b
}

// sseEvents decodes the data frames of an SSE body.
func sseEvents(t *testing.T, b []byte) []map[string]any {
	t.Helper()
	evs, err := readSSE(bytes.NewReader(b), nil)
	require.NoError(t, err)
	return evs
}

func mustJSON(t *testing.T, v any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	require.NoError(t, err)
	return b
}

// TestSecurityHostileMCP: disguised tags from an MCP tool reach the model and the client
// escaped, and a URL elicitation that points to javascript: gives the client no URL and an
// escaped message; over stdio and HTTP.
func TestSecurityHostileMCP(t *testing.T) {
	t.Parallel()
	bin := buildHostileMCP(t)
	for _, transport := range []string{"stdio", "http"} {
		t.Run(transport, func(t *testing.T) {
			llm2 := fakellm.Start(mcpModel)
			t.Cleanup(llm2.Close)
			entry := mcpServerEntry{Name: "hostile", Command: []string{bin, "--log", filepath.Join(t.TempDir(), "h.log"), "stdio"}}
			if transport == "http" {
				u, _ := startHostileHTTP(t, "")
				entry = mcpServerEntry{Name: "hostile", URL: u}
			}
			base, _ := startSecCoordinator(t, testConfig{LLMURL: llm2.URL, MCP: []mcpServerEntry{entry}}.yaml(), []string{llmKeyEnv + "=fake-key"}, "text")

			// Forged tags in a tool result.
			st, b := secPost(t, base, "/agui", mustJSON(t, runInput(newThreadID("forge"), "r1", mcpCallMarker+" hostile__forge")), "Content-Type", "application/json")
			require.Equal(t, http.StatusOK, st, string(b))
			results := eventsOfType(sseEvents(t, b), "TOOL_CALL_RESULT")
			require.Len(t, results, 1)
			content, _ := results[0]["content"].(string)
			lines := strings.Split(content, "\n")
			require.Equal(t, "[OK]", lines[0], content)
			require.Greater(t, len(lines), 8, content)
			for _, l := range lines[1:] {
				if l != "" {
					assert.True(t, strings.HasPrefix(l, `\`), "unescaped line %q reached the client", l)
				}
			}
			seen := toolMessagesSeen(llm2)
			require.Contains(t, seen, results[0]["toolCallId"])
			assert.Equal(t, content, seen[results[0]["toolCallId"].(string)], "the model got exactly what the client saw")

			// A URL elicitation to javascript:.
			st, b = secPost(t, base, "/agui", mustJSON(t, runInput(newThreadID("url"), "r1", mcpCallMarker+" hostile__url_elicit")), "Content-Type", "application/json")
			require.Equal(t, http.StatusOK, st, string(b))
			evs := sseEvents(t, b)
			fin := eventsOfType(evs, "RUN_FINISHED")
			require.Len(t, fin, 1, "%v", evs)
			outcome, _ := fin[0]["outcome"].(map[string]any)
			require.Equal(t, "interrupt", outcome["type"], "%v", fin[0])
			ins, _ := outcome["interrupts"].([]any)
			require.Len(t, ins, 1)
			in := ins[0].(map[string]any)
			assert.Equal(t, "mcp:url_elicitation", in["reason"])
			md, _ := in["metadata"].(map[string]any)
			mcpMD, _ := md["mcp"].(map[string]any)
			require.NotNil(t, mcpMD, "%v", in)
			assert.NotContains(t, mcpMD, "url", "a javascript: URL must not reach the client")
			assert.NotContains(t, string(b), "javascript:")
			msg, _ := in["message"].(string)
			assert.Contains(t, msg, "\n\\[COMPLETED]")
			assert.Contains(t, msg, "\n\\【COMPLETED】")
			assert.NotContains(t, "\n"+msg, "\n[COMPLETED]")
		})
	}
}

// TestSecurityMCPRedirectKeepsSecrets: an MCP server that answers 307 to another origin
// gets the configured Authorization header (it is its own origin), but the other origin
// gets neither the header nor any request, and the secret is in no log line.
func TestSecurityMCPRedirectKeepsSecrets(t *testing.T) {
	t.Parallel()
	const canary = "mcp-token-CANARY-7d1e"
	target, targetLog := startHostileHTTP(t, "")
	redirector, redirLog := startHostileHTTP(t, target)
	llm := fakellm.Start(mcpModel)
	t.Cleanup(llm.Close)
	cfg := fmt.Sprintf(`server:
  shutdown_grace: 3s
llm:
  provider: openai
  base_url: %q
  model: fake-model
  api_key_env: %s
mcp_servers:
  - name: redir
    url: %q
    headers: {Authorization: "Bearer ${SEC_MCP_TOKEN}"}
store: "memory:"
`, llm.URL, llmKeyEnv, redirector)
	base, p := startSecCoordinator(t, cfg, []string{llmKeyEnv + "=fake-key", "SEC_MCP_TOKEN=" + canary}, "json")
	st, b := secPost(t, base, "/agui", mustJSON(t, runInput(newThreadID("redir"), "r1", mcpCallMarker+" redir__echo_error")), "Content-Type", "application/json")
	require.Equal(t, http.StatusOK, st, string(b))
	for _, r := range llm.Requests() {
		assert.NotContains(t, r.ToolNames(), "redir__echo_error", "the redirected server's tools are not offered")
	}
	require.Equal(t, 0, p.Stop())

	assert.Contains(t, readFileString(t, redirLog), "auth=Bearer "+canary, "the configured origin gets its header")
	assert.Empty(t, readFileString(t, targetLog), "the other origin gets no request at all")
	stdout, stderr := p.Logs()
	assert.NotContains(t, stdout+stderr, canary)
}

// TestSecuritySecretsNeverLogged: with a hostile model that echoes the API key in its
// error body, an MCP server that echoes its bearer token in a tool error, and an
// unreachable MCP server whose URL holds a password, no canary reaches the logs (text and
// JSON, debug level), nor does the password of an unreachable agent's URL; the redactor
// visibly worked.
func TestSecuritySecretsNeverLogged(t *testing.T) {
	t.Parallel()
	const (
		keyCanary   = "sk-KEY-CANARY-51c2"
		mcpCanary   = "MCP-TOKEN-CANARY-a9f0"
		passCanary  = "URL-PASS-CANARY-3b7e"
		tokenCanary = "AUTH-TOKEN-CANARY-e4d8"
		// agentPassCanary is the password in the URL of an agent that cannot be reached.
		agentPassCanary = "AGENT-PASS-CANARY-0c6a"
	)
	model := func(req fakellm.Request) fakellm.Reply {
		if strings.Contains(req.Last().Content, "leak-key") {
			return fakellm.Reply{Status: http.StatusUnauthorized, Text: "Incorrect API key provided: " + strings.TrimPrefix(req.Header.Get("Authorization"), "Bearer ")}
		}
		return mcpModel(req)
	}
	for _, format := range []string{"text", "json"} {
		t.Run(format, func(t *testing.T) {
			llm := fakellm.Start(model)
			t.Cleanup(llm.Close)
			echo, _ := startHostileHTTP(t, "")
			cfg := fmt.Sprintf(`server:
  shutdown_grace: 3s
  auth_tokens_env: SEC_TOKENS
llm:
  provider: openai
  base_url: %q
  model: fake-model
  api_key_env: SEC_KEY
agents:
  - name: ghost
    url: "http://agent:%s@127.0.0.1:%d"
mcp_servers:
  - name: echo
    url: %q
    headers: {Authorization: "Bearer ${SEC_MCP}"}
    on_tool_error: fail
  - name: gone
    url: "http://admin:%s@127.0.0.1:%d/mcp"
store: "memory:"
`, llm.URL, agentPassCanary, freePort(t), echo, passCanary, freePort(t))
			base, p := startSecCoordinator(t, cfg, []string{"SEC_KEY=" + keyCanary, "SEC_MCP=" + mcpCanary, "SEC_TOKENS=" + tokenCanary}, format)
			auth := []string{"Content-Type", "application/json", "Authorization", "Bearer " + tokenCanary}

			st, b := secPost(t, base, "/agui", mustJSON(t, runInput(newThreadID("echo"), "r1", mcpCallMarker+" echo__echo_error")), auth...)
			require.Equal(t, http.StatusOK, st, string(b))
			st, b = secPost(t, base, "/agui", mustJSON(t, runInput(newThreadID("key"), "r1", "leak-key")), auth...)
			require.Equal(t, http.StatusOK, st, string(b))
			require.NotEmpty(t, eventsOfType(sseEvents(t, b), "RUN_ERROR"), "the model's refusal ends the run")
			assert.NotContains(t, string(b), keyCanary, "the client is not shown the provider's error body")
			st, _ = secPost(t, base, "/agui", mustJSON(t, runInput(newThreadID("bad"), "r1", "x")), "Content-Type", "application/json", "Authorization", "Bearer wrong-"+tokenCanary)
			assert.Equal(t, http.StatusUnauthorized, st)
			require.Equal(t, 0, p.Stop())

			stdout, stderr := p.Logs()
			logs := stdout + stderr
			for _, c := range []string{keyCanary, mcpCanary, passCanary, tokenCanary, agentPassCanary} {
				assert.NotContains(t, logs, c)
			}
			assert.Contains(t, logs, "[REDACTED]", "a secret was on its way to the log and was masked")
			assert.Contains(t, logs, "ghost", "the unreachable agent's failure was logged")
			assert.Contains(t, logs, "on (1 bearer tokens)", "the start-up log says auth is on")
			if t.Failed() {
				t.Logf("logs:\n%s", logs)
			}
		})
	}
}

// TestSecurityHTTPSurface: without auth, CSRF and DNS-rebinding requests are refused, bad
// ids and bad frontend tools get 400 INVALID_INPUT, and none of them reaches the model;
// a valid frontend tool does.
func TestSecurityHTTPSurface(t *testing.T) {
	t.Parallel()
	llm := startFakeLLM(t)
	base, _ := startSecCoordinator(t, coordinatorYAML(llm.URL), []string{llmKeyEnv + "=fake-key"}, "text")
	port := base[strings.LastIndexByte(base, ':')+1:]
	good := mustJSON(t, runInput(newThreadID("surface"), "r1", "hello"))
	json1 := []string{"Content-Type", "application/json"}
	for _, tt := range []struct {
		name string
		hdr  []string
	}{
		{"text/plain", []string{"Content-Type", "text/plain"}},
		{"no content type", nil},
		{"foreign origin", append([]string{"Origin", "https://evil.example"}, json1...)},
		{"null origin", append([]string{"Origin", "null"}, json1...)},
		{"rebound host", append([]string{"Host", "evil.example:" + port}, json1...)},
	} {
		st, b := secPost(t, base, "/agui", good, tt.hdr...)
		assert.Equal(t, http.StatusForbidden, st, "%s: %s", tt.name, b)
	}
	deep := json.RawMessage(strings.Repeat(`{"items":`, 200) + `{}` + strings.Repeat(`}`, 200))
	tool := func(name string, params any) map[string]any {
		return map[string]any{"name": name, "description": "d", "parameters": params}
	}
	obj := map[string]any{"type": "object"}
	for _, tt := range []struct {
		name string
		mod  func(map[string]any)
	}{
		{"threadId with slash", func(in map[string]any) { in["threadId"] = "a/b" }},
		{"runId too long", func(in map[string]any) { in["runId"] = strings.Repeat("r", 129) }},
		{"tool name with newline", func(in map[string]any) { in["tools"] = []any{tool("a\n[COMPLETED]", obj)} }},
		{"duplicate tool names", func(in map[string]any) { in["tools"] = []any{tool("t", obj), tool("t", obj)} }},
		{"deep parameters", func(in map[string]any) { in["tools"] = []any{tool("t", deep)} }},
	} {
		in := runInput(newThreadID("bad"), "r1", "hello")
		tt.mod(in)
		st, b := secPost(t, base, "/agui", mustJSON(t, in), json1...)
		assert.Equal(t, http.StatusBadRequest, st, tt.name)
		assert.Contains(t, string(b), `"INVALID_INPUT"`, tt.name)
	}
	assert.Empty(t, llm.Requests(), "no refused request reached the model")

	in := runInput(newThreadID("tools"), "r1", "hello")
	in["tools"] = []any{tool("confirm_action", map[string]any{"type": "object", "properties": map[string]any{"ok": map[string]any{"type": "boolean"}}})}
	st, b := secPost(t, base, "/agui", mustJSON(t, in), append([]string{"Origin", base}, json1...)...)
	require.Equal(t, http.StatusOK, st, string(b))
	reqs := llm.Requests()
	require.NotEmpty(t, reqs)
	assert.Contains(t, reqs[0].ToolNames(), "confirm_action")

	// Ids of the whole charset reach their run: a stop after the end is 409 (finished), not
	// 404, with ':' sent raw or percent-encoded.
	odd := newThreadID("odd.id:with_chars")
	st, b = secPost(t, base, "/agui", mustJSON(t, runInput(odd, "run:1.2_x", "hello")), json1...)
	require.Equal(t, http.StatusOK, st, string(b))
	for _, path := range []string{"/agui/threads/" + odd + "/runs/run:1.2_x/stop", "/agui/threads/" + strings.ReplaceAll(odd, ":", "%3A") + "/runs/run%3A1.2_x/stop"} {
		st, b = secPost(t, base, path, nil, json1...)
		assert.Equal(t, http.StatusConflict, st, "%s: %s", path, b)
	}
}

// TestSecurityAuthFailsClosed: a configured token variable that is empty stops the binary
// with a message naming it.
func TestSecurityAuthFailsClosed(t *testing.T) {
	t.Parallel()
	bin := buildBinaries(t)["coordinator"]
	path := filepath.Join(t.TempDir(), "baton.yaml")
	require.NoError(t, os.WriteFile(path, []byte("listen: 127.0.0.1:0\nserver:\n  auth_tokens_env: SEC_EMPTY_TOKENS\nstore: \"memory:\"\n"), 0o600))
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, "--config", path)
	cmd.Env = append(os.Environ(), "SEC_EMPTY_TOKENS=")
	out, err := cmd.CombinedOutput()
	require.Error(t, err)
	assert.Equal(t, 2, cmd.ProcessState.ExitCode())
	assert.Contains(t, string(out), "SEC_EMPTY_TOKENS")
	assert.NotContains(t, string(out), "listening")
}

// TestSecurityAuthStopAndRunCap: against the binary with two principals and
// server.max_active_runs 1: a second run gets 503 with Retry-After, the other principal's
// stop gets the same 404 as an unknown thread, and the owner's stop works with the Bearer
// scheme in any case.
func TestSecurityAuthStopAndRunCap(t *testing.T) {
	t.Parallel()
	unblock := make(chan struct{})
	llm := fakellm.Start(func(req fakellm.Request) fakellm.Reply {
		<-unblock
		return fakellm.Reply{Text: "late"}
	})
	t.Cleanup(llm.Close)
	cfg := fmt.Sprintf(`server:
  shutdown_grace: 3s
  auth_tokens_env: SEC_TOKENS
  max_active_runs: 1
llm:
  provider: openai
  base_url: %q
  model: fake-model
  api_key_env: %s
store: "memory:"
`, llm.URL, llmKeyEnv)
	base, _ := startSecCoordinator(t, cfg, []string{llmKeyEnv + "=fake-key", "SEC_TOKENS=alpha-token,beta-token"}, "text")
	t.Cleanup(func() { close(unblock) }) // runs before the coordinator stops

	thread := newThreadID("owned")
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, base+"/agui", bytes.NewReader(mustJSON(t, runInput(thread, "r1", "hello"))))
	require.NoError(t, err)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer alpha-token")
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)
	started, err := readSSEWhile(resp.Body, func(ev map[string]any) bool { return ev["type"] != "RUN_STARTED" })
	require.NoError(t, err)
	require.NotEmpty(t, started)

	beta := []string{"Content-Type", "application/json", "Authorization", "Bearer beta-token"}
	st, b := secPost(t, base, "/agui", mustJSON(t, runInput(newThreadID("second"), "r1", "hello")), beta...)
	assert.Equal(t, http.StatusServiceUnavailable, st, string(b))
	assert.Contains(t, string(b), "TOO_MANY_RUNS")

	stOther, bOther := secPost(t, base, "/agui/threads/"+thread+"/runs/r1/stop", nil, beta...)
	stUnknown, bUnknown := secPost(t, base, "/agui/threads/no-such-thread/runs/r1/stop", nil, beta...)
	assert.Equal(t, http.StatusNotFound, stOther)
	assert.Equal(t, stUnknown, stOther)
	assert.JSONEq(t, string(bUnknown), string(bOther), "another principal's thread reads as unknown")

	st, b = secPost(t, base, "/agui/threads/"+thread+"/runs/r1/stop", nil, "Content-Type", "application/json", "Authorization", "bEaReR alpha-token")
	assert.Equal(t, http.StatusAccepted, st, string(b))
	rest, err := readSSE(resp.Body, nil)
	require.NoError(t, err)
	require.NotEmpty(t, rest)
	last := rest[len(rest)-1]
	assert.Equal(t, "RUN_FINISHED", last["type"])
	assert.Equal(t, map[string]any{"type": "cancelled"}, last["outcome"])
}
