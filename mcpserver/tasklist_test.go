package mcpserver

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/baton-dev/baton/internal/principal"
)

type taskListParams struct {
	mcp.ParamsBase
	Cursor string `json:"cursor,omitempty"`
}

type taskListResult struct {
	mcp.ResultBase
	Tasks []struct {
		TaskID        string         `json:"taskId"`
		Status        string         `json:"status"`
		CreatedAt     string         `json:"createdAt"`
		Result        map[string]any `json:"result"`
		InputRequests map[string]any `json:"inputRequests"`
	} `json:"tasks"`
	NextCursor string `json:"nextCursor"`
}

// taskServer serves the surface over an engine that reads runs, the principal being the
// bearer token.
func taskServer(t *testing.T) (taskEngine, string) {
	t.Helper()
	e := newTaskEngine()
	return e, taskServerOn(t, e, []Agent{{Name: "research", Target: "research"}})
}

// taskServerOn serves the surface over e with agents' tools and the coordinator tool.
func taskServerOn(t *testing.T, e taskEngine, agents []Agent) string {
	t.Helper()
	s, err := New(Config{Engine: e, Agents: agents, CoordinatorTool: "ask", Anonymous: "nobody"})
	require.NoError(t, err)
	h := s.Handler(HTTPOptions{})
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		who, _ := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
		h.ServeHTTP(w, r.WithContext(principal.With(r.Context(), who)))
	}))
	t.Cleanup(ts.Close)
	return ts.URL
}

// startTask calls tool as a task and returns the task's id.
func startTask(t *testing.T, cs *mcp.ClientSession, tool, prompt string) string {
	t.Helper()
	res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: tool, Arguments: map[string]any{"prompt": prompt}})
	require.NoError(t, err)
	id, _ := res.Meta[relatedTaskKey].(map[string]any)["taskId"].(string)
	require.NotEmpty(t, id, "%+v", res)
	return id
}

func listAll(t *testing.T, cs *mcp.ClientSession) (ids []string, pages int) {
	t.Helper()
	cursor := ""
	for {
		page, err := mcp.CallCustomMethod[*taskListParams, *taskListResult](context.Background(), cs, "tasks/list", &taskListParams{Cursor: cursor})
		require.NoError(t, err)
		require.LessOrEqual(t, len(page.Tasks), taskPageSize)
		pages++
		for _, tk := range page.Tasks {
			assert.Nil(t, tk.Result, "a listed task has no result payload")
			assert.Nil(t, tk.InputRequests)
			ids = append(ids, tk.TaskID)
		}
		if page.NextCursor == "" {
			return ids, pages
		}
		cursor = page.NextCursor
	}
}

// tasks/list pages through every task of the caller once, newest first, and through none
// of another caller's; a cursor it did not give is -32602.
func TestTaskListPagesEveryTaskOnce(t *testing.T) {
	t.Parallel()
	e, url := taskServer(t)
	ctx := context.Background()
	alice, bob := taskClient(t, url, "alice"), taskClient(t, url, "bob")
	var created []string
	for i := range 2*taskPageSize + 5 {
		tool := "research"
		if i%3 == 0 {
			tool = "ask"
		}
		prompt := "complete it"
		if tool == "ask" {
			prompt = "hello there"
		}
		created = append(created, startTask(t, alice, tool, prompt))
	}
	bobs := startTask(t, bob, "research", "complete his")
	require.Equal(t, len(created)+1, e.startCount())

	ids, pages := listAll(t, alice)
	assert.Equal(t, 3, pages)
	want := make([]string, len(created))
	for i, id := range created {
		want[len(created)-1-i] = id
	}
	assert.Equal(t, want, ids, "every task once, newest first")
	assert.NotContains(t, ids, bobs)

	ids, _ = listAll(t, bob)
	assert.Equal(t, []string{bobs}, ids)

	for _, bad := range []string{"nope", "eyJ0IjoxfQ", strings.Repeat("a", 600)} {
		_, err := mcp.CallCustomMethod[*taskListParams, *taskListResult](ctx, alice, "tasks/list", &taskListParams{Cursor: bad})
		var rpcErr *jsonrpc.Error
		require.ErrorAs(t, err, &rpcErr, "cursor %q", bad)
		assert.Equal(t, int64(jsonrpc.CodeInvalidParams), rpcErr.Code)
	}
}

// A listed task costs one read of the engine, its run's log (ListedLog, given the thread
// the page read): no thread is looked up again (Thread, RunLog), and a page of threads is
// read once.
func TestTaskListReadsOneLogPerListedTask(t *testing.T) {
	t.Parallel()
	e, url := taskServer(t)
	alice := taskClient(t, url, "alice")
	for range taskPageSize + 3 {
		startTask(t, alice, "research", "complete it")
	}
	e.mu.Lock()
	lookups, logs, paged := e.lookups, e.listedLogs, e.paged
	runs := make([]*fakeRun, len(e.starts))
	for i, st := range e.starts {
		runs[i] = st.run
	}
	e.mu.Unlock()
	for _, r := range runs {
		<-r.done // each run has logged its end
	}
	page, err := mcp.CallCustomMethod[*taskListParams, *taskListResult](context.Background(), alice, "tasks/list", &taskListParams{})
	require.NoError(t, err)
	require.Len(t, page.Tasks, taskPageSize)
	for _, tk := range page.Tasks {
		assert.Equal(t, "completed", tk.Status, "the status read from the run's log")
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	assert.Equal(t, 0, e.lookups-lookups, "threads looked up again")
	assert.Equal(t, taskPageSize, e.listedLogs-logs, "logs read: one a listed task")
	assert.Equal(t, listBatch, e.paged-paged, "threads paged: one batch")
}

// Threads that are not tasks of this server (here: of a tool it no longer serves) are
// examined and left out, at most maxListExamined a request: a page of none of them ends
// early with a cursor, and paging on reaches the tasks after them, each once.
func TestTaskListBoundsTheThreadsOneRequestExamines(t *testing.T) {
	t.Parallel()
	e, url := taskServer(t)
	alice := taskClient(t, url, "alice")
	var asked []string
	for range 2 {
		asked = append(asked, startTask(t, alice, "ask", "hello there"))
		<-e.started
	}
	for range 2*maxListExamined + 5 {
		startTask(t, alice, "research", "complete it")
		<-e.started // the fake engine's channel holds 100
	}
	// The same engine served without the research agent: its threads are no tasks here.
	alone := taskClient(t, taskServerOn(t, e, nil), "alice")
	var ids []string
	pages, cursor := 0, ""
	for {
		e.mu.Lock()
		before := e.paged
		e.mu.Unlock()
		page, err := mcp.CallCustomMethod[*taskListParams, *taskListResult](context.Background(), alone, "tasks/list", &taskListParams{Cursor: cursor})
		require.NoError(t, err)
		e.mu.Lock()
		read := e.paged - before
		e.mu.Unlock()
		assert.LessOrEqual(t, read, maxListExamined+listBatch, "threads read by one request")
		pages++
		for _, tk := range page.Tasks {
			ids = append(ids, tk.TaskID)
		}
		if cursor = page.NextCursor; cursor == "" {
			break
		}
		require.Less(t, pages, 10)
	}
	assert.Equal(t, []string{asked[1], asked[0]}, ids, "the tasks after the skipped threads, newest first, once")
	assert.Equal(t, 3, pages, "two pages end at the bound, the third reaches the tasks")
}

// tasks/result waits for a working task and answers with what a plain call would have
// (here: the cancelled run's result), the task's id in _meta.
func TestTaskResultWaitsForTheEnd(t *testing.T) {
	t.Parallel()
	e, url := taskServer(t)
	ctx := context.Background()
	alice := taskClient(t, url, "alice")
	id := startTask(t, alice, "research", "slow work")
	st := <-e.started

	type answer struct {
		res *mcp.CallToolResult
		err error
	}
	got := make(chan answer, 1)
	go func() {
		res, err := mcp.CallCustomMethod[*taskIDParams, *mcp.CallToolResult](ctx, alice, "tasks/result", &taskIDParams{TaskID: id})
		got <- answer{res, err}
	}()
	assert.Equal(t, st.in.RunID, <-e.awaiting, "tasks/result waits for the task's run")
	_, err := mcp.CallCustomMethod[*taskIDParams, *taskGetResult](ctx, alice, "tasks/cancel", &taskIDParams{TaskID: id})
	require.NoError(t, err)
	a := <-got
	require.NoError(t, a.err)
	assert.True(t, a.res.IsError)
	assert.Contains(t, text(t, a.res), "[CANCELED]")
	assert.Equal(t, map[string]any{"taskId": id}, a.res.Meta[relatedTaskKey])

	id = startTask(t, alice, "research", "complete it")
	res, err := mcp.CallCustomMethod[*taskIDParams, *mcp.CallToolResult](ctx, alice, "tasks/result", &taskIDParams{TaskID: id})
	require.NoError(t, err)
	assert.False(t, res.IsError)
	assert.Equal(t, "done: complete it", text(t, res))
	assert.Equal(t, map[string]any{"taskId": id}, res.Meta[relatedTaskKey])

	bob := taskClient(t, url, "bob")
	for who, cs := range map[string]*mcp.ClientSession{"bob": bob, "alice": alice} {
		taskID := id
		if who == "alice" {
			taskID = "mcp-nope/research"
		}
		_, err = mcp.CallCustomMethod[*taskIDParams, *mcp.CallToolResult](ctx, cs, "tasks/result", &taskIDParams{TaskID: taskID})
		var rpcErr *jsonrpc.Error
		require.ErrorAs(t, err, &rpcErr, who)
		assert.Equal(t, int64(jsonrpc.CodeInvalidParams), rpcErr.Code)
		assert.Equal(t, "unknown task "+taskID, rpcErr.Message)
	}
	// A thread has one task id: the same thread under another tool is unknown.
	other := strings.Replace(id, "/research", "/ask", 1)
	_, err = mcp.CallCustomMethod[*taskIDParams, *mcp.CallToolResult](ctx, alice, "tasks/result", &taskIDParams{TaskID: other})
	require.ErrorContains(t, err, "unknown task")
}

// A client that gives up waiting ends its tasks/result, never the task.
func TestTaskResultCancelEndsTheWaitOnly(t *testing.T) {
	t.Parallel()
	e, url := taskServer(t)
	alice := taskClient(t, url, "alice")
	id := startTask(t, alice, "research", "slow work")
	st := <-e.started
	ctx, cancel := context.WithCancel(context.Background())
	got := make(chan error, 1)
	go func() {
		_, err := mcp.CallCustomMethod[*taskIDParams, *mcp.CallToolResult](ctx, alice, "tasks/result", &taskIDParams{TaskID: id})
		got <- err
	}()
	assert.Equal(t, st.in.RunID, <-e.awaiting)
	cancel()
	require.Error(t, <-got)
	tk, err := mcp.CallCustomMethod[*taskIDParams, *taskGetResult](context.Background(), alice, "tasks/get", &taskIDParams{TaskID: id})
	require.NoError(t, err)
	assert.Equal(t, "working", tk.Status)
	e.mu.Lock()
	defer e.mu.Unlock()
	assert.Empty(t, e.stops, "the task was not stopped")
}

// An input_required task's tasks/result says so at once: the questions, as a client that
// cannot be asked gets them, answerable with "resume" (or tasks/update).
func TestTaskResultOfAQuestion(t *testing.T) {
	t.Parallel()
	_, url := taskServer(t)
	ctx := context.Background()
	alice := taskClient(t, url, "alice")
	id := startTask(t, alice, "research", "ask me")
	res, err := mcp.CallCustomMethod[*taskIDParams, *mcp.CallToolResult](ctx, alice, "tasks/result", &taskIDParams{TaskID: id})
	require.NoError(t, err)
	sc, _ := res.StructuredContent.(map[string]any)
	require.NotNil(t, sc, "%+v", res)
	assert.Equal(t, "input_required", sc["status"])
	threadID, _, _ := strings.Cut(id, "/")
	assert.Equal(t, threadID+"/int-1", sc["interruptId"])
	assert.Contains(t, text(t, res), "Which colour?")
	assert.Equal(t, map[string]any{"taskId": id}, res.Meta[relatedTaskKey])
}

// A resume naming a thread the caller does not have is refused before anything starts,
// the same for a thread that does not exist and for another caller's.
func TestResumeOfAnUnknownThreadIsRefused(t *testing.T) {
	t.Parallel()
	e, url := taskServer(t)
	ctx := context.Background()
	alice, bob := taskClient(t, url, "alice"), taskClient(t, url, "bob")
	id := startTask(t, alice, "research", "ask me")
	<-e.started
	threadID, _, _ := strings.Cut(id, "/")
	// A client without the extension: the call is served by the tool's handler.
	plain, err := mcp.NewClient(&mcp.Implementation{Name: "t", Version: "1"}, nil).Connect(ctx,
		&mcp.StreamableClientTransport{Endpoint: url, HTTPClient: &http.Client{Transport: bearer{who: "alice", next: http.DefaultTransport}}}, nil)
	require.NoError(t, err)
	t.Cleanup(func() { _ = plain.Close() })
	for who, c := range map[string]struct {
		cs     *mcp.ClientSession
		thread string
	}{"nobody's": {alice, "mcp-0123456789ab-nope"}, "another caller's": {bob, threadID}, "nobody's, plainly": {plain, "mcp-nope"}} {
		interrupt := c.thread + "/int-1"
		_, err := c.cs.CallTool(ctx, &mcp.CallToolParams{Name: "research", Arguments: map[string]any{
			"prompt": "", "resume": map[string]any{"interruptId": interrupt, "payload": map[string]any{"text": "green"}}}})
		var rpcErr *jsonrpc.Error
		require.ErrorAs(t, err, &rpcErr, who)
		assert.Equal(t, int64(jsonrpc.CodeInvalidParams), rpcErr.Code)
		assert.Equal(t, `the interrupt "`+interrupt+`" is not open for this caller`, rpcErr.Message)
	}
	assert.Equal(t, 1, e.startCount(), "no run started")
}

// On a 2025-11-25 session (no task-augmented calls: go-sdk cannot carry them), a plain call
// is a task too: tasks/list names it and tasks/result returns what the call returned.
func TestTasksOfA20251125Session(t *testing.T) {
	t.Parallel()
	_, url := taskServer(t)
	ctx := context.Background()
	c := mcp.NewClient(&mcp.Implementation{Name: "t", Version: "1"}, nil)
	require.NoError(t, mcp.AddSendingCustomMethod[*taskIDParams, *mcp.CallToolResult](c, "tasks/result"))
	require.NoError(t, mcp.AddSendingCustomMethod[*taskListParams, *taskListResult](c, "tasks/list"))
	cs, err := c.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: url,
		HTTPClient: &http.Client{Transport: bearer{who: "alice", next: http.DefaultTransport}}},
		&mcp.ClientSessionOptions{ProtocolVersion: "2025-11-25"})
	require.NoError(t, err)
	t.Cleanup(func() { _ = cs.Close() })
	require.Equal(t, "2025-11-25", cs.InitializeResult().ProtocolVersion)

	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "research", Arguments: map[string]any{"prompt": "complete it"}})
	require.NoError(t, err)
	require.Equal(t, "done: complete it", text(t, res), "a plain call")
	page, err := mcp.CallCustomMethod[*taskListParams, *taskListResult](ctx, cs, "tasks/list", &taskListParams{})
	require.NoError(t, err)
	require.Len(t, page.Tasks, 1)
	assert.Equal(t, "completed", page.Tasks[0].Status)
	assert.True(t, strings.HasSuffix(page.Tasks[0].TaskID, "/research"), page.Tasks[0].TaskID)
	again, err := mcp.CallCustomMethod[*taskIDParams, *mcp.CallToolResult](ctx, cs, "tasks/result", &taskIDParams{TaskID: page.Tasks[0].TaskID})
	require.NoError(t, err)
	assert.Equal(t, "done: complete it", text(t, again))
}

// On a 2025-11-25 session whose client takes elicitation, tasks/result asks an
// input_required task's questions in its own stream (with the task's id in _meta), resumes
// the task with the answers, and waits for its result.
func TestTaskResultAsksInItsStream(t *testing.T) {
	t.Parallel()
	e, url := taskServer(t)
	ctx := context.Background()
	id := startTask(t, taskClient(t, url, "alice"), "research", "ask me")
	asked := make(chan *mcp.ElicitRequest, 10)
	c := mcp.NewClient(&mcp.Implementation{Name: "t", Version: "1"}, &mcp.ClientOptions{
		ElicitationHandler: func(_ context.Context, req *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
			asked <- req
			return &mcp.ElicitResult{Action: "accept", Content: map[string]any{"text": "green"}}, nil
		}})
	require.NoError(t, mcp.AddSendingCustomMethod[*taskIDParams, *mcp.CallToolResult](c, "tasks/result"))
	cs, err := c.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: url,
		HTTPClient: &http.Client{Transport: bearer{who: "alice", next: http.DefaultTransport}}},
		&mcp.ClientSessionOptions{ProtocolVersion: "2025-11-25"})
	require.NoError(t, err)
	t.Cleanup(func() { _ = cs.Close() })

	res, err := mcp.CallCustomMethod[*taskIDParams, *mcp.CallToolResult](ctx, cs, "tasks/result", &taskIDParams{TaskID: id})
	require.NoError(t, err)
	assert.Equal(t, `answer: {"text":"green"}`, text(t, res))
	assert.Equal(t, map[string]any{"taskId": id}, res.Meta[relatedTaskKey])
	require.Len(t, asked, 1, "one question, asked once")
	q := <-asked
	assert.Equal(t, "Which colour?", q.Params.Message)
	assert.Equal(t, map[string]any{"taskId": id}, q.Params.Meta[relatedTaskKey])
	assert.Equal(t, 2, e.startCount(), "the task, then its resume")
}
