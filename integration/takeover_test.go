package integration

// Takeover: a run whose replica dies, or hands it off at shutdown, is continued
// by another replica from its checkpoint; the sub-agent's task is followed by id
// (SubscribeToTask, GetTask), never sent again, and a client that reconnects to the run
// follows it to its end. A run that cannot continue is ended and its tasks are cancelled.
// One topology (PostgreSQL, the JS peer, the fake model, two coordinators) serves the
// subtests; the single-process SQLite case has its own coordinator.

import (
	"bufio"
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	_ "github.com/jackc/pgx/v5/stdlib"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/baton-dev/baton/internal/testutil/fakellm"
	"github.com/baton-dev/baton/internal/testutil/pgtest"
	"github.com/baton-dev/baton/llm"
)

// takeoverFrame is one SSE frame: its id and its AG-UI event.
type takeoverFrame struct {
	ID    int64
	Event map[string]any
}

// takeoverStream reads SSE frames from a response body.
type takeoverStream struct {
	sc *bufio.Scanner
	id int64
}

func newTakeoverStream(body io.Reader) *takeoverStream {
	sc := bufio.NewScanner(body)
	sc.Buffer(make([]byte, 0, 64<<10), 16<<20)
	return &takeoverStream{sc: sc}
}

// next returns the next frame, or false at the end of the stream.
func (s *takeoverStream) next(t testing.TB) (takeoverFrame, bool) {
	t.Helper()
	for s.sc.Scan() {
		line := s.sc.Text()
		if v, ok := strings.CutPrefix(line, "id: "); ok {
			id, err := strconv.ParseInt(v, 10, 64)
			require.NoError(t, err)
			s.id = id
			continue
		}
		data, ok := strings.CutPrefix(line, "data: ")
		if !ok {
			continue
		}
		var ev map[string]any
		require.NoError(t, json.Unmarshal([]byte(data), &ev))
		return takeoverFrame{ID: s.id, Event: ev}, true
	}
	return takeoverFrame{}, false
}

// peerCalls is what the JS peer recorded: sends (first word, "<task>:" for a follow-up),
// subscriptions, reads and cancels by task id, and each task's last state.
type peerCalls struct {
	Sends      []string          `json:"sends"`
	Subscribes []string          `json:"subscribes"`
	Gets       []string          `json:"gets"`
	Cancels    []string          `json:"cancels"`
	Tasks      map[string]string `json:"tasks"`
}

func peerCallLog(t testing.TB, baseURL string) peerCalls {
	t.Helper()
	resp, err := http.Get(baseURL + "/test/log")
	require.NoError(t, err)
	defer resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)
	var pc peerCalls
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&pc))
	return pc
}

// startSlowDelegation posts "peer: slow work" on a new thread to base and reads its live
// stream until the sub-agent has streamed steps progress chunks (its task exists at the
// peer and is recorded in the store). It returns the thread, the stream and the last id.
func startSlowDelegation(t testing.TB, base, prefix string, steps int) (thread string, live *http.Response, s *takeoverStream, lastID int64) {
	t.Helper()
	thread = newThreadID(prefix)
	body := `{"threadId":"` + thread + `","runId":"r1","protocolVersion":"1.0","messages":[{"id":"u1","role":"user","content":"peer: slow work"}]}`
	live, err := postAGUI(context.Background(), base, []byte(body))
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, live.StatusCode)
	s = newTakeoverStream(live.Body)
	seen := 0
	for seen < steps {
		f, ok := s.next(t)
		require.True(t, ok, "the live stream ended before the sub-agent's progress")
		lastID = f.ID
		if f.Event["type"] == "TEXT_MESSAGE_CONTENT" && f.Event["subagentRunId"] != nil {
			seen++
		}
	}
	return thread, live, s, lastID
}

// followRun reconnects to a run through base after lastID and reads it to its terminal
// event (bounded by the test's deadline for the run).
func followRun(t *testing.T, base, thread string, lastID int64, within time.Duration) []takeoverFrame {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), within)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, base+"/agui/threads/"+thread+"/runs/r1/events", nil)
	require.NoError(t, err)
	req.Header.Set("Last-Event-ID", strconv.FormatInt(lastID, 10))
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
	require.NoError(t, ctx.Err(), "the run did not end within %v of the reconnect", within)
	return out
}

// officialReplay runs the official AG-UI client (v1) on the run's stream after lastID
// through base: a front relays the client's POST to GET …/events with the Last-Event-ID.
func officialReplay(t *testing.T, base, thread string, lastID int64) aguiResult {
	t.Helper()
	front := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		greq, _ := http.NewRequestWithContext(r.Context(), http.MethodGet, base+"/agui/threads/"+thread+"/runs/r1/events", nil)
		greq.Header.Set("Last-Event-ID", strconv.FormatInt(lastID, 10))
		resp, err := http.DefaultClient.Do(greq)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadGateway)
			return
		}
		defer resp.Body.Close()
		w.Header().Set("Content-Type", resp.Header.Get("Content-Type"))
		w.WriteHeader(resp.StatusCode)
		_, _ = io.Copy(w, resp.Body)
	}))
	defer front.Close()
	return runAGUIClient(t, "v1", front.URL, map[string]any{"threadId": thread, "runId": "r1", "messages": []any{}})
}

func frameTypes(fs []takeoverFrame) []string {
	out := make([]string, len(fs))
	for i, f := range fs {
		out[i], _ = f.Event["type"].(string)
	}
	return out
}

// newTasks returns the peer's tasks that after knows and before did not (the stream does
// not carry task ids, so a subtest finds its own tasks this way).
func newTasks(before, after peerCalls) []string {
	var out []string
	for id := range after.Tasks {
		if _, old := before.Tasks[id]; !old {
			out = append(out, id)
		}
	}
	slices.Sort(out)
	return out
}

func TestTakeover(t *testing.T) {
	t.Parallel()
	// Replicas restarted inside a subtest belong to the whole test (a subtest's Cleanup
	// would stop them when it ends).
	top := t
	requirePeers(t)
	dsn := pgtest.DSN(t)
	peer := startA2APeerEnv(t)
	model := startFakeLLM(t)
	base := testConfig{LLMURL: model.URL, Agents: []agentEntry{{Name: "peer", URL: peer}}, Store: dsn, Grace: "1s"}.yaml()
	// A short lease for the kill; the hand-off must not need it (an hour).
	killCfg := base + "replication:\n  heartbeat: 200ms\n  lease: 1s\n"
	a := startHITLCoordinator(t, killCfg)
	b := startHITLCoordinator(t, killCfg)

	t.Run("killed replica's run continues on the survivor", func(t *testing.T) {
		before := peerCallLog(t, peer)
		thread, live, _, lastID := startSlowDelegation(t, a.URL, "takeover", 2)
		a.kill(t)
		live.Body.Close()
		killed := time.Now()

		frames := followRun(t, b.URL, thread, lastID, 60*time.Second)
		typs := frameTypes(frames)
		require.NotEmpty(t, typs)
		assert.Equal(t, "RUN_STARTED", typs[0], "the reconnect restates the run's start")
		last := frames[len(frames)-1].Event
		require.Equal(t, "RUN_FINISHED", last["type"], "the run ends normally: %v", typs)
		assert.Equal(t, map[string]any{"type": "success"}, last["outcome"])
		assert.Contains(t, typs, "SUBAGENT_FINISHED", "the sub-agent's attribution ends on the survivor")
		assert.Contains(t, typs, "TOOL_CALL_RESULT")
		var continued []takeoverFrame
		for _, f := range frames {
			if f.ID > lastID {
				continued = append(continued, f)
			}
		}
		require.NotEmpty(t, continued, "events after the reconnect point")
		for i := 1; i < len(continued); i++ {
			assert.Equal(t, continued[i-1].ID+1, continued[i].ID, "the log's numbering continues without gap")
		}
		t.Logf("the run ended on the survivor %v after the kill (lease 1s; the peer's task takes ~10s)", time.Since(killed).Round(time.Millisecond))

		// The official client accepts the stream from the same point, through the survivor.
		res := officialReplay(t, b.URL, thread, lastID)
		require.Nil(t, res.Failed, "the official client rejected the continued stream")
		assert.Empty(t, res.Warnings, "the official client warned about the continued stream")
		assert.True(t, res.Terminal)

		after := peerCallLog(t, peer)
		tasks := newTasks(before, after)
		require.Len(t, tasks, 1, "one task at the peer")
		task := tasks[0]
		assert.Equal(t, "TASK_STATE_COMPLETED", after.Tasks[task])
		assert.Equal(t, 1, countOf(after.Sends[len(before.Sends):], "slow"), "the task was sent once, never restarted: %v", after.Sends)
		assert.Contains(t, after.Subscribes, task, "the survivor resubscribed to the task by id")
		assert.NotContains(t, after.Cancels, task, "a run that goes on does not cancel its task")
		toolSeen := toolMessagesSeen(model)
		found := false
		for _, c := range toolSeen {
			found = found || strings.Contains(c, "done: slow work")
		}
		assert.True(t, found, "the model got the task's result on the survivor")

		// The thread is free on both replicas once the run ended.
		a.restart(top)
		next := postJSON(t, a.URL+"/agui", `{"threadId":"`+thread+`","runId":"r2","protocolVersion":"1.0","messages":[{"id":"u2","role":"user","content":"peer: complete it"}]}`)
		assert.Equal(t, http.StatusOK, next.StatusCode)
		_, _ = io.Copy(io.Discard, next.Body)
		next.Body.Close()
	})

	t.Run("a run that cannot continue is ended and its task cancelled", func(t *testing.T) {
		before := peerCallLog(t, peer)
		thread, live, _, lastID := startSlowDelegation(t, a.URL, "takeover-lost", 2)
		a.kill(t)
		live.Body.Close()
		// The checkpoint becomes unreadable before the survivor claims the run (its lease
		// is 1 s): the work's task list is kept, so the task can still be cancelled.
		corruptCheckpoint(t, dsn, thread)

		frames := followRun(t, b.URL, thread, lastID, 30*time.Second)
		last := frames[len(frames)-1].Event
		assert.Equal(t, "RUN_ERROR", last["type"])
		assert.Equal(t, "RUN_LOST", last["code"])
		assert.Contains(t, last["message"], "could not be continued")
		after := peerCallLog(t, peer)
		tasks := newTasks(before, after)
		require.Len(t, tasks, 1)
		assert.Contains(t, after.Cancels, tasks[0], "the task is cancelled: nothing is left running without an owner")
		a.restart(top)
	})

	t.Run("handoff at SIGTERM: the other replica continues at once", func(t *testing.T) {
		// Fresh replicas with a lease of an hour: only the hand-off can move the run
		// within the test's bound.
		for _, c := range []*hitlCoord{a, b} {
			if !*c.killed {
				c.stop(t)
			}
		}
		longCfg := base + "replication:\n  heartbeat: 200ms\n  lease: 1h\nserver:\n  on_shutdown: handoff\n"
		longCfg = strings.Replace(longCfg, "server:\n  shutdown_grace: 1s\n", "", 1)
		longCfg = strings.Replace(longCfg, "server:\n  on_shutdown: handoff\n", "server:\n  shutdown_grace: 1s\n  on_shutdown: handoff\n", 1)
		a2 := startHITLCoordinator(t, longCfg)
		b2 := startHITLCoordinator(t, longCfg)
		before := peerCallLog(t, peer)
		thread, live, _, lastID := startSlowDelegation(t, a2.URL, "handoff", 2)
		a2.stop(t) // SIGTERM; exits 0 after the 1 s grace, handing the run off
		live.Body.Close()

		frames := followRun(t, b2.URL, thread, lastID, 45*time.Second)
		last := frames[len(frames)-1].Event
		require.Equal(t, "RUN_FINISHED", last["type"], "%v", frameTypes(frames))
		assert.Equal(t, map[string]any{"type": "success"}, last["outcome"])
		after := peerCallLog(t, peer)
		tasks := newTasks(before, after)
		require.Len(t, tasks, 1)
		assert.Equal(t, "TASK_STATE_COMPLETED", after.Tasks[tasks[0]])
		assert.NotContains(t, after.Cancels, tasks[0], "a hand-off cancels nothing")
		assert.Contains(t, after.Subscribes, tasks[0])
		assert.Equal(t, 1, countOf(after.Sends[len(before.Sends):], "slow"))
	})
}

func countOf(xs []string, v string) int {
	n := 0
	for _, x := range xs {
		if x == v {
			n++
		}
	}
	return n
}

// corruptCheckpoint replaces the checkpoint in the work document of the thread's run r1
// with one of an unknown version, keeping the rest (the task list).
func corruptCheckpoint(t *testing.T, dsn, thread string) {
	t.Helper()
	db, err := sql.Open("pgx", dsn)
	require.NoError(t, err)
	defer db.Close()
	var work string
	require.NoError(t, db.QueryRow(`SELECT work FROM runs WHERE thread_id = $1 AND run_id = 'r1'`, thread).Scan(&work))
	var doc map[string]any
	require.NoError(t, json.Unmarshal([]byte(work), &doc))
	require.NotNil(t, doc["checkpoint"], "the dead replica had written a checkpoint: %s", work)
	doc["checkpoint"] = map[string]any{"v": 99}
	b, err := json.Marshal(doc)
	require.NoError(t, err)
	_, err = db.Exec(`UPDATE runs SET work = $2 WHERE thread_id = $1 AND run_id = 'r1'`, thread, string(b))
	require.NoError(t, err)
}

// TestTakeoverSQLiteRestart: a single process on SQLite is killed during three streaming
// delegations and started again on the same file: it takes its runs over at start, they
// finish, and the peer's tasks complete (followed, not sent again, not orphaned).
func TestTakeoverSQLiteRestart(t *testing.T) {
	t.Parallel()
	requirePeers(t)
	peer := startA2APeerEnv(t)
	model := startFakeLLM(t)
	dbPath := filepath.Join(t.TempDir(), "baton.db")
	cfg := testConfig{LLMURL: model.URL, Agents: []agentEntry{{Name: "peer", URL: peer}}, Store: "sqlite:" + dbPath}.yaml() +
		"replication:\n  heartbeat: 200ms\n  lease: 10s\n"
	c := startHITLCoordinator(t, cfg)
	before := peerCallLog(t, peer)
	type started struct {
		thread string
		last   int64
	}
	var runs []started
	for i := range 3 {
		thread, live, _, last := startSlowDelegation(t, c.URL, fmt.Sprintf("sqlite-%d", i), 1)
		defer live.Body.Close()
		runs = append(runs, started{thread, last})
	}
	c.kill(t)
	c.restart(t)
	for _, r := range runs {
		frames := followRun(t, c.URL, r.thread, r.last, 60*time.Second)
		last := frames[len(frames)-1].Event
		assert.Equal(t, "RUN_FINISHED", last["type"], "run of %s: %v", r.thread, frameTypes(frames))
		assert.Equal(t, map[string]any{"type": "success"}, last["outcome"])
	}
	after := peerCallLog(t, peer)
	tasks := newTasks(before, after)
	require.Len(t, tasks, 3)
	for _, task := range tasks {
		assert.Equal(t, "TASK_STATE_COMPLETED", after.Tasks[task], "task %s", task)
		assert.Contains(t, after.Subscribes, task, "task %s followed after the restart", task)
		assert.NotContains(t, after.Cancels, task)
	}
	assert.Equal(t, 3, countOf(after.Sends[len(before.Sends):], "slow"), "each task sent once: %v", after.Sends)
}

// slowMCP is a real MCP server (go-sdk, stateless streamable HTTP) with two slow tools: lookup
// (annotated read-only and idempotent) and append (no annotation: it may not be re-run). It
// counts the calls each tool receives.
type slowMCP struct {
	URL            string
	lookups, adds  atomic.Int64
	lookupDuration time.Duration
}

type slowIn struct {
	Item string `json:"item,omitempty"`
}

type slowOut struct {
	Said string `json:"said"`
}

func startSlowMCP(t *testing.T) *slowMCP {
	t.Helper()
	m := &slowMCP{lookupDuration: time.Second}
	s := mcp.NewServer(&mcp.Implementation{Name: "slow", Version: "0.1.0"}, nil)
	mcp.AddTool(s, &mcp.Tool{Name: "lookup", Description: "Look something up (slowly).",
		Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true, IdempotentHint: true}},
		func(ctx context.Context, _ *mcp.CallToolRequest, _ slowIn) (*mcp.CallToolResult, slowOut, error) {
			m.lookups.Add(1)
			select {
			case <-ctx.Done():
				return nil, slowOut{}, ctx.Err()
			case <-time.After(m.lookupDuration):
			}
			return nil, slowOut{Said: "looked up"}, nil
		})
	mcp.AddTool(s, &mcp.Tool{Name: "append", Description: "Append an item (slowly); not idempotent."},
		func(ctx context.Context, _ *mcp.CallToolRequest, in slowIn) (*mcp.CallToolResult, slowOut, error) {
			m.adds.Add(1)
			select {
			case <-ctx.Done():
				return nil, slowOut{}, ctx.Err()
			case <-time.After(5 * time.Second):
			}
			return nil, slowOut{Said: "appended " + in.Item}, nil
		})
	mux := http.NewServeMux()
	mux.Handle("/mcp", mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return s },
		&mcp.StreamableHTTPOptions{Stateless: true, PropagateRequestCancellation: true}))
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	m.URL = srv.URL + "/mcp"
	return m
}

// TestTakeoverMCPCalls: the replica running two MCP calls is killed; the survivor sends the
// read-only one again and tells the model that the other may or may not have run (the fake
// model sees the [ERROR] text), and the run finishes.
func TestTakeoverMCPCalls(t *testing.T) {
	t.Parallel()
	dsn := pgtest.DSN(t)
	tools := startSlowMCP(t)
	model := fakellm.Start(func(req fakellm.Request) fakellm.Reply {
		if req.Last().Role == "user" {
			return fakellm.Reply{ToolCalls: []llm.ToolCall{
				{ID: "call_append", Name: "slow__append", Arguments: `{"item":"x"}`},
				{ID: "call_lookup", Name: "slow__lookup", Arguments: `{}`},
			}}
		}
		return fakellm.Reply{Text: modelDoneText}
	})
	t.Cleanup(model.Close)
	cfg := testConfig{LLMURL: model.URL, MCP: []mcpServerEntry{{Name: "slow", URL: tools.URL}}, Store: dsn, Grace: "1s"}.yaml() +
		"replication:\n  heartbeat: 200ms\n  lease: 1s\n"
	a := startHITLCoordinator(t, cfg)
	b := startHITLCoordinator(t, cfg)
	waitMCPSettled(t, a.URL)
	waitMCPSettled(t, b.URL)

	thread := newThreadID("takeover-mcp")
	live := postJSON(t, a.URL+"/agui", `{"threadId":"`+thread+`","runId":"r1","protocolVersion":"1.0","messages":[{"id":"u1","role":"user","content":"use the slow tools"}]}`)
	require.Equal(t, http.StatusOK, live.StatusCode)
	s := newTakeoverStream(live.Body)
	var lastID int64
	ends := 0
	for ends < 2 {
		f, ok := s.next(t)
		require.True(t, ok, "the live stream ended before the calls were made")
		lastID = f.ID
		if f.Event["type"] == "TOOL_CALL_END" {
			ends++
		}
	}
	deadline := time.Now().Add(10 * time.Second)
	for tools.adds.Load() < 1 || tools.lookups.Load() < 1 {
		require.True(t, time.Now().Before(deadline), "the calls never reached the MCP server")
		time.Sleep(20 * time.Millisecond)
	}
	a.kill(t)
	live.Body.Close()

	frames := followRun(t, b.URL, thread, lastID, 45*time.Second)
	last := frames[len(frames)-1].Event
	require.Equal(t, "RUN_FINISHED", last["type"], "%v", frameTypes(frames))
	assert.Equal(t, int64(1), tools.adds.Load(), "the call that is not idempotent is never sent again")
	assert.Equal(t, int64(2), tools.lookups.Load(), "the read-only call is sent again by the survivor")
	seen := toolMessagesSeen(model)
	assert.True(t, strings.HasPrefix(seen["call_append"], "[ERROR]"), "append: %q", seen["call_append"])
	assert.Contains(t, seen["call_append"], "may or may not have run")
	assert.Contains(t, seen["call_lookup"], "looked up")
}
