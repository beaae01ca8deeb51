package integration

// End-to-end tests of Baton as an MCP server (DESIGN §9d): the coordinator binary with
// mcp_server enabled, in front of the A2A JS SDK peer (peers/a2a-peer.mjs), driven by the
// official TypeScript client (@modelcontextprotocol/sdk 1.32.2, peers/mcp-client.mjs) over
// streamable HTTP, and by go-sdk's own client over --mcp-stdio.

import (
	"context"
	"encoding/json"
	"errors"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/baton-dev/baton/internal/testutil/fakellm"
)

// userTextsOf returns the user messages of one model request.
func userTextsOf(r fakellm.Request) []string {
	var out []string
	for _, m := range r.Messages {
		if m.Role == "user" {
			out = append(out, m.Content)
		}
	}
	return out
}

// mcpStep is one step's report of peers/mcp-client.mjs.
type mcpStep struct {
	Op    string `json:"op"`
	Tools []struct {
		Name        string         `json:"name"`
		Description string         `json:"description"`
		InputSchema map[string]any `json:"inputSchema"`
	} `json:"tools"`
	Result *struct {
		Content []struct {
			Type string `json:"type"`
			Text string `json:"text"`
			// A resource_link's.
			URI      string `json:"uri"`
			Name     string `json:"name"`
			MimeType string `json:"mimeType"`
			// An embedded resource's.
			Resource *struct {
				URI      string `json:"uri"`
				MimeType string `json:"mimeType"`
				Text     string `json:"text"`
				Blob     string `json:"blob"`
			} `json:"resource"`
		} `json:"content"`
		IsError           bool           `json:"isError"`
		StructuredContent map[string]any `json:"structuredContent"`
	} `json:"result"`
	Progress []struct {
		Progress float64 `json:"progress"`
		Message  string  `json:"message"`
	} `json:"progress"`
	Aborted bool    `json:"aborted"`
	AbortAt float64 `json:"abortAt"`
	Error   *struct {
		Code    *int   `json:"code"`
		Message string `json:"message"`
	} `json:"error"`
}

func (s mcpStep) text() string {
	if s.Result == nil || len(s.Result.Content) == 0 {
		return ""
	}
	return s.Result.Content[0].Text
}

type mcpReport struct {
	Steps    []mcpStep        `json:"steps"`
	Elicited []map[string]any `json:"elicited"`
}

// runMCPClient runs peers/mcp-client.mjs with job and returns its report.
func runMCPClient(t testing.TB, job map[string]any) mcpReport {
	t.Helper()
	return runNodeJob[mcpReport](t, "mcp-client.mjs", job, func(r mcpReport) int { return len(r.Steps) })
}

// runNodeJob runs the peer script with job (JSON, its one argument) and decodes the report
// it prints last; the report must have one step per step of the job.
func runNodeJob[R any](t testing.TB, script string, job map[string]any, steps func(R) int) R {
	t.Helper()
	dir := requirePeers(t)
	node, _ := requireNode(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	arg, err := json.Marshal(job)
	require.NoError(t, err)
	cmd := exec.CommandContext(ctx, node, filepath.Join(dir, script), string(arg))
	cmd.Dir = dir
	out, err := cmd.Output()
	var stderr string
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		stderr = string(ee.Stderr)
	}
	require.NoError(t, err, "%s: %s", script, stderr)
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	var rep R
	require.NoError(t, json.Unmarshal([]byte(lines[len(lines)-1]), &rep), "%s printed: %s", script, out)
	require.Equal(t, len(job["steps"].([]map[string]any)), steps(rep), "%s printed: %s", script, out)
	return rep
}

// startMCPBaton starts a coordinator with mcp_server enabled in front of the JS peer, whose
// input-required questions are asked to the user (ask_user).
func startMCPBaton(t testing.TB) (mcpURL, peer string, llm *fakellm.Server) {
	t.Helper()
	peer = startA2APeerEnv(t)
	llm = startFakeLLM(t)
	cfg := testConfig{LLMURL: llm.URL, Agents: []agentEntry{{Name: "peer", URL: peer, InputRequired: "ask_user"}}}.yaml() +
		"mcp_server:\n  enabled: true\n"
	return startCoordinator(t, cfg) + "/mcp", peer, llm
}

// TestMCPServerOfficialClient: the official TypeScript client lists the tools, calls the
// agent tool (completed, failed, input-required answered through its elicitation handler,
// once), calls the coordinator tool, gets clear errors for bad input, receives progress,
// and aborts a slow call: the peer gets CancelTask and the task ends canceled.
func TestMCPServerOfficialClient(t *testing.T) {
	t.Parallel()
	url, peer, model := startMCPBaton(t)
	steps := []map[string]any{
		{"op": "list"},
		{"op": "call", "tool": "peer", "args": map[string]any{"prompt": "complete the report"}},
		{"op": "call", "tool": "peer", "args": map[string]any{"prompt": "fail now"}},
		{"op": "call", "tool": "peer", "args": map[string]any{"prompt": "input please"}},
		{"op": "call", "tool": "ask", "args": map[string]any{"prompt": "peer: complete via the model"}},
		{"op": "call", "tool": "nope", "args": map[string]any{"prompt": "x"}},
		{"op": "call", "tool": "peer", "args": map[string]any{"prompt": 42}},
		{"op": "call", "tool": "peer", "bigPrompt": 1<<20 + 1},
		{"op": "progress", "tool": "peer", "args": map[string]any{"prompt": "complete with progress"}},
	}
	rep := runMCPClient(t, map[string]any{"url": url, "elicit": "blue", "steps": steps})
	s := rep.Steps

	require.Nil(t, s[0].Error)
	names := map[string]string{}
	for _, tl := range s[0].Tools {
		names[tl.Name] = tl.Description
		assert.Equal(t, []any{"prompt"}, tl.InputSchema["required"], tl.Name)
	}
	assert.Len(t, names, 2)
	assert.Contains(t, names, "ask")
	assert.Contains(t, names["peer"], "Scripted", "the agent tool is described by its card")

	require.Nil(t, s[1].Error, "%+v", s[1].Error)
	assert.False(t, s[1].Result.IsError)
	assert.True(t, strings.HasPrefix(s[1].text(), "done: complete the report\n"), "the artifact, then the status message: %q", s[1].text())

	require.Nil(t, s[2].Error)
	assert.True(t, s[2].Result.IsError)
	assert.Equal(t, "[FAILED]\nscripted failure", s[2].text())

	require.Nil(t, s[3].Error, "%+v", s[3].Error)
	assert.False(t, s[3].Result.IsError, s[3].text())
	assert.True(t, strings.HasPrefix(s[3].text(), "done: blue\n"), "the elicitation's answer went to the parked task: %q", s[3].text())
	require.Len(t, rep.Elicited, 1, "asked once")
	assert.Contains(t, rep.Elicited[0]["message"], "what colour?")

	require.Nil(t, s[4].Error)
	assert.False(t, s[4].Result.IsError)
	assert.Equal(t, modelDoneText, s[4].text(), "the coordinator tool answers with the model's final text")

	for i, want := range map[int]string{5: `unknown tool "nope"`, 6: `"prompt" must be a string`, 7: "at most 1048576 are accepted"} {
		require.NotNil(t, s[i].Error, "step %d", i)
		require.NotNil(t, s[i].Error.Code, "step %d: a JSON-RPC error", i)
		assert.Equal(t, jsonrpc.CodeInvalidParams, *s[i].Error.Code, "step %d", i)
		assert.Contains(t, s[i].Error.Message, want, "step %d", i)
	}

	require.Nil(t, s[8].Error)
	assert.True(t, strings.HasPrefix(s[8].text(), "done: complete with progress\n"), s[8].text())
	require.NotEmpty(t, s[8].Progress)
	for _, p := range s[8].Progress {
		assert.True(t, strings.HasPrefix(p.Message, "peer: ") || strings.HasPrefix(p.Message, "calling "), p.Message)
	}

	// The agent tool's calls never reached the model: its only requests are the coordinator
	// tool's (the call, then the answer after the result).
	for _, r := range model.Requests() {
		assert.Contains(t, userTextsOf(r), "peer: complete via the model")
	}
	assert.Len(t, model.Requests(), 2)

	_, tasks := peerLog(t, peer)
	followUps := peerFollowUps(t, peer)
	for id, state := range tasks {
		if state == "TASK_STATE_COMPLETED" && followUps[id] > 0 {
			assert.Equal(t, 1, followUps[id], "the answer went down once")
		}
	}
}

// TestMCPServerAbortCancelsTheTask: aborting a slow call (notifications/cancelled) cancels
// the run and the peer's task, which ends canceled.
func TestMCPServerAbortCancelsTheTask(t *testing.T) {
	t.Parallel()
	url, peer, _ := startMCPBaton(t)
	rep := runMCPClient(t, map[string]any{"url": url, "steps": []map[string]any{
		{"op": "abort", "tool": "peer", "args": map[string]any{"prompt": "slow please"}, "abortOn": "peer: "},
	}})
	s := rep.Steps[0]
	t.Logf("progress before the abort: %+v; error: %+v", s.Progress, s.Error)
	assert.True(t, s.Aborted)
	require.NotNil(t, s.Error)
	require.NotEmpty(t, s.Progress)
	var cancels []string
	var tasks map[string]string
	require.Eventually(t, func() bool {
		cancels, tasks = peerLog(t, peer)
		return len(cancels) == 1 && tasks[cancels[0]] == "TASK_STATE_CANCELED"
	}, 15*time.Second, 20*time.Millisecond, "the peer gets CancelTask and the task ends canceled")
}

// TestMCPServerStdioGoClient: go-sdk's own client launches coordinator --mcp-stdio (the
// demo stack: no configuration), lists the tools and calls them.
func TestMCPServerStdioGoClient(t *testing.T) {
	t.Parallel()
	bin := buildBinaries(t)["coordinator"]
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.Command(bin, "--mcp-stdio")
	cmd.Dir = t.TempDir() // the demo stack's store (./data/baton.db) stays out of the checkout
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "stdio-test", Version: "1"}, nil).Connect(ctx, &mcp.CommandTransport{Command: cmd}, nil)
	require.NoError(t, err)
	defer func() { assert.NoError(t, cs.Close(), "the coordinator exits cleanly when its client goes") }()

	tools, err := cs.ListTools(ctx, nil)
	require.NoError(t, err)
	var names []string
	for _, tl := range tools.Tools {
		names = append(names, tl.Name)
	}
	assert.ElementsMatch(t, []string{"ask", "travel", "research"}, names)

	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "research", Arguments: map[string]any{"prompt": "papers on rainbows"}})
	require.NoError(t, err)
	require.False(t, res.IsError, "%+v", res.Content)
	require.NotEmpty(t, res.Content)
	assert.NotEmpty(t, res.Content[0].(*mcp.TextContent).Text)

	res, err = cs.CallTool(ctx, &mcp.CallToolParams{Name: "ask", Arguments: map[string]any{"prompt": "hello"}})
	require.NoError(t, err)
	assert.False(t, res.IsError, "%+v", res.Content)

	_, err = cs.CallTool(ctx, &mcp.CallToolParams{Name: "ask", Arguments: map[string]any{"prompt": true}})
	var we *jsonrpc.Error
	require.ErrorAs(t, err, &we)
	assert.Equal(t, int64(jsonrpc.CodeInvalidParams), we.Code)
}

// TestMCPServerQuestionWithoutElicitation: a client without the elicitation capability gets
// the agent's question with structuredContent input_required, and answers it by calling the
// same tool with resume; the answer reaches the parked task once. A resume of an interrupt
// id that names no open question is an error.
func TestMCPServerQuestionWithoutElicitation(t *testing.T) {
	t.Parallel()
	url, peer, _ := startMCPBaton(t)
	rep := runMCPClient(t, map[string]any{"url": url, "steps": []map[string]any{
		{"op": "call", "tool": "peer", "args": map[string]any{"prompt": "input please"}},
		{"op": "resume", "tool": "peer", "payload": "green"},
		{"op": "resume", "tool": "peer", "payload": "again"},
	}})
	s := rep.Steps
	require.Nil(t, s[0].Error, "%+v", s[0].Error)
	assert.False(t, s[0].Result.IsError)
	assert.Equal(t, "input_required", s[0].Result.StructuredContent["status"])
	assert.Contains(t, s[0].text(), "what colour?")
	assert.Empty(t, rep.Elicited)

	require.Nil(t, s[1].Error, "%+v", s[1].Error)
	assert.False(t, s[1].Result.IsError, s[1].text())
	assert.True(t, strings.HasPrefix(s[1].text(), "done: green\n"), s[1].text())

	// The same answer again: nothing is sent twice.
	_, tasks := peerLog(t, peer)
	followUps := peerFollowUps(t, peer)
	require.Len(t, tasks, 1)
	for id := range tasks {
		assert.Equal(t, 1, followUps[id], "the answer went down once")
	}
	require.NotNil(t, s[2].Result, "%+v", s[2].Error)
	assert.True(t, s[2].Result.IsError, "the question was answered already: %s", s[2].text())
}
