package integration

// Budgets down the tree (DESIGN §7, §9c): a Baton delegating to another sends its run's
// remaining budget (baton/budget); the inner Baton stops at it, and reports what it used
// (baton/usage), which the outer Baton counts against its own run and thread.

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/baton-dev/baton/internal/testutil/fakellm"
	"github.com/baton-dev/baton/llm"
)

// stepIn is the input of the inner Baton's one MCP tool.
type stepIn struct {
	N int `json:"n"`
}

// startStepMCP serves one tool, step, that answers at once.
func startStepMCP(t *testing.T) string {
	t.Helper()
	s := mcp.NewServer(&mcp.Implementation{Name: "work", Version: "0.1.0"}, nil)
	mcp.AddTool(s, &mcp.Tool{Name: "step", Description: "One step of the work."},
		func(_ context.Context, _ *mcp.CallToolRequest, in stepIn) (*mcp.CallToolResult, any, error) {
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: fmt.Sprintf("step %d done", in.N)}}}, nil, nil
		})
	mux := http.NewServeMux()
	mux.Handle("/mcp", mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return s }, &mcp.StreamableHTTPOptions{Stateless: true}))
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	return srv.URL + "/mcp"
}

// startStepModel is the inner Baton's model: it calls work__step until steps results are
// in, then answers; every call reports usage u.
func startStepModel(t *testing.T, steps int, u llm.Usage) *fakellm.Server {
	t.Helper()
	m := fakellm.Start(func(req fakellm.Request) fakellm.Reply {
		results := 0
		for _, msg := range req.Messages {
			if msg.Role == "tool" {
				results++
			}
		}
		if results >= steps {
			return fakellm.Reply{Text: "all steps done", Usage: &u}
		}
		return fakellm.Reply{ToolCalls: []llm.ToolCall{{ID: "call_" + strconv.Itoa(results+1), Name: "work__step",
			Arguments: fmt.Sprintf(`{"n":%d}`, results+1)}}, Usage: &u}
	})
	t.Cleanup(m.Close)
	return m
}

// assertTreeUsage checks that the outer thread's usage holds its one model call and the
// inner Baton's five.
func assertTreeUsage(t *testing.T, outerURL, thread string, outer, inner llm.Usage) {
	t.Helper()
	doc := getJSON(t, outerURL+"/agui/threads/"+url.PathEscape(thread), nil)
	usage, _ := doc["usage"].(map[string]any)
	require.NotNil(t, usage, "thread: %v", doc)
	assert.Equal(t, float64(outer.InputTokens+5*inner.InputTokens), usage["inputTokens"], "the outer thread holds both Batons' input tokens")
	assert.Equal(t, float64(outer.OutputTokens+5*inner.OutputTokens), usage["outputTokens"])
}

// TestBudgetDownTheTree: the outer Baton's run budget is 500 tokens; its first model call
// uses 10, so it delegates with 490 left. The inner Baton, whose own budget is unlimited
// and whose model would take 9 calls of 100 tokens, stops after the call that reaches
// 490 (5 calls), and reports the 500 tokens it used; the outer run counts them (its
// thread's usage holds both Batons' calls) and makes no further model call.
func TestBudgetDownTheTree(t *testing.T) {
	t.Parallel()
	const innerSteps = 8
	innerUsage := llm.Usage{InputTokens: 90, OutputTokens: 10}
	inner := startStepModel(t, innerSteps, innerUsage)
	outerUsage := llm.Usage{InputTokens: 8, OutputTokens: 2}
	outer := fakellm.Start(func(req fakellm.Request) fakellm.Reply {
		rep := testModel(req)
		rep.Usage = &outerUsage
		return rep
	})
	t.Cleanup(outer.Close)

	innerURL := startCoordinator(t, testConfig{LLMURL: inner.URL, MCP: []mcpServerEntry{{Name: "work", URL: startStepMCP(t)}}}.yaml()+
		a2aServerYAML("inner-baton"))
	outerURL := startCoordinator(t, testConfig{LLMURL: outer.URL, Agents: []agentEntry{{Name: "inner", URL: innerURL}}}.yaml()+
		"policy:\n  budget:\n    max_tokens: 500\n")

	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	thread := newThreadID("tree")
	evs := aguiRun(ctx, t, outerURL, runInput(thread, "r1", "inner: do the work"))
	require.NotEmpty(t, eventsOfType(evs, "RUN_FINISHED"), "events: %v", eventTypes(evs))

	// The inner Baton stopped at what the outer one had left: 5 calls of 100 tokens
	// reach 490; without the budget it would have made 9.
	assert.Len(t, inner.Requests(), 5, "the inner Baton's model calls")
	results := eventsOfType(evs, "TOOL_CALL_RESULT")
	require.Len(t, results, 1, "one delegation: %v", eventTypes(evs))
	assert.Regexp(t, `^\[REJECTED\]\n`, results[0]["content"], "the inner run ended on its (given) budget")
	assert.Contains(t, results[0]["content"], "its caller gave it", "the refusal names the caller's budget")
	assert.NotContains(t, results[0]["content"], "policy.budget", "not a key of the inner Baton's config")

	// The inner run warned at 80% of what it was given (a working status through a2a-go's
	// task store, whose metadata must be plain JSON), and the outer stream shows it as the
	// sub-agent's text.
	warned := false
	for _, e := range eventsOfType(evs, "TEXT_MESSAGE_CONTENT") {
		d, _ := e["delta"].(string)
		warned = warned || strings.Contains(d, `[BUDGET_WARNING] {"budget":"run","unit":"tokens"`) && e["subagentRunId"] != nil
	}
	assert.True(t, warned, "the inner Baton's budget warning reached the outer stream")

	// The outer run counted the inner one's usage: its next model call was refused.
	assert.Len(t, outer.Requests(), 1, "no outer model call after the sub-tree spent the budget")
	assertTreeUsage(t, outerURL, thread, outerUsage, innerUsage)
}

// TestBudgetDownTheTreeOverMCP: the same tree with the inner Baton called as an MCP server
// (its coordinator tool, ask): the call carries the outer run's remaining budget in its
// _meta (baton/budget), the inner run stops at it, and the tool result's _meta reports
// what it used (baton/usage), which the outer run counts: no further outer model call,
// and the outer thread's usage holds both Batons' calls.
func TestBudgetDownTheTreeOverMCP(t *testing.T) {
	t.Parallel()
	const innerSteps = 8
	innerUsage := llm.Usage{InputTokens: 90, OutputTokens: 10}
	inner := startStepModel(t, innerSteps, innerUsage)
	outerUsage := llm.Usage{InputTokens: 8, OutputTokens: 2}
	outer := fakellm.Start(func(req fakellm.Request) fakellm.Reply {
		for _, m := range req.Messages {
			if m.Role == "tool" {
				return fakellm.Reply{Text: "the inner Baton answered", Usage: &outerUsage}
			}
		}
		return fakellm.Reply{ToolCalls: []llm.ToolCall{{ID: "call_ask", Name: "inner__ask", Arguments: `{"prompt":"do the work"}`}}, Usage: &outerUsage}
	})
	t.Cleanup(outer.Close)

	innerURL := startCoordinator(t, testConfig{LLMURL: inner.URL, MCP: []mcpServerEntry{{Name: "work", URL: startStepMCP(t)}}}.yaml()+
		"mcp_server:\n  enabled: true\n")
	outerURL := startCoordinator(t, testConfig{LLMURL: outer.URL, MCP: []mcpServerEntry{{Name: "inner", URL: innerURL + "/mcp"}}}.yaml()+
		"policy:\n  budget:\n    max_tokens: 500\n")

	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	thread := newThreadID("tree-mcp")
	evs := aguiRun(ctx, t, outerURL, runInput(thread, "r1", "ask the inner Baton"))
	require.NotEmpty(t, eventsOfType(evs, "RUN_FINISHED"), "events: %v", eventTypes(evs))

	assert.Len(t, inner.Requests(), 5, "the inner Baton's model calls: it stopped at the 490 tokens it was given")
	results := eventsOfType(evs, "TOOL_CALL_RESULT")
	require.Len(t, results, 1, "one MCP call: %v", eventTypes(evs))
	assert.Contains(t, results[0]["content"], "its caller gave it", "the inner refusal names the caller's budget")
	assert.Len(t, outer.Requests(), 1, "no outer model call after the sub-tree spent the budget")
	assertTreeUsage(t, outerURL, thread, outerUsage, innerUsage)
}
