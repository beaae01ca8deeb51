package integration

// Harness of the kill -9 step suite (killsteps_test.go): an MCP server that counts every
// call per tool and item and can hold a call until its caller dies, a proxy in front of the
// A2A peer that holds one replica's CancelTask, and the checks every case shares.

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
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// stepsMCP is an MCP server (go-sdk, stateless streamable HTTP) with three tools that count
// their calls per item: charge (not annotated: not idempotent), lookup (read-only and
// idempotent) and refund (not annotated; the suite puts it behind approvals). A call of an
// item that the test holds waits until its request ends (its caller died) or the hold is
// released; later calls of the item answer at once.
type stepsMCP struct {
	URL string

	mu      sync.Mutex
	calls   map[string]int           // "tool/item" -> calls received
	holds   map[string]chan struct{} // "tool/item" -> closed when released
	changed chan struct{}            // closed and replaced at every call
}

func startStepsMCP(t *testing.T) *stepsMCP {
	t.Helper()
	m := &stepsMCP{calls: map[string]int{}, holds: map[string]chan struct{}{}, changed: make(chan struct{})}
	s := mcp.NewServer(&mcp.Implementation{Name: "pay", Version: "0.1.0"}, nil)
	handler := func(tool string) func(context.Context, *mcp.CallToolRequest, slowIn) (*mcp.CallToolResult, slowOut, error) {
		return func(ctx context.Context, _ *mcp.CallToolRequest, in slowIn) (*mcp.CallToolResult, slowOut, error) {
			key := tool + "/" + in.Item
			m.mu.Lock()
			m.calls[key]++
			n := m.calls[key]
			hold := m.holds[key]
			close(m.changed)
			m.changed = make(chan struct{})
			m.mu.Unlock()
			if n == 1 && hold != nil {
				select {
				case <-ctx.Done():
					return nil, slowOut{}, ctx.Err()
				case <-hold:
				}
			}
			return nil, slowOut{Said: fmt.Sprintf("%s %s (#%d)", tool, in.Item, n)}, nil
		}
	}
	mcp.AddTool(s, &mcp.Tool{Name: "charge", Description: "Charge the card (not idempotent)."}, handler("charge"))
	mcp.AddTool(s, &mcp.Tool{Name: "refund", Description: "Refund the card (not idempotent)."}, handler("refund"))
	mcp.AddTool(s, &mcp.Tool{Name: "lookup", Description: "Look an order up.",
		Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true, IdempotentHint: true}}, handler("lookup"))
	mux := http.NewServeMux()
	mux.Handle("/mcp", mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return s },
		&mcp.StreamableHTTPOptions{Stateless: true, PropagateRequestCancellation: true}))
	srv := httptest.NewServer(mux)
	t.Cleanup(func() {
		m.releaseAll()
		srv.CloseClientConnections()
		srv.Close()
	})
	m.URL = srv.URL + "/mcp"
	return m
}

// hold makes the first call of tool for item wait (see stepsMCP).
func (m *stepsMCP) hold(tool, item string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.holds[tool+"/"+item] = make(chan struct{})
}

// release lets a held call of tool for item answer.
func (m *stepsMCP) release(tool, item string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if c := m.holds[tool+"/"+item]; c != nil {
		select {
		case <-c:
		default:
			close(c)
		}
	}
}

func (m *stepsMCP) releaseAll() {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, c := range m.holds {
		select {
		case <-c:
		default:
			close(c)
		}
	}
}

// count is how many calls of tool for item the server received.
func (m *stepsMCP) count(tool, item string) int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.calls[tool+"/"+item]
}

// awaitCall waits until the server has received a call of tool for item.
func (m *stepsMCP) awaitCall(t *testing.T, tool, item string, within time.Duration) {
	t.Helper()
	timeout := time.After(within)
	for {
		m.mu.Lock()
		n, changed := m.calls[tool+"/"+item], m.changed
		m.mu.Unlock()
		if n > 0 {
			return
		}
		select {
		case <-changed:
		case <-timeout:
			t.Fatalf("the MCP server never received %s of %s", tool, item)
		}
	}
}

// cancelHolder is a reverse proxy in front of the A2A peer for one replica: it rewrites the
// peer's agent card so that the replica's requests go through it, and holds every CancelTask
// it relays (JSON-RPC CancelTask or tasks/cancel, REST …:cancel) until its sender goes away,
// without sending it on: a cancel lost with the replica that was sending it.
type cancelHolder struct {
	URL  string
	seen chan struct{} // closed at the first CancelTask
	once sync.Once
}

var cancelMethod = regexp.MustCompile(`"method"\s*:\s*"(CancelTask|tasks/cancel)"`)

func startCancelHolder(t *testing.T, peer string) *cancelHolder {
	t.Helper()
	target, err := url.Parse(peer)
	require.NoError(t, err)
	h := &cancelHolder{seen: make(chan struct{})}
	rp := &httputil.ReverseProxy{FlushInterval: -1,
		Rewrite: func(pr *httputil.ProxyRequest) {
			pr.SetURL(target)
			pr.Out.URL.Path = strings.TrimPrefix(pr.In.URL.Path, "/via")
			pr.Out.Header.Del("Accept-Encoding")
		},
		ModifyResponse: func(resp *http.Response) error {
			if !strings.Contains(resp.Request.URL.Path, "agent-card") {
				return nil
			}
			body, err := io.ReadAll(resp.Body)
			if err != nil {
				return err
			}
			_ = resp.Body.Close()
			body = bytes.ReplaceAll(body, []byte(peer), []byte(h.URL))
			resp.Body = io.NopCloser(bytes.NewReader(body))
			resp.ContentLength = int64(len(body))
			resp.Header.Set("Content-Length", strconv.Itoa(len(body)))
			return nil
		}}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(io.LimitReader(r.Body, 4<<20))
		if err != nil {
			http.Error(w, "read", http.StatusBadRequest)
			return
		}
		if cancelMethod.Match(body) || strings.HasSuffix(r.URL.Path, ":cancel") {
			h.once.Do(func() { close(h.seen) })
			<-r.Context().Done()
			return
		}
		r.Body = io.NopCloser(bytes.NewReader(body))
		rp.ServeHTTP(w, r)
	}))
	t.Cleanup(func() {
		srv.CloseClientConnections()
		srv.Close()
	})
	h.URL = srv.URL + "/via"
	return h
}

// stepsPeerLog is what the JS peer recorded (peerCalls) with its follow-ups per task.
type stepsPeerLog struct {
	peerCalls
	FollowUps map[string]int `json:"followUps"`
}

func stepsPeer(t testing.TB, base string) stepsPeerLog {
	t.Helper()
	resp, err := http.Get(base + "/test/log")
	require.NoError(t, err)
	defer resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)
	var l stepsPeerLog
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&l))
	return l
}

// terminalTask reports whether an A2A task state is terminal.
func terminalTask(state string) bool {
	switch state {
	case "TASK_STATE_COMPLETED", "TASK_STATE_CANCELED", "TASK_STATE_FAILED", "TASK_STATE_REJECTED":
		return true
	}
	return false
}

// awaitTasksEnded waits until every task of tasks is in a terminal state at the peer and
// returns the peer's log.
func awaitTasksEnded(t *testing.T, peer string, tasks []string, within time.Duration) stepsPeerLog {
	t.Helper()
	deadline := time.Now().Add(within)
	for {
		l := stepsPeer(t, peer)
		open := []string{}
		for _, id := range tasks {
			if !terminalTask(l.Tasks[id]) {
				open = append(open, id+"="+l.Tasks[id])
			}
		}
		if len(open) == 0 {
			return l
		}
		if time.Now().After(deadline) {
			t.Fatalf("tasks left running at the peer (orphaned): %v", open)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// replayRun reads run's whole log through base (GET …/events from the start) to its
// terminal event.
func replayRun(t *testing.T, base, thread, run string, within time.Duration) []takeoverFrame {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), within)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, base+"/agui/threads/"+thread+"/runs/"+run+"/events", nil)
	require.NoError(t, err)
	req.Header.Set("Last-Event-ID", "0")
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)
	s := newTakeoverStream(resp.Body)
	var out []takeoverFrame
	for {
		f, ok := s.next(t)
		if !ok {
			break
		}
		out = append(out, f)
		if typ := f.Event["type"]; typ == "RUN_FINISHED" || typ == "RUN_ERROR" {
			break
		}
	}
	require.NoError(t, ctx.Err(), "the run did not end within %v", within)
	return out
}

// journalStepView is one step as GET …/journal shows it.
type journalStepView struct {
	Seq     int64  `json:"seq"`
	RunID   string `json:"runId"`
	Kind    string `json:"kind"`
	Target  string `json:"target"`
	Outcome string `json:"outcome"`
	Tag     string `json:"tag"`
	InDoubt bool   `json:"inDoubt"`
	Replica string `json:"replica"`
	Detail  string `json:"detail"`
}

func (s journalStepView) String() string {
	return fmt.Sprintf("%d %s %s %s %s doubt=%v", s.Seq, s.RunID, s.Kind, s.Target, s.Outcome, s.InDoubt)
}

func journalOf(t *testing.T, base, thread string) []journalStepView {
	t.Helper()
	resp, err := http.Get(base + "/agui/threads/" + thread + "/journal")
	require.NoError(t, err)
	defer resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)
	var out struct {
		Steps []journalStepView `json:"steps"`
	}
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&out))
	return out.Steps
}

// checkLog asserts what every case promises of a run's log read back from the start: dense
// ids from 1, exactly one terminal event (the last), and at most one TOOL_CALL_RESULT per
// call, each after its call's TOOL_CALL_START unless earlier names it (a call of the run
// that a resume answers); it returns the results by call id and the terminal event.
func checkLog(t *testing.T, frames []takeoverFrame, earlier ...string) (results map[string][]string, terminal map[string]any) {
	t.Helper()
	require.NotEmpty(t, frames)
	assertDense(t, frames)
	results = map[string][]string{}
	starts := map[string]bool{}
	for _, id := range earlier {
		starts[id] = true
	}
	terminals := 0
	for _, f := range frames {
		switch f.Event["type"] {
		case "TOOL_CALL_START":
			id, _ := f.Event["toolCallId"].(string)
			starts[id] = true
		case "TOOL_CALL_RESULT":
			id, _ := f.Event["toolCallId"].(string)
			c, _ := f.Event["content"].(string)
			results[id] = append(results[id], c)
		case "RUN_FINISHED", "RUN_ERROR":
			terminals++
		}
	}
	assert.Equal(t, 1, terminals, "one terminal event: %v", frameTypes(frames))
	for id, rs := range results {
		assert.Len(t, rs, 1, "TOOL_CALL_RESULTs of %s: %v", id, rs)
		assert.True(t, starts[id], "result of %s without a TOOL_CALL_START", id)
	}
	return results, frames[len(frames)-1].Event
}

// checkJournal asserts that the run's journal shows a takeover that continued it and, when
// kind is set, a step of kind that the takeover marked in doubt; no step is left pending.
func checkJournal(t *testing.T, base, thread, run, kind string) []journalStepView {
	t.Helper()
	steps := journalOf(t, base, thread)
	takeover, doubt := false, false
	for _, s := range steps {
		if s.RunID != run {
			continue
		}
		takeover = takeover || (s.Kind == "takeover" && s.Outcome == "ok")
		doubt = doubt || (s.Kind == kind && s.InDoubt && s.Outcome == "in_doubt")
		assert.NotEqual(t, "pending", s.Outcome, "a step left pending: %v", s)
	}
	assert.True(t, takeover, "the journal shows the takeover: %v", steps)
	if kind != "" {
		assert.True(t, doubt, "the journal shows the %s step in doubt: %v", kind, steps)
	}
	return steps
}
