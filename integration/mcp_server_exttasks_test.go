package integration

import (
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/baton-dev/baton/internal/testutil/pgtest"
)

// extTasksReport is what peers/mcp-tasks-client.mjs prints.
type extTasksReport struct {
	Steps    []extTasksStep `json:"steps"`
	Elicited []struct {
		TaskID  string `json:"taskId"`
		Message string `json:"message"`
	} `json:"elicited"`
}

type extTasksStep struct {
	Op     string `json:"op"`
	Era    string `json:"era"`
	Kind   string `json:"kind"`
	TaskID string `json:"taskId"`
	Status string `json:"status"`
	Task   *struct {
		TaskID, Status, StatusMessage string
	} `json:"task"`
	Outcome *struct {
		Status string              `json:"status"`
		Result *mcp.CallToolResult `json:"result"`
		Error  *extTasksError      `json:"error"`
	} `json:"outcome"`
	LastStatus string         `json:"lastStatus"`
	Error      *extTasksError `json:"error"`
}

type extTasksError struct {
	Code    *int64 `json:"code"`
	Message string `json:"message"`
	Name    string `json:"name"`
}

// runMCPTasksClient runs peers/mcp-tasks-client.mjs (@modelcontextprotocol/ext-tasks 0.2.2 on
// the official TypeScript client) with one job and returns its report.
func runMCPTasksClient(t *testing.T, job map[string]any) extTasksReport {
	t.Helper()
	return runNodeJob[extTasksReport](t, "mcp-tasks-client.mjs", job, func(r extTasksReport) int { return len(r.Steps) })
}

// TestMCPServerExtTasksClient: @modelcontextprotocol/ext-tasks 0.2.2, a task client nobody
// here wrote, drives the tasks extension on two replicas of one PostgreSQL store. Its
// callTool gets a task from replica A; tasks/get and tasks/cancel of that task sent to
// replica B succeed for its principal, and are "not found" for another; a task cancelled on
// B settles cancelled in the session on A; A is killed with SIGKILL while the slow agent
// works, B takes the run over, and the task resumed on B settles once, completed, with the
// agent's answer, the agent having been sent the message once. A task that asks is answered
// through the session's input handler (tasks/update) and completes with the answer.
func TestMCPServerExtTasksClient(t *testing.T) {
	t.Parallel()
	requirePeers(t)
	dsn := pgtest.DSN(t)
	peer := startA2APeerEnv(t)
	model := startFakeLLM(t)
	const alice, bob = "exttasks-alice-token", "exttasks-bob-token"
	cfg := testConfig{LLMURL: model.URL, Agents: []agentEntry{{Name: "peer", URL: peer}, {Name: "asker", URL: peer, InputRequired: "ask_user"}}, Store: dsn,
		AuthTokensEnv: "EXTTASKS_TOKENS"}.yaml() +
		"replication:\n  heartbeat: 200ms\n  lease: 2s\nmcp_server:\n  enabled: true\n"
	env := "EXTTASKS_TOKENS=" + alice + "," + bob
	a := startHITLCoordinatorEnv(t, cfg, env)
	b := startHITLCoordinatorEnv(t, cfg, env)
	onB := b.URL + "/mcp"

	rep := runMCPTasksClient(t, map[string]any{"url": a.URL + "/mcp", "token": alice, "steps": []map[string]any{
		{"op": "call", "tool": "peer", "args": map[string]any{"prompt": "hold until cancelled"}, "as": "held"}, // 0
		{"op": "cancel", "url": onB},   // 1
		{"op": "settle", "of": "held"}, // 2
		{"op": "get", "url": onB},      // 3
		{"op": "call", "tool": "peer", "args": map[string]any{"prompt": "slow please"}, "as": "slow"}, // 4
		{"op": "get", "url": onB},                                                // 5
		{"op": "get", "url": onB, "token": bob},                                  // 6
		{"op": "cancel", "url": onB, "token": bob},                               // 7
		{"op": "get", "url": onB, "taskId": "mcp-0123456789abcdef01234567/peer"}, // 8
	}})
	s := rep.Steps
	for i, st := range s {
		assert.Equal(t, "modern", st.Era, "step %d: the client negotiated 2026-07-28", i)
	}
	require.Nil(t, s[0].Error, "%+v", s[0].Error)
	require.Equal(t, "task", s[0].Kind, "a task-augmented call gets a task, not a result")
	held := s[0].TaskID
	assert.Equal(t, "working", s[0].Status)
	assert.Nil(t, s[1].Error, "tasks/cancel on the other replica: %+v", s[1].Error)
	require.NotNil(t, s[2].Outcome, "%+v", s[2].Error)
	assert.Equal(t, "cancelled", s[2].Outcome.Status, "the session on A sees the task cancelled on B")
	require.NotNil(t, s[3].Task, "%+v", s[3].Error)
	assert.Equal(t, held, s[3].Task.TaskID)
	assert.Equal(t, "cancelled", s[3].Task.Status)

	require.Nil(t, s[4].Error, "%+v", s[4].Error)
	require.Equal(t, "task", s[4].Kind)
	slow := s[4].TaskID
	require.NotEqual(t, held, slow)
	require.NotNil(t, s[5].Task, "tasks/get on the other replica: %+v", s[5].Error)
	assert.Equal(t, slow, s[5].Task.TaskID)
	assert.Equal(t, "working", s[5].Task.Status)
	for _, i := range []int{6, 7, 8} {
		require.NotNil(t, s[i].Error, "step %d: another principal's task, or one nobody gave, is not found", i)
		require.NotNil(t, s[i].Error.Code, "step %d: %+v", i, s[i].Error)
		assert.Equal(t, int64(jsonrpc.CodeInvalidParams), *s[i].Error.Code, "step %d: %+v", i, s[i].Error)
		assert.Contains(t, s[i].Error.Message, "unknown task", "step %d", i)
	}
	assert.Equal(t, s[6].Error.Message, strings.ReplaceAll(s[8].Error.Message, "mcp-0123456789abcdef01234567/peer", slow),
		"another principal cannot tell its task from one that does not exist")

	// Kill A once the agent works on the slow task (the held one was cancelled: the peer's
	// only working task is the slow one).
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		_, tasks := peerLog(t, peer)
		assert.NotEmpty(c, firstWorking(tasks))
	}, eventualWait, 20*time.Millisecond)
	a.kill(t)

	rep = runMCPTasksClient(t, map[string]any{"url": onB, "token": alice, "elicit": "blue", "steps": []map[string]any{
		{"op": "resume", "taskId": slow}, // 0
		{"op": "settle"},                 // 1
		{"op": "get"},                    // 2
		{"op": "call", "tool": "asker", "args": map[string]any{"prompt": "input please"}, "as": "asked"}, // 3
		{"op": "settle", "of": "asked"}, // 4
	}})
	s = rep.Steps
	require.Nil(t, s[0].Error, "resuming the task on B: %+v", s[0].Error)
	assert.Equal(t, slow, s[0].TaskID)
	require.NotNil(t, s[1].Outcome, "%+v", s[1].Error)
	require.Equal(t, "completed", s[1].Outcome.Status, "B took the run over: %+v", s[1].Outcome.Error)
	require.NotNil(t, s[1].Outcome.Result)
	require.NotEmpty(t, s[1].Outcome.Result.Content)
	text := s[1].Outcome.Result.Content[0].(*mcp.TextContent).Text
	assert.Contains(t, text, "done: slow please", "the agent's answer")
	assert.False(t, s[1].Outcome.Result.IsError)
	assert.Equal(t, "completed", s[1].LastStatus)
	require.NotNil(t, s[2].Task, "%+v", s[2].Error)
	assert.Equal(t, "completed", s[2].Task.Status, "and it stays completed")

	// A task that asks: the session's input handler answers the elicitation, ext-tasks sends
	// it with tasks/update, and the task resumes and completes with the answer.
	require.Nil(t, s[3].Error, "%+v", s[3].Error)
	require.Equal(t, "task", s[3].Kind)
	require.NotNil(t, s[4].Outcome, "%+v", s[4].Error)
	require.Equal(t, "completed", s[4].Outcome.Status, "%+v", s[4].Outcome.Error)
	require.NotEmpty(t, s[4].Outcome.Result.Content)
	answered := s[4].Outcome.Result.Content[0].(*mcp.TextContent).Text
	assert.True(t, strings.HasPrefix(answered, "done: blue\n"), "the answer went to the parked task: %q", answered)
	require.Len(t, rep.Elicited, 1, "asked once")
	assert.Equal(t, s[3].TaskID, rep.Elicited[0].TaskID)

	sends := 0
	for _, w := range peerSendWords(t, peer) {
		if w == "slow" {
			sends++
		}
	}
	assert.Equal(t, 1, sends, "the agent got the message once: B followed the task, it did not send again")
	assert.Empty(t, model.Requests(), "an agent tool never calls the model")
}
