package integration

import (
	"context"
	"encoding/json"
	"net/http"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/baton-dev/baton/internal/testutil/pgtest"
)

// tasksExtension is the MCP tasks extension's id (SEP-2663).
const tasksExtension = "io.modelcontextprotocol/tasks"

type mcpTaskParams struct {
	mcp.ParamsBase
	TaskID string `json:"taskId"`
}

type mcpTask struct {
	mcp.ResultBase
	ResultType string              `json:"resultType"`
	TaskID     string              `json:"taskId"`
	Status     string              `json:"status"`
	Result     *mcp.CallToolResult `json:"result"`
}

// mcpTaskClient is go-sdk's client declaring the tasks extension (2026-07-28: in every
// request's capabilities), with tasks/get and tasks/cancel as its custom methods.
func mcpTaskClient(t *testing.T, url string) *mcp.ClientSession {
	t.Helper()
	c := mcp.NewClient(&mcp.Implementation{Name: "tasks-test", Version: "1"}, &mcp.ClientOptions{
		Capabilities: &mcp.ClientCapabilities{Extensions: map[string]any{tasksExtension: map[string]any{}}}})
	for _, m := range []string{"tasks/get", "tasks/cancel"} {
		require.NoError(t, mcp.AddSendingCustomMethod[*mcpTaskParams, *mcpTask](c, m))
	}
	hc := &http.Client{}
	cs, err := c.Connect(context.Background(), &mcp.StreamableClientTransport{Endpoint: url, HTTPClient: hc}, nil)
	require.NoError(t, err)
	t.Cleanup(func() { _ = cs.Close(); hc.CloseIdleConnections() })
	return cs
}

// TestMCPServerTaskSurvivesTheReplica: a tools/call with the tasks extension (2026-07-28
// framing) on replica A answers at once with a task; replica B (one PostgreSQL store)
// answers tasks/get for it; A is killed with SIGKILL while the agent works; B takes the run
// over and the task completes, readable on B, with the agent's answer, the agent having
// been sent the message once.
func TestMCPServerTaskSurvivesTheReplica(t *testing.T) {
	t.Parallel()
	requirePeers(t)
	dsn := pgtest.DSN(t)
	peer := startA2APeerEnv(t)
	model := startFakeLLM(t)
	cfg := testConfig{LLMURL: model.URL, Agents: []agentEntry{{Name: "peer", URL: peer}}, Store: dsn}.yaml() +
		"replication:\n  heartbeat: 200ms\n  lease: 2s\nmcp_server:\n  enabled: true\n"
	a := startHITLCoordinator(t, cfg)
	b := startHITLCoordinator(t, cfg)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	ca := mcpTaskClient(t, a.URL+"/mcp")
	require.Contains(t, ca.InitializeResult().Capabilities.Extensions, tasksExtension)
	res, err := ca.CallTool(ctx, &mcp.CallToolParams{Name: "peer", Arguments: map[string]any{"prompt": "slow please"}})
	require.NoError(t, err)
	id, _ := res.Meta["io.modelcontextprotocol/related-task"].(map[string]any)["taskId"].(string)
	require.NotEmpty(t, id, "a task, at once: %+v", res)

	cb := mcpTaskClient(t, b.URL+"/mcp")
	get := func() *mcpTask {
		got, err := mcp.CallCustomMethod[*mcpTaskParams, *mcpTask](ctx, cb, "tasks/get", &mcpTaskParams{TaskID: id})
		require.NoError(t, err)
		return got
	}
	assert.Equal(t, "working", get().Status, "the other replica reads the task")
	_, err = mcp.CallCustomMethod[*mcpTaskParams, *mcpTask](ctx, cb, "tasks/get", &mcpTaskParams{TaskID: "mcp-0123456789abcdef01234567/peer"})
	require.Error(t, err, "a task id nobody gave is not found")

	// Kill A once the agent works on the task.
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		_, tasks := peerLog(t, peer)
		assert.NotEmpty(c, firstWorking(tasks))
	}, eventualWait, 20*time.Millisecond)
	a.kill(t)

	var done *mcpTask
	require.Eventually(t, func() bool {
		done = get()
		return done.Status != "working"
	}, 90*time.Second, 200*time.Millisecond, "B takes the run over and the task ends")
	require.Equal(t, "completed", done.Status, "%+v", done)
	require.NotNil(t, done.Result)
	require.NotEmpty(t, done.Result.Content)
	text := done.Result.Content[0].(*mcp.TextContent).Text
	assert.Contains(t, text, "done: slow please", "the agent's answer (after its progress artifact)")
	sends := 0
	for _, s := range peerSendWords(t, peer) {
		if s == "slow" {
			sends++
		}
	}
	assert.Equal(t, 1, sends, "the agent got the message once: B followed the task, it did not send again")
	assert.Empty(t, model.Requests(), "an agent tool never calls the model")
}

// firstWorking is the id of a task in TASK_STATE_WORKING, or "".
func firstWorking(tasks map[string]string) string {
	for id, s := range tasks {
		if s == "TASK_STATE_WORKING" {
			return id
		}
	}
	return ""
}

// peerSendWords is the first word of every message the peer received ("<taskId>:<word>" for
// a message to an existing task).
func peerSendWords(t testing.TB, peer string) []string {
	t.Helper()
	resp, err := http.Get(peer + "/test/log")
	require.NoError(t, err)
	defer resp.Body.Close()
	var log struct {
		Sends []string `json:"sends"`
	}
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&log))
	return log.Sends
}
