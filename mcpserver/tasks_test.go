package mcpserver

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/baton-dev/baton/agui"
	"github.com/baton-dev/baton/internal/principal"
)

// taskEngine is the fake engine that also reads runs (TaskEngine): the events its latest
// run of a thread produced so far. A thread's creation time is its first start's place in
// the starts (a millisecond each); awaiting receives each AwaitRun as it starts waiting.
type taskEngine struct {
	*fakeEngine
	awaiting chan string
}

func newTaskEngine() taskEngine {
	return taskEngine{fakeEngine: newFakeEngine(), awaiting: make(chan string, 100)}
}

func (e taskEngine) Thread(_ context.Context, threadID, who string) (ThreadInfo, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.lookups++
	for i, st := range e.starts {
		if st.in.ThreadID == threadID && st.who == who {
			return ThreadInfo{ID: threadID, CreatedAt: time.UnixMilli(int64(i))}, nil
		}
	}
	return ThreadInfo{}, ErrNotFound
}

func (e taskEngine) ThreadsPage(_ context.Context, who, prefix string, before *ThreadInfo, limit int) ([]ThreadInfo, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	var out []ThreadInfo
	seen := map[string]bool{}
	latest := map[string]string{} // a thread's latest run, as the store's record has it
	for _, st := range e.starts {
		latest[st.in.ThreadID] = st.in.RunID
	}
	for i, st := range e.starts {
		th := ThreadInfo{ID: st.in.ThreadID, CreatedAt: time.UnixMilli(int64(i)), LastRunID: latest[st.in.ThreadID]}
		if st.who == who && !seen[th.ID] && strings.HasPrefix(th.ID, prefix) && (before == nil || newer(*before, th)) {
			out = append(out, th)
		}
		seen[th.ID] = true
	}
	slices.SortFunc(out, func(a, b ThreadInfo) int {
		if newer(a, b) {
			return -1
		}
		return 1
	})
	out = out[:min(limit, len(out))]
	e.paged += len(out)
	return out, nil
}

// newer reports whether a comes before b in a list of threads newest first.
func newer(a, b ThreadInfo) bool {
	return a.CreatedAt.After(b.CreatedAt) || (a.CreatedAt.Equal(b.CreatedAt) && a.ID > b.ID)
}

func (e taskEngine) AwaitRun(ctx context.Context, threadID, runID, who string) error {
	e.mu.Lock()
	var run *fakeRun
	for _, st := range e.starts {
		if st.in.ThreadID == threadID && st.in.RunID == runID && st.who == who {
			run = st.run
		}
	}
	e.mu.Unlock()
	if run == nil {
		return ErrNotFound
	}
	e.awaiting <- runID
	select {
	case <-run.done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (e taskEngine) RunLog(_ context.Context, threadID, who string) (*RunLog, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.lookups++
	return e.latestLog(threadID, who, "")
}

// ListedLog reads th's run as the store's record has it: the run ThreadsPage saw.
func (e taskEngine) ListedLog(_ context.Context, th ThreadInfo, who string) (*RunLog, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.listedLogs++
	return e.latestLog(th.ID, who, th.LastRunID)
}

// latestLog is the log of run runID (its latest when "") of who's thread threadID; the
// caller holds e.mu.
func (e taskEngine) latestLog(threadID, who, runID string) (*RunLog, error) {
	var last *started
	for i := range e.starts {
		if st := &e.starts[i]; st.in.ThreadID == threadID && (runID == "" || st.in.RunID == runID) {
			last = st
		}
	}
	if last == nil || last.who != who {
		return nil, ErrNotFound
	}
	last.run.mu.Lock()
	defer last.run.mu.Unlock()
	return &RunLog{RunID: last.in.RunID, Events: append([]agui.Event(nil), last.run.evs...)}, nil
}

type taskGetResult struct {
	mcp.ResultBase
	ResultType    string              `json:"resultType"`
	TaskID        string              `json:"taskId"`
	Status        string              `json:"status"`
	Result        *mcp.CallToolResult `json:"result"`
	InputRequests map[string]any      `json:"inputRequests"`
}

type taskIDParams struct {
	mcp.ParamsBase
	TaskID         string               `json:"taskId"`
	InputResponses mcp.InputResponseMap `json:"inputResponses,omitempty"`
}

func taskClient(t *testing.T, url, who string) *mcp.ClientSession {
	t.Helper()
	c := mcp.NewClient(&mcp.Implementation{Name: "t", Version: "1"}, &mcp.ClientOptions{
		Capabilities: &mcp.ClientCapabilities{Extensions: map[string]any{tasksExtension: map[string]any{}}}})
	for _, m := range []string{"tasks/get", "tasks/cancel", "tasks/update"} {
		require.NoError(t, mcp.AddSendingCustomMethod[*taskIDParams, *taskGetResult](c, m))
	}
	require.NoError(t, mcp.AddSendingCustomMethod[*taskIDParams, *mcp.CallToolResult](c, "tasks/result"))
	require.NoError(t, mcp.AddSendingCustomMethod[*taskListParams, *taskListResult](c, "tasks/list"))
	hc := &http.Client{Transport: bearer{who: who, next: http.DefaultTransport}}
	cs, err := c.Connect(context.Background(), &mcp.StreamableClientTransport{Endpoint: url, HTTPClient: hc}, nil)
	require.NoError(t, err)
	t.Cleanup(func() { _ = cs.Close() })
	return cs
}

func TestTasksOverStatelessHTTP(t *testing.T) {
	t.Parallel()
	e := newTaskEngine()
	s, err := New(Config{Engine: e, Agents: []Agent{{Name: "research", Target: "research"}}, CoordinatorTool: "ask", Anonymous: "nobody"})
	require.NoError(t, err)
	h := s.Handler(HTTPOptions{})
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		who, _ := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
		h.ServeHTTP(w, r.WithContext(principal.With(r.Context(), who)))
	}))
	t.Cleanup(ts.Close)
	ctx := context.Background()
	alice := taskClient(t, ts.URL, "alice")
	require.Contains(t, alice.InitializeResult().Capabilities.Extensions, tasksExtension, "the server offers the extension")

	res, err := alice.CallTool(ctx, &mcp.CallToolParams{Name: "research", Arguments: map[string]any{"prompt": "slow work"}})
	require.NoError(t, err)
	id, _ := res.Meta[relatedTaskKey].(map[string]any)["taskId"].(string)
	require.NotEmpty(t, id, "the task's id: %+v", res)
	st := <-e.started
	assert.Equal(t, "alice", st.who)

	got, err := mcp.CallCustomMethod[*taskIDParams, *taskGetResult](ctx, alice, "tasks/get", &taskIDParams{TaskID: id})
	require.NoError(t, err)
	assert.Equal(t, "working", got.Status)
	assert.Equal(t, "complete", got.ResultType)

	bob := taskClient(t, ts.URL, "bob")
	_, err = mcp.CallCustomMethod[*taskIDParams, *taskGetResult](ctx, bob, "tasks/get", &taskIDParams{TaskID: id})
	require.Error(t, err, "another principal does not see the task")
	assert.Contains(t, err.Error(), "unknown task")
	_, err = mcp.CallCustomMethod[*taskIDParams, *taskGetResult](ctx, alice, "tasks/get", &taskIDParams{TaskID: "mcp-nope/research"})
	require.Error(t, err)

	_, err = mcp.CallCustomMethod[*taskIDParams, *taskGetResult](ctx, alice, "tasks/cancel", &taskIDParams{TaskID: id})
	require.NoError(t, err)
	assert.Equal(t, st.in.RunID, <-e.stopped)
	got, err = mcp.CallCustomMethod[*taskIDParams, *taskGetResult](ctx, alice, "tasks/get", &taskIDParams{TaskID: id})
	require.NoError(t, err)
	assert.Equal(t, "cancelled", got.Status)

	res, err = alice.CallTool(ctx, &mcp.CallToolParams{Name: "research", Arguments: map[string]any{"prompt": "complete it"}})
	require.NoError(t, err)
	id, _ = res.Meta[relatedTaskKey].(map[string]any)["taskId"].(string)
	require.Eventually(t, func() bool {
		got, err = mcp.CallCustomMethod[*taskIDParams, *taskGetResult](ctx, alice, "tasks/get", &taskIDParams{TaskID: id})
		return err == nil && got.Status == "completed"
	}, eventually, tick)
	require.NotNil(t, got.Result)
	assert.Equal(t, "done: complete it", text(t, got.Result))
}

const (
	eventually = 10 * time.Second
	tick       = 10 * time.Millisecond
)

// A task whose run asks a question is input_required with the question as an elicitation
// request; tasks/update with the answer resumes it, and the task then completes.
func TestTaskUpdateAnswersTheQuestion(t *testing.T) {
	t.Parallel()
	e := newTaskEngine()
	s, err := New(Config{Engine: e, Agents: []Agent{{Name: "research", Target: "research"}}, Anonymous: "nobody"})
	require.NoError(t, err)
	h := s.Handler(HTTPOptions{})
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h.ServeHTTP(w, r.WithContext(principal.With(r.Context(), "alice")))
	}))
	t.Cleanup(ts.Close)
	ctx := context.Background()
	cs := taskClient(t, ts.URL, "alice")
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "research", Arguments: map[string]any{"prompt": "ask me"}})
	require.NoError(t, err)
	id, _ := res.Meta[relatedTaskKey].(map[string]any)["taskId"].(string)
	var got *taskGetResult
	require.Eventually(t, func() bool {
		got, err = mcp.CallCustomMethod[*taskIDParams, *taskGetResult](ctx, cs, "tasks/get", &taskIDParams{TaskID: id})
		return err == nil && got.Status != "working"
	}, eventually, tick)
	require.Equal(t, "input_required", got.Status)
	q, _ := got.InputRequests["int-1"].(map[string]any)
	require.NotNil(t, q, "%+v", got.InputRequests)
	assert.Equal(t, "elicitation/create", q["method"])

	_, err = mcp.CallCustomMethod[*taskIDParams, *taskGetResult](ctx, cs, "tasks/update", &taskIDParams{TaskID: id,
		InputResponses: mcp.InputResponseMap{"int-1": &mcp.ElicitResult{Action: "accept", Content: map[string]any{"text": "green"}}}})
	require.NoError(t, err)
	<-e.started
	resumed := <-e.started
	assert.Equal(t, "alice", resumed.who)
	require.Len(t, resumed.in.Resume, 1)
	assert.JSONEq(t, `{"text":"green"}`, string(resumed.in.Resume[0].Payload))
	require.Eventually(t, func() bool {
		got, err = mcp.CallCustomMethod[*taskIDParams, *taskGetResult](ctx, cs, "tasks/get", &taskIDParams{TaskID: id})
		return err == nil && got.Status == "completed"
	}, eventually, tick)
	assert.Equal(t, `answer: {"text":"green"}`, text(t, got.Result))

	_, err = mcp.CallCustomMethod[*taskIDParams, *taskGetResult](ctx, cs, "tasks/update", &taskIDParams{TaskID: id,
		InputResponses: mcp.InputResponseMap{"int-1": &mcp.ElicitResult{Action: "accept"}}})
	require.Error(t, err, "a completed task takes no answers")
}

// A finished task stays readable for the TTL after its run ended, and not after.
func TestTaskTTL(t *testing.T) {
	t.Parallel()
	end := time.Date(2026, 12, 7, 12, 0, 0, 0, time.UTC)
	log := &RunLog{RunID: "r1", Events: []agui.Event{
		&agui.ToolCallResult{ToolCallID: "c1", Content: "[COMPLETED]\nok"},
		&agui.RunFinished{Base: agui.Base{Timestamp: end.UnixMilli()}, ThreadID: "th", RunID: "r1"},
	}}
	tl := tool{name: "research", agent: "research"}
	tk, expired := taskOf("th", tl, log, time.Hour, end.Add(59*time.Minute))
	assert.False(t, expired)
	assert.Equal(t, "completed", tk.Status)
	require.NotNil(t, tk.TTLMs)
	assert.Equal(t, int64(3600000), *tk.TTLMs)
	assert.Equal(t, "2026-12-07T12:00:00.000Z", tk.LastUpdatedAt)
	_, expired = taskOf("th", tl, log, time.Hour, end.Add(61*time.Minute))
	assert.True(t, expired)
	_, expired = taskOf("th", tl, &RunLog{Events: log.Events[:1]}, time.Hour, end.Add(48*time.Hour))
	assert.False(t, expired, "a running task does not expire")
}

// A completed task's result is a 2026-07-28 tools/call result: resultType "complete" with the
// content a plain call gets (a task client validates it against that schema).
func TestTaskResultHasItsResultType(t *testing.T) {
	t.Parallel()
	log := &RunLog{RunID: "r1", Events: []agui.Event{
		&agui.ToolCallResult{ToolCallID: "c1", Content: "[COMPLETED]\nok"},
		&agui.RunFinished{ThreadID: "th", RunID: "r1"},
	}}
	tk, _ := taskOf("th", tool{name: "research", agent: "research"}, log, time.Hour, time.Now())
	require.Equal(t, "completed", tk.Status)
	b, err := json.Marshal(&taskResult{ResultType: "complete", task: tk})
	require.NoError(t, err)
	var got struct {
		ResultType string `json:"resultType"`
		Result     struct {
			ResultType string            `json:"resultType"`
			Content    []json.RawMessage `json:"content"`
		} `json:"result"`
	}
	require.NoError(t, json.Unmarshal(b, &got), "%s", b)
	assert.Equal(t, "complete", got.ResultType)
	assert.Equal(t, "complete", got.Result.ResultType, "%s", b)
	assert.NotEmpty(t, got.Result.Content)

	var back taskGetResult
	require.NoError(t, json.Unmarshal(b, &back), "go-sdk's client still reads the result")
	require.NotNil(t, back.Result)
	assert.Equal(t, "ok", text(t, back.Result))
}
