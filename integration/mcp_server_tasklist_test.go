package integration

import (
	"context"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/baton-dev/baton/internal/testutil/pgtest"
)

type mcpListParams struct {
	mcp.ParamsBase
	Cursor string `json:"cursor,omitempty"`
}

type mcpTaskList struct {
	mcp.ResultBase
	Tasks []struct {
		TaskID string `json:"taskId"`
		Status string `json:"status"`
	} `json:"tasks"`
	NextCursor string `json:"nextCursor"`
}

// tokenTransport sends a bearer token with every request.
type tokenTransport struct{ token string }

func (tt tokenTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+tt.token)
	return http.DefaultTransport.RoundTrip(r)
}

// mcpListClient is go-sdk's client of principal token, declaring the tasks extension, with
// tasks/list and tasks/result (2025-11-25's methods) as custom methods.
func mcpListClient(t *testing.T, url, token string) *mcp.ClientSession {
	t.Helper()
	c := mcp.NewClient(&mcp.Implementation{Name: "tasklist-test", Version: "1"}, &mcp.ClientOptions{
		Capabilities: &mcp.ClientCapabilities{Extensions: map[string]any{tasksExtension: map[string]any{}}}})
	require.NoError(t, mcp.AddSendingCustomMethod[*mcpListParams, *mcpTaskList](c, "tasks/list"))
	require.NoError(t, mcp.AddSendingCustomMethod[*mcpTaskParams, *mcp.CallToolResult](c, "tasks/result"))
	hc := &http.Client{Transport: tokenTransport{token: token}}
	cs, err := c.Connect(context.Background(), &mcp.StreamableClientTransport{Endpoint: url, HTTPClient: hc}, nil)
	require.NoError(t, err)
	t.Cleanup(func() { _ = cs.Close(); hc.CloseIdleConnections() })
	return cs
}

// TestMCPServerTasksListAndResultOnTheOtherReplica: tasks started on replica A (two
// replicas, one PostgreSQL store) are listed by replica B, every one once over the pages,
// newest first, none of them to another principal; B's tasks/result waits for a task that
// A runs and answers with the agent's result; another principal's tasks/result, and a
// cursor B did not give, are -32602; a resume of a thread nobody has is refused.
func TestMCPServerTasksListAndResultOnTheOtherReplica(t *testing.T) {
	t.Parallel()
	requirePeers(t)
	dsn := pgtest.DSN(t)
	peer := startA2APeerEnv(t)
	model := startFakeLLM(t)
	const alice, bob = "tasklist-alice-token", "tasklist-bob-token"
	cfg := testConfig{LLMURL: model.URL, Agents: []agentEntry{{Name: "peer", URL: peer}}, Store: dsn,
		AuthTokensEnv: "TASKLIST_TOKENS"}.yaml() +
		"replication:\n  heartbeat: 200ms\n  lease: 2s\nmcp_server:\n  enabled: true\n"
	env := "TASKLIST_TOKENS=" + alice + "," + bob
	a := startHITLCoordinatorEnv(t, cfg, env)
	b := startHITLCoordinatorEnv(t, cfg, env)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	onA := mcpListClient(t, a.URL+"/mcp", alice)
	var created []string
	call := func(prompt string) string {
		res, err := onA.CallTool(ctx, &mcp.CallToolParams{Name: "peer", Arguments: map[string]any{"prompt": prompt}})
		require.NoError(t, err)
		id, _ := res.Meta["io.modelcontextprotocol/related-task"].(map[string]any)["taskId"].(string)
		require.NotEmpty(t, id, "a task: %+v", res)
		created = append(created, id)
		return id
	}
	for i := range 21 {
		call("complete " + strings.Repeat("x", i+1))
	}
	slow := call("slow please")

	onB := mcpListClient(t, b.URL+"/mcp", alice)
	var listed []string
	pages, cursor := 0, ""
	for {
		page, err := mcp.CallCustomMethod[*mcpListParams, *mcpTaskList](ctx, onB, "tasks/list", &mcpListParams{Cursor: cursor})
		require.NoError(t, err)
		pages++
		for _, tk := range page.Tasks {
			listed = append(listed, tk.TaskID)
		}
		if cursor = page.NextCursor; cursor == "" {
			break
		}
	}
	assert.Equal(t, 2, pages, "22 tasks in pages of 20")
	newestFirst := slices.Clone(created)
	slices.Reverse(newestFirst)
	assert.Equal(t, newestFirst, listed, "every task once, newest first, read on the other replica")

	res, err := mcp.CallCustomMethod[*mcpTaskParams, *mcp.CallToolResult](ctx, onB, "tasks/result", &mcpTaskParams{TaskID: slow})
	require.NoError(t, err, "B waits for the task A runs")
	require.False(t, res.IsError, "%+v", res)
	require.NotEmpty(t, res.Content)
	assert.Contains(t, res.Content[0].(*mcp.TextContent).Text, "done: slow please")
	assert.Equal(t, map[string]any{"taskId": slow}, res.Meta["io.modelcontextprotocol/related-task"])

	var rpcErr *jsonrpc.Error
	_, err = mcp.CallCustomMethod[*mcpListParams, *mcpTaskList](ctx, onB, "tasks/list", &mcpListParams{Cursor: "not-a-cursor"})
	require.ErrorAs(t, err, &rpcErr)
	assert.Equal(t, int64(jsonrpc.CodeInvalidParams), rpcErr.Code)

	bobOnB := mcpListClient(t, b.URL+"/mcp", bob)
	page, err := mcp.CallCustomMethod[*mcpListParams, *mcpTaskList](ctx, bobOnB, "tasks/list", &mcpListParams{})
	require.NoError(t, err)
	assert.Empty(t, page.Tasks, "another principal lists none of them")
	_, err = mcp.CallCustomMethod[*mcpTaskParams, *mcp.CallToolResult](ctx, bobOnB, "tasks/result", &mcpTaskParams{TaskID: slow})
	require.ErrorAs(t, err, &rpcErr)
	assert.Equal(t, int64(jsonrpc.CodeInvalidParams), rpcErr.Code)
	assert.Equal(t, "unknown task "+slow, rpcErr.Message)

	_, err = onB.CallTool(ctx, &mcp.CallToolParams{Name: "peer", Arguments: map[string]any{
		"prompt": "", "resume": map[string]any{"interruptId": "mcp-nobody/int-1", "payload": "yes"}}})
	require.ErrorAs(t, err, &rpcErr)
	assert.Equal(t, int64(jsonrpc.CodeInvalidParams), rpcErr.Code)
	assert.Contains(t, rpcErr.Message, "not open for this caller")
	assert.Empty(t, model.Requests(), "an agent tool never calls the model")
}
