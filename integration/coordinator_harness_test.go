package integration

// Harness for end-to-end runs of the coordinator binary: its config, its process, the fake
// OpenAI-compatible model that scripts it, raw AG-UI requests, and the views of a run's event
// stream that the tests assert on.
//
// Design note: the model is scripted from the user's text, not from the test's control flow,
// so that one coordinator serves many subtests: "<agent>: <prompt>" makes the model delegate
// <prompt> to the tool <agent>; a tool result tagged [INPUT_REQUIRED:task_id=X] or
// [AUTH_REQUIRED:task_id=X] is continued once with {"prompt":"blue","task_id":X} when the
// prompt says "then-continue"; any other tool result gets the text "done". The real openai
// provider of the coordinator (SDK, SSE decoding) talks to it over loopback.

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/baton-dev/baton/internal/testutil/fakellm"
	"github.com/baton-dev/baton/llm"
)

const (
	// llmKeyEnv names the variable that holds the (fake) model API key of the coordinator.
	llmKeyEnv = "BATON_TEST_LLM_KEY"
	// continueMarker in a prompt asks the fake model to continue an interrupted task once.
	continueMarker = "then-continue"
	// continueAnswer is what the fake model answers an interrupted task with.
	continueAnswer = "blue"
	// modelDoneText is the fake model's final text after a tool result.
	modelDoneText = "done"
)

// agentEntry is one agents[] item of a coordinator config.
type agentEntry struct {
	Name string
	URL  string
	// InputRequired is "model" unless set (the interrupts issue brings ask_user).
	InputRequired string
	// Timeout is a config duration; "60s" unless set.
	Timeout string
}

// testConfig is a coordinator config for the integration tests (DESIGN §4). It is rendered
// without a listen key: the start helpers add one.
type testConfig struct {
	LLMURL string
	// Model is llm.model; "fake-model" unless set.
	Model string
	// Grace is server.shutdown_grace; "3s" unless set.
	Grace  string
	Agents []agentEntry
	// InputRequired is the agents' default input_required mode; "model" unless set.
	InputRequired string
	MCP           []mcpServerEntry
	// ToolTimeout is limits.tool_timeout; left to the default when empty.
	ToolTimeout string
	// TTL is interrupts.ttl; left to the default when empty.
	TTL string
	// Store is the store DSN; "memory:" unless set.
	Store string
	// OnDisconnect and ReconnectGrace are server.on_disconnect and server.reconnect_grace;
	// left to the defaults when empty.
	OnDisconnect, ReconnectGrace string
	// AuthTokensEnv is server.auth_tokens_env (the variable the process must be given);
	// no auth when empty.
	AuthTokensEnv string
}

func orDefault(v, def string) string {
	if v == "" {
		return def
	}
	return v
}

func (c testConfig) yaml() string {
	var b strings.Builder
	fmt.Fprintf(&b, "server:\n  shutdown_grace: %s\n", orDefault(c.Grace, "3s"))
	if c.OnDisconnect != "" {
		fmt.Fprintf(&b, "  on_disconnect: %s\n", c.OnDisconnect)
	}
	if c.ReconnectGrace != "" {
		fmt.Fprintf(&b, "  reconnect_grace: %s\n", c.ReconnectGrace)
	}
	if c.AuthTokensEnv != "" {
		fmt.Fprintf(&b, "  auth_tokens_env: %s\n", c.AuthTokensEnv)
	}
	fmt.Fprintf(&b, "llm:\n  provider: openai\n  base_url: %q\n  model: %s\n  api_key_env: %s\n", c.LLMURL, orDefault(c.Model, "fake-model"), llmKeyEnv)
	if len(c.Agents) > 0 {
		b.WriteString("agents:\n")
		for _, a := range c.Agents {
			fmt.Fprintf(&b, "  - name: %s\n    url: %q\n    timeout: %s\n    input_required: %s\n",
				a.Name, a.URL, orDefault(a.Timeout, "60s"), orDefault(a.InputRequired, orDefault(c.InputRequired, "model")))
		}
	}
	if len(c.MCP) > 0 {
		b.WriteString("mcp_servers:\n")
		for _, m := range c.MCP {
			fmt.Fprintf(&b, "  - name: %s\n", m.Name)
			if len(m.Command) > 0 {
				quoted := make([]string, len(m.Command))
				for i, a := range m.Command {
					quoted[i] = strconv.Quote(a)
				}
				fmt.Fprintf(&b, "    command: [%s]\n", strings.Join(quoted, ", "))
			} else {
				fmt.Fprintf(&b, "    url: %q\n", m.URL)
			}
		}
	}
	b.WriteString("limits:\n  max_iterations: 10\n  max_run_seconds: 120\n")
	if c.ToolTimeout != "" {
		fmt.Fprintf(&b, "  tool_timeout: %s\n", c.ToolTimeout)
	}
	if c.TTL != "" {
		fmt.Fprintf(&b, "interrupts:\n  ttl: %s\n", c.TTL)
	}
	fmt.Fprintf(&b, "store: %q\n", orDefault(c.Store, "memory:"))
	return b.String()
}

// coordinatorYAML renders a config for the openai provider at llmURL with the given agents.
func coordinatorYAML(llmURL string, agents ...agentEntry) string {
	return testConfig{LLMURL: llmURL, Agents: agents}.yaml()
}

var listenKey = regexp.MustCompile(`(?m)^listen:`)

// startCoordinator writes cfg (YAML) to a temp file, starts the coordinator binary with
// --config on a free port (a listen key is added when cfg has none), waits for its
// "listening on" line and returns its base URL. In Cleanup it sends SIGTERM and asserts that
// the process exits with code 0.
func startCoordinator(t testing.TB, cfg string) (baseURL string) {
	t.Helper()
	bin, ok := buildBinaries(t)["coordinator"]
	if !ok {
		t.Fatal("cmd/coordinator has no Go files to build")
	}
	return startCoordinatorBin(t, bin, cfg)
}

// startCoordinatorBin is startCoordinator with the coordinator binary bin (a benchmark's
// baseline, built from an older commit).
func startCoordinatorBin(t testing.TB, bin, cfg string) (baseURL string) {
	t.Helper()
	var err error
	for attempt := 0; attempt < 3; attempt++ { // freePort can race with another listener
		text := cfg
		if !listenKey.MatchString(cfg) {
			text = "listen: 127.0.0.1:" + strconv.Itoa(freePort(t)) + "\n" + cfg
		}
		path := filepath.Join(t.TempDir(), "baton.yaml")
		if err := os.WriteFile(path, []byte(text), 0o600); err != nil {
			t.Fatalf("writing the coordinator config: %v", err)
		}
		var p *proc
		p, err = startProcErr(t, "coordinator", []string{bin, "--config", path, "--log-level", "debug"},
			[]string{llmKeyEnv + "=fake-key"}, readyOnLine(`Baton coordinator listening on (http://\S+)`))
		if err != nil {
			if listenKey.MatchString(cfg) {
				break // the caller chose the port: retrying cannot help
			}
			continue
		}
		t.Cleanup(func() {
			if code := p.Stop(); code != 0 {
				t.Errorf("coordinator exited with code %d on SIGTERM, want 0", code)
			}
		})
		waitMCPSettled(t, p.Match[1])
		return p.Match[1]
	}
	t.Fatalf("starting the coordinator: %v\nconfig:\n%s", err, cfg)
	return ""
}

// startFakeLLM starts the fake model with the test script; it is closed in Cleanup (after
// the coordinator, whose Cleanup is registered later and so runs first).
func startFakeLLM(t testing.TB) *fakellm.Server {
	t.Helper()
	s := fakellm.Start(testModel)
	t.Cleanup(s.Close)
	return s
}

var (
	// callSeq numbers the fake model's tool calls, so that call ids are unique across runs.
	callSeq atomic.Int64
	// interruptedTag matches an interrupted-task tag and captures the task id.
	interruptedTag = regexp.MustCompile(`^\[(?:INPUT_REQUIRED|AUTH_REQUIRED):task_id=([^\]\s]+)\]`)
)

// testModel is the fake model's script (see the file comment).
func testModel(req fakellm.Request) fakellm.Reply {
	userAt := -1
	for i, m := range req.Messages {
		if m.Role == "user" {
			userAt = i
		}
	}
	if userAt < 0 {
		return fakellm.Reply{Text: "fake model: no user message"}
	}
	agent, prompt, ok := strings.Cut(req.Messages[userAt].Content, ":")
	if !ok {
		return fakellm.Reply{Text: "fake model: the user message is not <agent>: <prompt>"}
	}
	agent, prompt = strings.TrimSpace(agent), strings.TrimSpace(prompt)
	offered := false
	for _, n := range req.ToolNames() {
		offered = offered || n == agent
	}
	if !offered {
		return fakellm.Reply{Text: fmt.Sprintf("fake model: tool %q is not offered (tools: %v)", agent, req.ToolNames())}
	}
	call := func(args map[string]string) fakellm.Reply {
		b, _ := json.Marshal(args)
		return fakellm.Reply{ToolCalls: []llm.ToolCall{{
			ID: fmt.Sprintf("call_%d", callSeq.Add(1)), Name: agent, Arguments: string(b)}}}
	}
	last := req.Last()
	if last.Role != "tool" {
		return call(map[string]string{"prompt": prompt})
	}
	toolResults := 0
	for _, m := range req.Messages[userAt:] {
		if m.Role == "tool" {
			toolResults++
		}
	}
	if m := interruptedTag.FindStringSubmatch(last.Content); m != nil && toolResults == 1 &&
		strings.Contains(prompt, continueMarker) {
		return call(map[string]string{"prompt": continueAnswer, "task_id": m[1]})
	}
	return fakellm.Reply{Text: modelDoneText}
}

// toolMessagesSeen returns the content of every tool message the model received, by tool
// call id (the coordinator resends the history, so later requests repeat earlier results).
func toolMessagesSeen(s *fakellm.Server) map[string]string {
	out := map[string]string{}
	for _, r := range s.Requests() {
		for _, m := range r.Messages {
			if m.Role == "tool" {
				out[m.ToolCallID] = m.Content
			}
		}
	}
	return out
}

// userTextsSeen returns every user message text the model received.
func userTextsSeen(s *fakellm.Server) []string {
	var out []string
	for _, r := range s.Requests() {
		for _, m := range r.Messages {
			if m.Role == "user" {
				out = append(out, m.Content)
			}
		}
	}
	return out
}

// startDemoAgent starts cmd/demo-agent of kind ("travel" or "research") on a free port and
// returns its base URL.
func startDemoAgent(t testing.TB, kind string) string {
	t.Helper()
	bin, ok := buildBinaries(t)["demo-agent"]
	if !ok {
		t.Fatal("cmd/demo-agent has no Go files to build")
	}
	var err error
	for attempt := 0; attempt < 3; attempt++ {
		var p *proc
		p, err = startProcErr(t, "demo-agent-"+kind,
			[]string{bin, "--agent", kind, "--listen", "127.0.0.1:" + strconv.Itoa(freePort(t))}, nil,
			readyOnLine(`demo-agent \S+ listening on (http://\S+)`))
		if err == nil {
			return p.Match[1]
		}
	}
	t.Fatal(err)
	return ""
}

// startA2APeerEnv starts peers/a2a-peer.mjs on a free port with extra environment (e.g.
// A2A_LEGACY=0, A2A_ONLY_V03=1) and returns its base URL.
func startA2APeerEnv(t testing.TB, env ...string) string {
	t.Helper()
	dir := requirePeers(t)
	node, _ := requireNode(t)
	var err error
	for attempt := 0; attempt < 3; attempt++ {
		var p *proc
		p, err = startProcErr(t, "a2a-peer", []string{node, filepath.Join(dir, "a2a-peer.mjs")},
			append(append([]string{}, env...), "PORT="+strconv.Itoa(freePort(t))), readyOnLine(`a2a peer on (http://\S+)`))
		if err == nil {
			return p.Match[1]
		}
	}
	t.Fatal(err)
	return ""
}

// peerVersions returns the A2A-Version header of every request the peer got on /a2a/*, in
// order ("" when absent, i.e. the v0.3 wire).
func peerVersions(t testing.TB, baseURL string) []string {
	t.Helper()
	resp, err := http.Get(baseURL + "/test/log")
	require.NoError(t, err)
	defer resp.Body.Close()
	var log struct {
		Versions []string `json:"versions"`
	}
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&log))
	return log.Versions
}

var threadSeq atomic.Int64

// newThreadID returns a thread id unique within the test binary.
func newThreadID(prefix string) string {
	return fmt.Sprintf("%s-%d-%d", prefix, time.Now().UnixNano(), threadSeq.Add(1))
}

// userJob is an agui-client job with one user message on a fresh thread.
func userJob(threadPrefix, text string) map[string]any {
	return map[string]any{
		"threadId": newThreadID(threadPrefix),
		"runId":    newThreadID("run"),
		"messages": []any{map[string]any{"id": "u1", "role": "user", "content": text}},
	}
}

// runInput is a valid RunAgentInput body (1.0 client) with one user message.
func runInput(threadID, runID, text string) map[string]any {
	return map[string]any{
		"threadId": threadID, "runId": runID, "protocolVersion": "1.0",
		"state": map[string]any{}, "tools": []any{}, "context": []any{}, "forwardedProps": map[string]any{},
		"messages": []any{map[string]any{"id": "u-" + runID, "role": "user", "content": text}},
	}
}

// postAGUI POSTs body (raw bytes) to /agui.
func postAGUI(ctx context.Context, baseURL string, body []byte) (*http.Response, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, baseURL+"/agui", bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "text/event-stream")
	return http.DefaultClient.Do(req)
}

// readSSE reads AG-UI events from an SSE body until EOF, calling onEvent for each; it returns
// the events read and the first read or decode error.
func readSSE(body io.Reader, onEvent func(map[string]any)) ([]map[string]any, error) {
	return readSSEWhile(body, func(ev map[string]any) bool {
		if onEvent != nil {
			onEvent(ev)
		}
		return true
	})
}

// readSSEWhile reads AG-UI events from an SSE body as long as more(event) is true, and
// returns the events read.
func readSSEWhile(body io.Reader, more func(map[string]any) bool) ([]map[string]any, error) {
	var evs []map[string]any
	sc := bufio.NewScanner(body)
	sc.Buffer(make([]byte, 0, 64<<10), 16<<20)
	for sc.Scan() {
		data, ok := strings.CutPrefix(sc.Text(), "data: ")
		if !ok {
			continue
		}
		var ev map[string]any
		if err := json.Unmarshal([]byte(data), &ev); err != nil {
			return evs, fmt.Errorf("bad SSE frame %q: %w", data, err)
		}
		evs = append(evs, ev)
		if !more(ev) {
			return evs, nil
		}
	}
	return evs, sc.Err()
}

// delegationView is what a run's stream says about one sub-agent tool call.
type delegationView struct {
	CallID string
	Tool   string
	// Args are the tool call's arguments (TOOL_CALL_ARGS deltas, decoded).
	Args map[string]any
	// Results are the contents of the TOOL_CALL_RESULT events for the call.
	Results []string
	// SubIDs are the subagentRunIds of the SUBAGENT_STARTED events for the call.
	SubIDs []string
	// Starts are those SUBAGENT_STARTED events.
	Starts []map[string]any
	// Ends are the SUBAGENT_FINISHED and SUBAGENT_ERROR events of those sub-agent runs.
	Ends []map[string]any
	// Text is the concatenated delta of the TEXT_MESSAGE_CONTENT events attributed to the
	// sub-agent run.
	Text string
}

// delegationsOf groups a run's events by tool call, in call order.
func delegationsOf(t testing.TB, evs []map[string]any) []*delegationView {
	t.Helper()
	var out []*delegationView
	byCall := map[string]*delegationView{}
	bySub := map[string]*delegationView{}
	args := map[string]*strings.Builder{}
	// Built up per view and copied into Text at the end: appending to a string once per delta
	// copies the text so far each time, minutes under the race detector for a 10 MiB artifact.
	texts := map[*delegationView]*strings.Builder{}
	for _, e := range evs {
		s := func(k string) string { v, _ := e[k].(string); return v }
		switch e["type"] {
		case "TOOL_CALL_START":
			d := &delegationView{CallID: s("toolCallId"), Tool: s("toolCallName")}
			byCall[d.CallID] = d
			args[d.CallID] = &strings.Builder{}
			out = append(out, d)
		case "TOOL_CALL_ARGS":
			if b := args[s("toolCallId")]; b != nil {
				b.WriteString(s("delta"))
			}
		case "TOOL_CALL_RESULT":
			if d := byCall[s("toolCallId")]; d != nil {
				d.Results = append(d.Results, s("content"))
			} else {
				t.Errorf("TOOL_CALL_RESULT for unknown tool call %q", s("toolCallId"))
			}
		case "SUBAGENT_STARTED":
			if d := byCall[s("parentToolCallId")]; d != nil {
				d.SubIDs = append(d.SubIDs, s("subagentRunId"))
				d.Starts = append(d.Starts, e)
				bySub[s("subagentRunId")] = d
			} else {
				t.Errorf("SUBAGENT_STARTED with unknown parentToolCallId %q: %v", s("parentToolCallId"), e)
			}
		case "SUBAGENT_FINISHED", "SUBAGENT_ERROR":
			if d := bySub[s("subagentRunId")]; d != nil {
				d.Ends = append(d.Ends, e)
			} else {
				t.Errorf("%s for unknown subagentRunId %q", e["type"], s("subagentRunId"))
			}
		case "TEXT_MESSAGE_CONTENT":
			if d := bySub[s("subagentRunId")]; d != nil {
				if texts[d] == nil {
					texts[d] = &strings.Builder{}
				}
				texts[d].WriteString(s("delta"))
			}
		}
	}
	for d, b := range texts {
		d.Text = b.String()
	}
	for id, b := range args {
		if b.Len() > 0 {
			var m map[string]any
			if err := json.Unmarshal([]byte(b.String()), &m); err != nil {
				t.Errorf("tool call %s: arguments %q are not a JSON object: %v", id, b.String(), err)
			}
			byCall[id].Args = m
		}
	}
	return out
}

// plainText is the concatenated delta of the TEXT_MESSAGE_CONTENT events not attributed to a
// sub-agent (the model's own text).
func plainText(evs []map[string]any) string {
	var b strings.Builder
	for _, e := range eventsOfType(evs, "TEXT_MESSAGE_CONTENT") {
		if _, attributed := e["subagentRunId"]; !attributed {
			s, _ := e["delta"].(string)
			b.WriteString(s)
		}
	}
	return b.String()
}

// assertCleanClientRun asserts what every run through the official client must satisfy: no
// failure, a terminal event, zero client warnings, no RUN_ERROR, a success outcome.
func assertCleanClientRun(t *testing.T, r aguiResult) {
	t.Helper()
	assert.Nil(t, r.Failed, "the client rejected the stream")
	assert.True(t, r.Terminal, "the stream ended without a terminal event: %v", eventTypes(r.Events))
	assert.Empty(t, r.Warnings, "client warnings")
	assert.Nil(t, r.RunError, "RUN_ERROR")
	if assert.NotNil(t, r.Outcome, "no RUN_FINISHED") {
		assert.Equal(t, "success", *r.Outcome)
	}
	if len(r.Events) > 0 {
		assert.Equal(t, "RUN_STARTED", r.Events[0]["type"], "first event")
	}
	assert.Len(t, eventsOfType(r.Events, "RUN_FINISHED"), 1, "exactly one RUN_FINISHED")
}

// waitMCPSettled waits until no MCP server of the coordinator at base is still making its
// first connection (/readyz says "connecting"). The coordinator listens before its MCP
// servers have connected (a degraded start), and a stdio server started through node can
// take seconds under load; a test that scripts a call of its tools must not race that.
// Servers that failed (down with a cause) are left as they are: some tests want them down.
func waitMCPSettled(t testing.TB, base string) {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for time.Now().Before(deadline) {
		resp, err := http.Get(base + "/readyz")
		if err != nil {
			t.Fatalf("GET /readyz: %v", err)
		}
		var ready struct {
			Checks struct {
				MCP map[string]struct{ Status, Error string }
			}
		}
		err = json.NewDecoder(resp.Body).Decode(&ready)
		resp.Body.Close()
		if err != nil {
			t.Fatalf("decoding /readyz: %v", err)
		}
		connecting := false
		for _, c := range ready.Checks.MCP {
			if c.Status != "up" && c.Error == "connecting" {
				connecting = true
			}
		}
		if !connecting {
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatalf("an MCP server of the coordinator at %s was still making its first connection after 60 s", base)
}
