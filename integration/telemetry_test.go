package integration

// End-to-end tracing: the coordinator binary exports its spans over OTLP/HTTP
// (protobuf) to a receiver in the test, for a run that delegates to an A2A agent and calls
// an MCP tool over streamable HTTP that fails once (isError) and is retried. The agent, the
// MCP server and the fake model record the trace context they receive.
//
// Design note: the A2A agent is the demo research agent (a2a-go server) behind a handler
// that records the traceparent header; the MCP server is a go-sdk server in the test whose
// middleware records both the HTTP header and params._meta.traceparent. Spans leave the
// coordinator in batches; OTEL_BSP_SCHEDULE_DELAY (read by the SDK in the child process)
// makes the batches small in time, and the test waits for the run span to arrive.

import (
	"bytes"
	"context"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	coltracepb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/protobuf/proto"

	"github.com/baton-dev/baton/internal/demoagent"
	"github.com/baton-dev/baton/internal/testutil/fakellm"
)

// otlpSpan is a received span, flattened for assertions.
type otlpSpan struct {
	TraceID, SpanID, ParentID string
	Name                      string
	Kind                      tracepb.Span_SpanKind
	Attrs                     map[string]string
	Events                    []string
	Links                     []string // span ids
}

// otlpReceiver is an OTLP/HTTP traces endpoint (protobuf) that keeps what it is sent.
type otlpReceiver struct {
	*httptest.Server
	mu    sync.Mutex
	spans []otlpSpan
	conns atomic.Int64
}

func startOTLPReceiver(t *testing.T) *otlpReceiver {
	t.Helper()
	rc := &otlpReceiver{}
	rc.Server = httptest.NewUnstartedServer(http.HandlerFunc(rc.serve))
	rc.Config.ConnState = func(_ net.Conn, st http.ConnState) {
		if st == http.StateNew {
			rc.conns.Add(1)
		}
	}
	rc.Start()
	t.Cleanup(rc.Close)
	return rc
}

func (rc *otlpReceiver) serve(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(io.LimitReader(r.Body, 16<<20))
	if err == nil && r.URL.Path == "/v1/metrics" {
		// The coordinator exports its metrics to the same collector: taken, not examined.
		w.Header().Set("Content-Type", "application/x-protobuf")
		return
	}
	if err != nil || r.URL.Path != "/v1/traces" {
		http.Error(w, "bad request", http.StatusBadRequest)
		return
	}
	var msg coltracepb.ExportTraceServiceRequest
	if err := proto.Unmarshal(body, &msg); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	rc.mu.Lock()
	for _, rs := range msg.GetResourceSpans() {
		for _, ss := range rs.GetScopeSpans() {
			for _, s := range ss.GetSpans() {
				sp := otlpSpan{
					TraceID: hex.EncodeToString(s.GetTraceId()), SpanID: hex.EncodeToString(s.GetSpanId()),
					ParentID: hex.EncodeToString(s.GetParentSpanId()), Name: s.GetName(), Kind: s.GetKind(),
					Attrs: map[string]string{},
				}
				for _, a := range s.GetAttributes() {
					sp.Attrs[a.GetKey()] = anyValue(a.GetValue())
				}
				for _, e := range s.GetEvents() {
					sp.Events = append(sp.Events, e.GetName())
				}
				for _, l := range s.GetLinks() {
					sp.Links = append(sp.Links, hex.EncodeToString(l.GetSpanId()))
				}
				rc.spans = append(rc.spans, sp)
			}
		}
	}
	rc.mu.Unlock()
	out, _ := proto.Marshal(&coltracepb.ExportTraceServiceResponse{})
	w.Header().Set("Content-Type", "application/x-protobuf")
	_, _ = w.Write(out)
}

func anyValue(v interface {
	GetStringValue() string
	GetIntValue() int64
	GetBoolValue() bool
}) string {
	if s := v.GetStringValue(); s != "" {
		return s
	}
	if i := v.GetIntValue(); i != 0 {
		return fmt.Sprint(i)
	}
	return fmt.Sprint(v.GetBoolValue())
}

func (rc *otlpReceiver) all() []otlpSpan {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	return append([]otlpSpan(nil), rc.spans...)
}

// waitSpan waits until a span named name of trace traceID has arrived.
func (rc *otlpReceiver) waitSpan(t *testing.T, traceID, name string) otlpSpan {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		for _, s := range rc.all() {
			if s.TraceID == traceID && s.Name == name {
				return s
			}
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatalf("span %q of trace %s never arrived; got %d spans", name, traceID, len(rc.all()))
	return otlpSpan{}
}

// headerLog records the traceparent values a peer received.
type headerLog struct {
	mu   sync.Mutex
	seen []string
}

func (h *headerLog) add(v string) {
	if v == "" {
		return
	}
	h.mu.Lock()
	h.seen = append(h.seen, v)
	h.mu.Unlock()
}

func (h *headerLog) values() []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]string(nil), h.seen...)
}

// startTracedResearchAgent serves the demo research agent, recording traceparent headers.
func startTracedResearchAgent(t *testing.T) (string, *headerLog) {
	t.Helper()
	log := &headerLog{}
	var inner http.Handler
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		log.add(r.Header.Get("traceparent"))
		inner.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	h, err := demoagent.NewHandler(demoagent.Options{Kind: "research", BaseURL: srv.URL, ChunkDelay: time.Millisecond})
	require.NoError(t, err)
	inner = h
	return srv.URL, log
}

// startFlakyMCP serves an MCP server (streamable HTTP) whose tool "flaky" fails (isError)
// on its first call and succeeds after; it records the traceparent of tools/call requests
// in the HTTP header and in params._meta.
func startFlakyMCP(t *testing.T) (url string, headers, metas *headerLog) {
	t.Helper()
	headers, metas = &headerLog{}, &headerLog{}
	server := mcp.NewServer(&mcp.Implementation{Name: "flaky", Version: "1.0.0"}, nil)
	var calls atomic.Int64
	mcp.AddTool(server, &mcp.Tool{Name: "flaky", Description: "Fails once, then works."},
		func(context.Context, *mcp.CallToolRequest, struct{}) (*mcp.CallToolResult, any, error) {
			if calls.Add(1) == 1 {
				return &mcp.CallToolResult{IsError: true, Content: []mcp.Content{&mcp.TextContent{Text: "disk busy, try again"}}}, nil, nil
			}
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "flaky worked"}}}, nil, nil
		})
	server.AddReceivingMiddleware(func(next mcp.MethodHandler) mcp.MethodHandler {
		return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
			if method == "tools/call" {
				if p, ok := req.GetParams().(*mcp.CallToolParamsRaw); ok && p != nil {
					tp, _ := p.Meta["traceparent"].(string)
					metas.add(tp)
				}
			}
			return next(ctx, method, req)
		}
	})
	h := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return server }, nil)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		if bytes.Contains(body, []byte(`"tools/call"`)) {
			headers.add(r.Header.Get("traceparent"))
		}
		r.Body = io.NopCloser(bytes.NewReader(body))
		h.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	return srv.URL, headers, metas
}

var traceMCPBuild struct {
	once sync.Once
	path string
	err  error
}

// startTraceMCP builds testdata/tracemcp (a stdio MCP server that logs the _meta.traceparent
// of every tools/call) and returns its command line and its log file.
func startTraceMCP(t *testing.T) (command []string, logPath string) {
	t.Helper()
	buildBinaries(t) // creates binDir, which TestMain removes
	traceMCPBuild.once.Do(func() {
		traceMCPBuild.path = filepath.Join(binDir, "tracemcp")
		cmd := exec.Command("go", "build", "-o", traceMCPBuild.path, "./integration/testdata/tracemcp")
		cmd.Dir = repoRoot(t)
		if out, err := cmd.CombinedOutput(); err != nil {
			traceMCPBuild.err = fmt.Errorf("go build ./integration/testdata/tracemcp: %w\n%s", err, out)
		}
	})
	require.NoError(t, traceMCPBuild.err)
	logPath = filepath.Join(t.TempDir(), "tracemcp.log")
	return []string{traceMCPBuild.path, "--log", logPath}, logPath
}

// traceMCPLog returns the traceparent lines tracemcp logged.
func traceMCPLog(t *testing.T, path string) []string {
	t.Helper()
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	return strings.Fields(string(b))
}

// tracedModel scripts the model: delegate to research, call files__flaky (it fails once and
// is called again), call pipe__echo (stdio), then answer.
func tracedModel(req fakellm.Request) fakellm.Reply {
	switch resultsSoFar(req) {
	case 0:
		return callTool("research", `{"prompt":"quantum batteries"}`)
	case 1, 2:
		return callTool("files__flaky", `{}`)
	case 3:
		return callTool("pipe__echo", `{"text":"hi"}`)
	default:
		return fakellm.Reply{Text: modelDoneText}
	}
}

// tracedRun posts one run with an incoming traceparent and returns its events.
func tracedRun(t *testing.T, baseURL, traceparent string) ([]map[string]any, string, string) {
	t.Helper()
	thread, run := newThreadID("trace"), newThreadID("run")
	body, _ := json.Marshal(runInput(thread, run, "research and files"))
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, baseURL+"/agui", bytes.NewReader(body))
	require.NoError(t, err)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "text/event-stream")
	req.Header.Set("traceparent", traceparent)
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)
	evs, err := readSSE(resp.Body, nil)
	require.NoError(t, err)
	require.NotEmpty(t, evs)
	require.Equal(t, "RUN_FINISHED", evs[len(evs)-1]["type"], "events: %v", eventTypes(evs))
	return evs, thread, run
}

// traceIDOf returns the trace id and parent id of a traceparent value.
func traceIDOf(tp string) (traceID, parentID string) {
	parts := strings.Split(tp, "-")
	if len(parts) != 4 {
		return "", ""
	}
	return parts[1], parts[2]
}

const (
	incomingTrace  = "4bf92f3577b34da6a3ce929d0e0e4736"
	incomingParent = "00f067aa0ba902b7"
)

func TestTracingEndToEnd(t *testing.T) {
	t.Setenv("OTEL_BSP_SCHEDULE_DELAY", "100")
	rc := startOTLPReceiver(t)
	agentURL, agentSeen := startTracedResearchAgent(t)
	mcpURL, mcpHeaders, mcpMetas := startFlakyMCP(t)
	pipeCmd, pipeLog := startTraceMCP(t)
	model := fakellm.Start(tracedModel)
	t.Cleanup(model.Close)
	cfg := testConfig{
		LLMURL: model.URL,
		Agents: []agentEntry{{Name: "research", URL: agentURL}},
		MCP:    []mcpServerEntry{{Name: "files", URL: mcpURL}, {Name: "pipe", Command: pipeCmd}},
	}.yaml() + fmt.Sprintf("telemetry:\n  otlp_endpoint: %q\n  service_name: baton-e2e\n", rc.URL)
	base := startCoordinator(t, cfg)
	waitMCPUp(t, base, "files")
	waitMCPUp(t, base, "pipe")

	evs, thread, runID := tracedRun(t, base, "00-"+incomingTrace+"-"+incomingParent+"-01")
	results := toolResultsOf(evs)
	require.Len(t, results, 4, "delegation, failed MCP call, retried MCP call, stdio MCP call: %v", results)
	assert.True(t, strings.HasPrefix(results[0], "[COMPLETED]"), results[0])
	assert.True(t, strings.HasPrefix(results[1], "[RETRY:tool_error]"), results[1])
	assert.True(t, strings.HasPrefix(results[2], "[OK]"), results[2])
	assert.True(t, strings.HasPrefix(results[3], "[OK]"), results[3])

	run := rc.waitSpan(t, incomingTrace, "invoke_agent baton")
	assert.Equal(t, incomingParent, run.ParentID, "the incoming traceparent is the run's parent")
	assert.Equal(t, thread, run.Attrs["gen_ai.conversation.id"])
	assert.Equal(t, runID, run.Attrs["baton.run.id"])
	assert.Equal(t, "completed", run.Attrs["baton.run.outcome"])
	assert.Equal(t, "invoke_agent", run.Attrs["gen_ai.operation.name"])
	assert.Contains(t, run.Events, "baton.failure")

	var spans []otlpSpan
	for _, s := range rc.all() {
		if s.TraceID == incomingTrace {
			spans = append(spans, s)
		}
	}
	named := func(name string) []otlpSpan {
		var out []otlpSpan
		for _, s := range spans {
			if s.Name == name {
				out = append(out, s)
			}
		}
		return out
	}
	chats := named("chat fake-model")
	require.Len(t, chats, 5, "one chat span per model turn")
	for _, c := range chats {
		assert.Equal(t, run.SpanID, c.ParentID)
		assert.Equal(t, tracepb.Span_SPAN_KIND_CLIENT, c.Kind)
		assert.Equal(t, "openai", c.Attrs["gen_ai.provider.name"])
		assert.Equal(t, "fake-model", c.Attrs["gen_ai.request.model"])
		assert.NotEmpty(t, c.Attrs["gen_ai.usage.input_tokens"])
	}

	tools := named("execute_tool research")
	require.Len(t, tools, 1)
	assert.Equal(t, run.SpanID, tools[0].ParentID)
	assert.Equal(t, "COMPLETED", tools[0].Attrs["baton.tag"])
	delegations := named("invoke_agent research")
	require.Len(t, delegations, 1)
	del := delegations[0]
	assert.Equal(t, tools[0].SpanID, del.ParentID)
	assert.Equal(t, tracepb.Span_SPAN_KIND_CLIENT, del.Kind)
	assert.NotEmpty(t, del.Attrs["a2a.task.id"])
	assert.Equal(t, "completed", del.Attrs["a2a.task.state"])

	flaky := named("execute_tool files__flaky")
	require.Len(t, flaky, 2)
	var failed, retried otlpSpan
	for _, s := range flaky {
		assert.Equal(t, run.SpanID, s.ParentID)
		if s.Attrs["baton.tag"] == "RETRY:tool_error" {
			failed = s
		} else {
			retried = s
		}
	}
	require.NotEmpty(t, failed.SpanID, "the failed MCP call's span")
	assert.Equal(t, "tool_error", failed.Attrs["baton.failure.kind"])
	assert.Equal(t, "retry", failed.Attrs["baton.policy.action"])
	assert.Equal(t, "OK", retried.Attrs["baton.tag"])
	assert.Empty(t, retried.Attrs["baton.failure.kind"])

	mcpCalls := named("tools/call flaky")
	require.Len(t, mcpCalls, 2)
	mcpSpanIDs := map[string]bool{}
	for _, s := range mcpCalls {
		mcpSpanIDs[s.SpanID] = true
		assert.Equal(t, tracepb.Span_SPAN_KIND_CLIENT, s.Kind)
		assert.Equal(t, "tools/call", s.Attrs["mcp.method.name"])
		assert.Equal(t, "flaky", s.Attrs["gen_ai.tool.name"])
		assert.Equal(t, "tcp", s.Attrs["network.transport"])
		if s.ParentID == failed.SpanID {
			assert.Equal(t, "tool_error", s.Attrs["error.type"])
		} else {
			assert.Equal(t, retried.SpanID, s.ParentID)
			assert.Empty(t, s.Attrs["error.type"])
		}
	}

	// The peers received the same trace, parented by Baton's client spans.
	var agentTraced bool
	for _, tp := range agentSeen.values() {
		trace, parent := traceIDOf(tp)
		if trace == incomingTrace {
			agentTraced = true
			assert.Equal(t, del.SpanID, parent, "A2A requests carry the delegation span")
		}
	}
	assert.True(t, agentTraced, "the A2A agent received the run's trace: %v", agentSeen.values())
	require.Len(t, mcpHeaders.values(), 2)
	require.Len(t, mcpMetas.values(), 2)
	for _, tp := range append(mcpHeaders.values(), mcpMetas.values()...) {
		trace, parent := traceIDOf(tp)
		assert.Equal(t, incomingTrace, trace)
		assert.True(t, mcpSpanIDs[parent], "MCP requests carry their tools/call span (%s)", tp)
	}
	var modelTraced int
	chatIDs := map[string]bool{}
	for _, c := range chats {
		chatIDs[c.SpanID] = true
	}
	for _, r := range model.Requests() {
		trace, parent := traceIDOf(r.Header.Get("traceparent"))
		if trace == incomingTrace && chatIDs[parent] {
			modelTraced++
		}
	}
	assert.Equal(t, 5, modelTraced, "every model call carries its chat span")

	// stdio: the trace context travels in params._meta only.
	echoes := named("tools/call echo")
	require.Len(t, echoes, 1)
	assert.Equal(t, "pipe", echoes[0].Attrs["network.transport"])
	pipeTool := named("execute_tool pipe__echo")
	require.Len(t, pipeTool, 1)
	assert.Equal(t, pipeTool[0].SpanID, echoes[0].ParentID)
	logged := traceMCPLog(t, pipeLog)
	require.Len(t, logged, 1)
	assert.Equal(t, "00-"+incomingTrace+"-"+echoes[0].SpanID+"-01", logged[0], "stdio requests carry _meta.traceparent")
}

func TestTracingOffExportsNothing(t *testing.T) {
	rc := startOTLPReceiver(t)
	// An endpoint is set, and OTEL_SDK_DISABLED turns tracing off all the same.
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", rc.URL)
	t.Setenv("OTEL_SDK_DISABLED", "true")
	agentURL, agentSeen := startTracedResearchAgent(t)
	mcpURL, _, mcpMetas := startFlakyMCP(t)
	pipeCmd, _ := startTraceMCP(t)
	model := fakellm.Start(tracedModel)
	t.Cleanup(model.Close)
	base := startCoordinator(t, testConfig{
		LLMURL: model.URL,
		Agents: []agentEntry{{Name: "research", URL: agentURL}},
		MCP:    []mcpServerEntry{{Name: "files", URL: mcpURL}, {Name: "pipe", Command: pipeCmd}},
	}.yaml())
	waitMCPUp(t, base, "files")
	waitMCPUp(t, base, "pipe")

	evs, _, _ := tracedRun(t, base, "00-"+incomingTrace+"-"+incomingParent+"-01")
	require.Len(t, toolResultsOf(evs), 4)
	// Without spans of its own, Baton passes the caller's trace context on unchanged.
	var passed bool
	for _, tp := range agentSeen.values() {
		passed = passed || tp == "00-"+incomingTrace+"-"+incomingParent+"-01"
	}
	assert.True(t, passed, "the incoming traceparent reaches the agent: %v", agentSeen.values())
	require.Len(t, mcpMetas.values(), 2)
	for _, tp := range mcpMetas.values() {
		assert.Equal(t, "00-"+incomingTrace+"-"+incomingParent+"-01", tp, "_meta carries the caller's trace context unchanged")
	}
	assert.Empty(t, rc.all(), "tracing off exports nothing")
	assert.Zero(t, rc.conns.Load(), "tracing off opens no connection to the collector")
}

// TestTracingJSPeer: the @a2a-js/sdk peer receives the run's trace context on its A2A
// requests, parented by Baton's delegation span.
func TestTracingJSPeer(t *testing.T) {
	t.Setenv("OTEL_BSP_SCHEDULE_DELAY", "100")
	rc := startOTLPReceiver(t)
	peer, _ := startA2APeer(t, false)
	model := startFakeLLM(t)
	base := startCoordinator(t, coordinatorYAML(model.URL, agentEntry{Name: "jspeer", URL: peer})+
		fmt.Sprintf("telemetry:\n  otlp_endpoint: %q\n", rc.URL))

	const tp = "00-" + incomingTrace + "-" + incomingParent + "-01"
	thread, run := newThreadID("jstrace"), newThreadID("run")
	body, _ := json.Marshal(runInput(thread, run, "jspeer: complete the report"))
	req, err := http.NewRequest(http.MethodPost, base+"/agui", bytes.NewReader(body))
	require.NoError(t, err)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("traceparent", tp)
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	evs, err := readSSE(resp.Body, nil)
	resp.Body.Close()
	require.NoError(t, err)
	results := toolResultsOf(evs)
	require.Len(t, results, 1)
	require.True(t, strings.HasPrefix(results[0], "[COMPLETED]"), results[0])

	del := rc.waitSpan(t, incomingTrace, "invoke_agent jspeer")
	assert.Equal(t, "completed", del.Attrs["a2a.task.state"])
	r, err := http.Get(peer + "/test/log")
	require.NoError(t, err)
	defer r.Body.Close()
	var log struct {
		Traceparents []string `json:"traceparents"`
	}
	require.NoError(t, json.NewDecoder(r.Body).Decode(&log))
	require.NotEmpty(t, log.Traceparents, "the JS peer received a traceparent")
	var ours int
	for _, v := range log.Traceparents {
		if trace, parent := traceIDOf(v); trace == incomingTrace {
			ours++
			assert.Equal(t, del.SpanID, parent, "the peer's parent is Baton's delegation span")
		}
	}
	assert.Positive(t, ours, "the JS peer saw the run's trace id: %v", log.Traceparents)
}

// TestTracingServerEverything: calls to @modelcontextprotocol/server-everything over stdio
// and streamable HTTP get their MCP client spans in the run's trace.
func TestTracingServerEverything(t *testing.T) {
	requirePeers(t)
	t.Setenv("OTEL_BSP_SCHEDULE_DELAY", "100")
	transports := []struct {
		name, network string
		server        func(t *testing.T) mcpServerEntry
	}{
		{"stdio", "pipe", func(t *testing.T) mcpServerEntry {
			node, entry := everythingEntry(t)
			return mcpServerEntry{Name: "everything", Command: []string{node, entry, "stdio"}}
		}},
		{"http", "tcp", func(t *testing.T) mcpServerEntry {
			_, url := startEverythingHTTP(t, 0)
			return mcpServerEntry{Name: "everything", URL: url}
		}},
	}
	for i, tr := range transports {
		t.Run(tr.name, func(t *testing.T) {
			rc := startOTLPReceiver(t)
			model := fakellm.Start(mcpModel)
			t.Cleanup(model.Close)
			coord, _ := startMCPCoordinator(t, mcpCoordinatorYAML(model.URL, "30s", tr.server(t))+
				fmt.Sprintf("telemetry:\n  otlp_endpoint: %q\n", rc.URL))
			waitMCPUp(t, coord, "everything")
			traceID := fmt.Sprintf("%031x%d", 0xabc, i)
			thread, run := newThreadID("evtrace"), newThreadID("run")
			body, _ := json.Marshal(runInput(thread, run, mcpCallMarker+` everything__echo {"message":"traced"}`))
			req, err := http.NewRequest(http.MethodPost, coord+"/agui", bytes.NewReader(body))
			require.NoError(t, err)
			req.Header.Set("Content-Type", "application/json")
			req.Header.Set("traceparent", "00-"+traceID+"-"+incomingParent+"-01")
			resp, err := http.DefaultClient.Do(req)
			require.NoError(t, err)
			evs, err := readSSE(resp.Body, nil)
			resp.Body.Close()
			require.NoError(t, err)
			require.Equal(t, []string{"[OK]\nEcho: traced"}, toolResultsOf(evs))

			call := rc.waitSpan(t, traceID, "tools/call echo")
			tool := rc.waitSpan(t, traceID, "execute_tool everything__echo")
			runSpan := rc.waitSpan(t, traceID, "invoke_agent baton")
			assert.Equal(t, incomingParent, runSpan.ParentID)
			assert.Equal(t, runSpan.SpanID, tool.ParentID)
			assert.Equal(t, tool.SpanID, call.ParentID)
			assert.Equal(t, tracepb.Span_SPAN_KIND_CLIENT, call.Kind)
			assert.Equal(t, tr.network, call.Attrs["network.transport"])
			assert.Equal(t, "tools/call", call.Attrs["mcp.method.name"])
			assert.Equal(t, "everything", call.Attrs["baton.mcp.server"])
			assert.NotEmpty(t, call.Attrs["mcp.protocol.version"])
			assert.Equal(t, "OK", tool.Attrs["baton.tag"])
		})
	}
}

// waitMCPUp waits until /readyz reports the MCP server name up (a stdio server started with
// node may connect after the listener opened).
func waitMCPUp(t *testing.T, base, name string) {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for time.Now().Before(deadline) {
		resp, err := http.Get(base + "/readyz")
		require.NoError(t, err)
		var ready struct {
			Checks struct {
				MCP map[string]struct{ Status string }
			}
		}
		err = json.NewDecoder(resp.Body).Decode(&ready)
		resp.Body.Close()
		require.NoError(t, err)
		if ready.Checks.MCP[name].Status == "up" {
			return
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Fatalf("MCP server %s never came up", name)
}

// TestTracingFlushOnSIGTERM: spans still buffered when the coordinator is stopped are
// exported during its shutdown (the batch delay is set far beyond the test).
func TestTracingFlushOnSIGTERM(t *testing.T) {
	t.Setenv("OTEL_BSP_SCHEDULE_DELAY", "600000")
	rc := startOTLPReceiver(t)
	model := fakellm.Start(mcpModel)
	t.Cleanup(model.Close)
	coord, p := startMCPCoordinator(t, mcpCoordinatorYAML(model.URL, "30s")+
		fmt.Sprintf("telemetry:\n  otlp_endpoint: %q\n", rc.URL))
	const traceID = "0af7651916cd43dd8448eb211c80319c"
	body, _ := json.Marshal(runInput(newThreadID("flush"), newThreadID("run"), "hello"))
	req, err := http.NewRequest(http.MethodPost, coord+"/agui", bytes.NewReader(body))
	require.NoError(t, err)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("traceparent", "00-"+traceID+"-"+incomingParent+"-01")
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	evs, err := readSSE(resp.Body, nil)
	resp.Body.Close()
	require.NoError(t, err)
	require.Equal(t, "RUN_FINISHED", evs[len(evs)-1]["type"])
	require.Empty(t, rc.all(), "nothing exported before the batch delay or the shutdown")

	require.Equal(t, 0, p.Stop(), "the coordinator exits cleanly on SIGTERM")
	var names []string
	for _, s := range rc.all() {
		if s.TraceID == traceID {
			names = append(names, s.Name)
		}
	}
	assert.Contains(t, names, "invoke_agent baton", "the run span was flushed at shutdown")
	assert.Contains(t, names, "chat fake-model")
}
