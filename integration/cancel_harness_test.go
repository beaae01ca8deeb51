package integration

// Harness of the cancellation tests: a coordinator process whose log the tests
// read, a fake model that also calls MCP tools, a recorder for what an MCP server receives,
// the A2A peer's task log, and a Go client for the demo agent.
//
// Design note: the coordinator has no debug endpoint, so what it cancelled is read from its
// log ("cancelled downstream" and "run ended" lines, slog text format, one run per thread),
// and what the other side saw is read from the other side: the JS peer's /test/log, the demo
// agent's GetTask, the bytes an MCP server got on stdin (a tee in front of the server) or
// over HTTP (a recording reverse proxy), and demomcp's OnCancelled hook.

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	sdk "github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/a2aproject/a2a-go/v2/a2aclient"
	"github.com/a2aproject/a2a-go/v2/a2aclient/agentcard"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/baton-dev/baton/internal/testutil/fakellm"
	"github.com/baton-dev/baton/llm"
)

// eventualWait bounds the waits for an eventual state (a task ending, a log line): generous,
// because the machine is shared and Node is slow to answer under load.
const eventualWait = 20 * time.Second

// mcpEntry is one mcp_servers[] item of a coordinator config: Command (stdio) or URL.
type mcpEntry = mcpServerEntry

// cancelConfig is a coordinator config for the cancellation tests.
type cancelConfig struct {
	LLMURL string
	Agents []agentEntry
	MCP    []mcpEntry
	// Grace is server.shutdown_grace; "2s" unless set.
	Grace string
	// OnDisconnect and ReconnectGrace are server.on_disconnect and server.reconnect_grace.
	OnDisconnect, ReconnectGrace string
}

// yaml renders the config (DESIGN §4) with an in-memory store and no listen key.
func (c cancelConfig) yaml() string {
	return testConfig{LLMURL: c.LLMURL, Model: "fake", Grace: orDefault(c.Grace, "2s"),
		Agents: c.Agents, MCP: c.MCP, ToolTimeout: "60s", OnDisconnect: c.OnDisconnect, ReconnectGrace: c.ReconnectGrace}.yaml()
}

// baton is a coordinator process started by startBatonForCancel.
type baton struct {
	URL string
	P   *proc
}

// startBatonForCancel starts the coordinator binary with cfg on a free port and returns it
// with its process, whose log the tests read. In Cleanup it is stopped with SIGTERM and must
// exit 0 (a test that stops it itself has already checked that).
func startBatonForCancel(t testing.TB, cfg cancelConfig) *baton {
	t.Helper()
	bin, ok := buildBinaries(t)["coordinator"]
	if !ok {
		t.Fatal("cmd/coordinator has no Go files to build")
	}
	var err error
	for attempt := 0; attempt < 3; attempt++ { // freePort can race with another listener
		text := "listen: 127.0.0.1:" + strconv.Itoa(freePort(t)) + "\n" + cfg.yaml()
		path := filepath.Join(t.TempDir(), "baton.yaml")
		require.NoError(t, os.WriteFile(path, []byte(text), 0o600))
		var p *proc
		p, err = startProcErr(t, "coordinator", []string{bin, "--config", path},
			[]string{llmKeyEnv + "=fake-key"}, readyOnLine(`Baton coordinator listening on (http://\S+)`))
		if err != nil {
			continue
		}
		t.Cleanup(func() {
			if code := p.Stop(); code != 0 {
				t.Errorf("coordinator exited with code %d on SIGTERM, want 0", code)
			}
		})
		if len(cfg.MCP) > 0 {
			waitMCPSettled(t, p.Match[1])
		}
		return &baton{URL: p.Match[1], P: p}
	}
	t.Fatalf("starting the coordinator: %v\nconfig:\n%s", err, cfg.yaml())
	return nil
}

// logRecord is one slog text line: its keys and (unquoted) values.
type logRecord map[string]string

var logPair = regexp.MustCompile(`([A-Za-z_][A-Za-z0-9_.]*)=("(?:[^"\\]|\\.)*"|\S*)`)

// parseLogLine parses one line of slog's text handler.
func parseLogLine(line string) logRecord {
	rec := logRecord{}
	for _, m := range logPair.FindAllStringSubmatch(line, -1) {
		v := m[2]
		if strings.HasPrefix(v, `"`) {
			if u, err := strconv.Unquote(v); err == nil {
				v = u
			}
		}
		rec[m[1]] = v
	}
	return rec
}

// logRecords returns the coordinator's log records with message msg, for the thread (any
// thread when threadID is "").
func (b *baton) logRecords(msg, threadID string) []logRecord {
	_, stderr := b.P.Logs()
	var out []logRecord
	for _, line := range strings.Split(stderr, "\n") {
		if !strings.Contains(line, `msg="`+msg+`"`) && !strings.Contains(line, "msg="+msg+" ") {
			continue
		}
		rec := parseLogLine(line)
		if rec["msg"] != msg || threadID != "" && rec["thread_id"] != threadID {
			continue
		}
		out = append(out, rec)
	}
	return out
}

// slowTextPrefix makes cancelModel answer with text streamed over about 10 s.
const slowTextPrefix = "slow text"

// cancelModelSeq numbers the fake model's tool calls (ids must be unique within a stream).
var cancelModelSeq atomic.Int64

// cancelModel scripts the fake model from the user's text "<tool>: <rest>": a sub-agent tool
// is called with {"prompt": rest}, an MCP tool ("<server>__<tool>") with rest as its JSON
// arguments ("<tool>,<tool>: <rest>" calls several in one turn); once the tool results are
// in, it answers "done". A text that starts with
// slowTextPrefix gets a long text answer streamed slowly; anything else gets plain text,
// which ends the run at once.
func cancelModel(req fakellm.Request) fakellm.Reply {
	var user string
	for _, m := range req.Messages {
		if m.Role == "user" {
			user = m.Content
		}
	}
	if strings.HasPrefix(user, slowTextPrefix) { // a long answer, streamed slowly
		return fakellm.Reply{Text: strings.Repeat("word ", 100), Delay: 100 * time.Millisecond}
	}
	tool, rest, ok := strings.Cut(user, ":")
	if !ok {
		return fakellm.Reply{Text: "fake model: nothing to call"}
	}
	tool, rest = strings.TrimSpace(tool), strings.TrimSpace(rest)
	if req.Last().Role == "tool" {
		return fakellm.Reply{Text: modelDoneText}
	}
	var calls []llm.ToolCall
	for _, name := range strings.Split(tool, ",") { // "a,b: …" calls both in one turn
		offered := false
		for _, n := range req.ToolNames() {
			offered = offered || n == name
		}
		if !offered {
			return fakellm.Reply{Text: fmt.Sprintf("fake model: tool %q is not offered (tools: %v)", name, req.ToolNames())}
		}
		args := rest
		if !strings.Contains(name, "__") {
			b, _ := json.Marshal(map[string]string{"prompt": rest})
			args = string(b)
		}
		calls = append(calls, llm.ToolCall{ID: fmt.Sprintf("call_c%d", cancelModelSeq.Add(1)), Name: name, Arguments: args})
	}
	return fakellm.Reply{ToolCalls: calls}
}

// startCancelLLM starts the fake model with cancelModel; it is closed in Cleanup.
func startCancelLLM(t testing.TB) *fakellm.Server {
	t.Helper()
	s := fakellm.Start(cancelModel)
	t.Cleanup(s.Close)
	return s
}

// peerTasks returns the JS peer's tasks (id → last state) and its CancelTask log as a set.
// Errors are reported to t without stopping the goroutine, so it can be used inside
// EventuallyWithT (t is then the *assert.CollectT).
func peerTasks(t assert.TestingT, peer string) (tasks map[string]string, cancelled map[string]bool) {
	if h, ok := t.(interface{ Helper() }); ok {
		h.Helper()
	}
	cancelled = map[string]bool{}
	resp, err := http.Get(peer + "/test/log")
	if err != nil {
		t.Errorf("peer log: %v", err)
		return nil, cancelled
	}
	defer resp.Body.Close()
	var log struct {
		Cancels []string          `json:"cancels"`
		Tasks   map[string]string `json:"tasks"`
	}
	if resp.StatusCode != http.StatusOK {
		t.Errorf("peer log: HTTP %d", resp.StatusCode)
		return nil, cancelled
	}
	if err := json.NewDecoder(resp.Body).Decode(&log); err != nil {
		t.Errorf("peer log: %v", err)
		return nil, cancelled
	}
	for _, id := range log.Cancels {
		cancelled[id] = true
	}
	return log.Tasks, cancelled
}

// newKeys returns the keys of now that are not in before.
func newKeys(before, now map[string]string) []string {
	var out []string
	for k := range now {
		if _, old := before[k]; !old {
			out = append(out, k)
		}
	}
	return out
}

// demoTaskState asks the demo agent at base for the state of taskID with an a2a-go client.
func demoTaskState(ctx context.Context, base, taskID string) (sdk.TaskState, error) {
	tr := &http.Transport{}
	defer tr.CloseIdleConnections()
	hc := &http.Client{Transport: tr, Timeout: 10 * time.Second}
	card, err := agentcard.NewResolver(hc).Resolve(ctx, base)
	if err != nil {
		return "", fmt.Errorf("agent card: %w", err)
	}
	c, err := a2aclient.NewFromCard(ctx, card, a2aclient.WithJSONRPCTransport(hc))
	if err != nil {
		return "", fmt.Errorf("a2a client: %w", err)
	}
	defer c.Destroy()
	task, err := c.GetTask(ctx, &sdk.GetTaskRequest{ID: sdk.TaskID(taskID)})
	if err != nil {
		return "", fmt.Errorf("GetTask %s: %w", taskID, err)
	}
	return task.Status.State, nil
}

// teeCommand writes a shell script that copies its stdin to log before handing it to argv,
// so a test can see every message a stdio MCP server received. It returns the script's argv.
func teeCommand(t testing.TB, log string, argv ...string) []string {
	t.Helper()
	q := make([]string, len(argv))
	for i, a := range argv {
		q[i] = "'" + strings.ReplaceAll(a, "'", `'\''`) + "'"
	}
	script := filepath.Join(t.TempDir(), "tee-stdin.sh")
	body := fmt.Sprintf("#!/bin/sh\ntee -a '%s' | exec %s\n", log, strings.Join(q, " "))
	require.NoError(t, os.WriteFile(script, []byte(body), 0o755))
	return []string{"/bin/sh", script}
}

// jsonRPCMessages decodes newline-delimited JSON-RPC messages (a stdio log, or the request
// bodies an HTTP proxy recorded), skipping anything that is not JSON.
func jsonRPCMessages(raw []byte) []map[string]any {
	var out []map[string]any
	for _, line := range bytes.Split(raw, []byte("\n")) {
		line = bytes.TrimSpace(line)
		if len(line) == 0 {
			continue
		}
		var m map[string]any
		if json.Unmarshal(line, &m) == nil {
			out = append(out, m)
			continue
		}
		var batch []map[string]any
		if json.Unmarshal(line, &batch) == nil {
			out = append(out, batch...)
		}
	}
	return out
}

// cancelledCalls returns, for every tools/call of tool among msgs, whether a
// notifications/cancelled for its request id follows it.
func cancelledCalls(msgs []map[string]any, tool string) (calls int, cancelled int) {
	ids := map[string]bool{}
	for _, m := range msgs {
		params, _ := m["params"].(map[string]any)
		switch m["method"] {
		case "tools/call":
			if params["name"] == tool {
				calls++
				ids[fmt.Sprint(m["id"])] = true
			}
		case "notifications/cancelled":
			if id := fmt.Sprint(params["requestId"]); ids[id] {
				cancelled++
				delete(ids, id)
			}
		}
	}
	return calls, cancelled
}

// recordingProxy is a reverse proxy in front of an HTTP MCP server that keeps every request
// body it forwards, newline-separated.
type recordingProxy struct {
	URL string

	mu     sync.Mutex
	bodies bytes.Buffer
}

// startRecordingProxy proxies to target (scheme://host) and is closed in Cleanup.
func startRecordingProxy(t testing.TB, target string) *recordingProxy {
	t.Helper()
	u, err := url.Parse(target)
	require.NoError(t, err)
	rp := &recordingProxy{}
	proxy := httputil.NewSingleHostReverseProxy(u)
	proxy.FlushInterval = -1 // SSE: pass every byte on at once
	tr := &http.Transport{}
	proxy.Transport = tr
	// A body is recorded once the server has answered it: a request the proxy could not
	// deliver (its 502, on a loaded machine) never reached the server, and the client
	// sends it again; counting it made one call look like two.
	proxy.ModifyResponse = func(resp *http.Response) error {
		if b, ok := resp.Request.Context().Value(recordedBody{}).([]byte); ok {
			rp.mu.Lock()
			rp.bodies.Write(b)
			rp.bodies.WriteByte('\n')
			rp.mu.Unlock()
		}
		return nil
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Body != nil {
			b, _ := io.ReadAll(r.Body)
			r.Body.Close()
			r = r.WithContext(context.WithValue(r.Context(), recordedBody{}, b))
			r.Body = io.NopCloser(bytes.NewReader(b))
		}
		proxy.ServeHTTP(w, r)
	}))
	t.Cleanup(func() {
		srv.CloseClientConnections()
		srv.Close()
		tr.CloseIdleConnections()
	})
	rp.URL = srv.URL
	return rp
}

// recordedBody is the context key of a request's body, for the proxy's ModifyResponse.
type recordedBody struct{}

// Messages returns the JSON-RPC messages the proxy forwarded so far (those the server
// answered).
func (rp *recordingProxy) Messages() []map[string]any {
	rp.mu.Lock()
	defer rp.mu.Unlock()
	return jsonRPCMessages(rp.bodies.Bytes())
}

// dropWatch is a reverse proxy in front of the fake model that counts the requests whose
// client went away before the response was complete.
type dropWatch struct {
	URL     string
	dropped atomic.Int64
}

// startDropWatch proxies to target (scheme://host) and is closed in Cleanup.
func startDropWatch(t testing.TB, target string) *dropWatch {
	t.Helper()
	u, err := url.Parse(target)
	require.NoError(t, err)
	dw := &dropWatch{}
	proxy := httputil.NewSingleHostReverseProxy(u)
	proxy.FlushInterval = -1
	tr := &http.Transport{}
	proxy.Transport = tr
	proxy.ErrorHandler = func(w http.ResponseWriter, r *http.Request, err error) {} // a dropped client is counted below
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		// ReverseProxy panics with http.ErrAbortHandler when the response cannot be copied
		// to a client that went away.
		bufferBody(r)
		defer func() {
			p := recover()
			if p != nil || r.Context().Err() != nil {
				dw.dropped.Add(1)
			}
			if p != nil {
				panic(p)
			}
		}()
		proxy.ServeHTTP(w, r)
	}))
	t.Cleanup(func() {
		srv.CloseClientConnections()
		srv.Close()
		tr.CloseIdleConnections()
	})
	dw.URL = srv.URL
	return dw
}

// bufferBody reads r's body into memory before it is proxied. ReverseProxy copies the
// body to the upstream while it already relays the upstream's response, and net/http's
// HTTP/1 server ends a request body once the response has begun: the transport's last
// read of it then fails, and it closes the upstream connection mid-response (the client
// sees an unexpected EOF that no component under test caused).
func bufferBody(r *http.Request) {
	if r.Body == nil || r.Body == http.NoBody {
		return
	}
	b, err := io.ReadAll(r.Body)
	r.Body.Close()
	if err != nil {
		b = nil
	}
	r.Body = io.NopCloser(bytes.NewReader(b))
}

// Dropped returns how many requests lost their client before the response was complete.
func (dw *dropWatch) Dropped() int64 { return dw.dropped.Load() }
