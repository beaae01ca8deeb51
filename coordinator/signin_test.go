package coordinator

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/baton-dev/baton/agui"
	"github.com/baton-dev/baton/llm"
	"github.com/baton-dev/baton/mcpclient"
	"github.com/baton-dev/baton/signin"
)

// signInTools is an MCP registry whose server needs each principal to sign in once: calls
// of principals not in signedIn end with SignInRequired.
type signInTools struct {
	mu        sync.Mutex
	signedIn  map[string]bool
	calls     []string // principal of every call sent
	prepared  []string
	principal []string
}

const secretURL = "https://as.example/authorize?client_id=baton&state=st-1&code_challenge=xyz"

func (f *signInTools) Tools() []mcpclient.Tool {
	return []mcpclient.Tool{{Name: "sec__whoami", Server: "sec", ToolName: "whoami", InputSchema: map[string]any{"type": "object"}}}
}

func (f *signInTools) Call(_ context.Context, name string, args json.RawMessage, opts mcpclient.CallOptions) (mcpclient.Result, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.principal = append(f.principal, opts.Principal)
	if !f.signedIn[opts.Principal] {
		return mcpclient.Result{}, &mcpclient.SignInRequired{Server: "sec", Tool: name, ToolName: "whoami", Args: args,
			NeedsSignIn: &signin.NeedsSignIn{Server: "sec", URL: secretURL, State: "st-1", Expires: time.Now().Add(10 * time.Minute)}}
	}
	f.calls = append(f.calls, opts.Principal)
	return mcpclient.Result{Status: mcpclient.StatusOK, Tool: name, Server: "sec", ToolName: "whoami",
		Content: &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "user=" + opts.Principal}}}}, nil
}

func (f *signInTools) Prepare(_ context.Context, principal string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.prepared = append(f.prepared, principal)
}

func (f *signInTools) Resume(context.Context, *mcpclient.InputRequired, map[string]*mcp.ElicitResult, mcpclient.CallOptions) (mcpclient.Result, error) {
	return mcpclient.Result{}, fmt.Errorf("not parked")
}

func (f *signInTools) Abandon(context.Context, *mcpclient.InputRequired) error { return nil }

func (f *signInTools) sent() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.calls...)
}

func TestSignInInterruptAndResume(t *testing.T) {
	tools := &signInTools{signedIn: map[string]bool{}}
	var seen strings.Builder
	var seenMu sync.Mutex
	inner := callThenReport("sec__whoami", `{}`)
	m := &fakeModel{turn: func(req *llm.Request) []llm.Delta {
		b, _ := json.Marshal(req)
		seenMu.Lock()
		seen.Write(b)
		seenMu.Unlock()
		return inner(req)
	}}
	e := newEngine(t, m, &fakeAgent{}, func(c *Config) { c.Tools = tools })

	// 1. The call needs a sign-in: the run ends with mcp:authorization, nothing was run.
	evs := startAndCollect(t, e, input("si"))
	ins := interruptsOf(t, evs)
	require.Len(t, ins, 1)
	in := ins[0]
	assert.Equal(t, "mcp:authorization", in.Reason)
	assert.Equal(t, "Sign in to sec", in.Message)
	assert.Equal(t, secretURL, in.Metadata["authorizationUrl"])
	assert.Equal(t, "sec", in.Metadata["server"])
	assert.NotEmpty(t, in.ExpiresAt)
	assert.Equal(t, "call_1", in.ToolCallID)
	assert.Empty(t, toolResults(evs))
	assert.Empty(t, tools.sent())
	assert.Contains(t, tools.prepared, "", "the run prepared the principal's servers")

	// 2. Resumed after signing in: the call is sent again, once, and completes.
	tools.mu.Lock()
	tools.signedIn[""] = true
	tools.mu.Unlock()
	evs = startAndCollect(t, e, resumeInput("si", "r2", resolved(in.ID, `{"action":"accept"}`)))
	res := toolResults(evs)
	require.Len(t, res, 1)
	assert.Contains(t, res[0], "user=")
	assert.Equal(t, []string{""}, tools.sent())
	assert.Equal(t, agui.OutcomeSuccess, lastEvent(evs).(*agui.RunFinished).Outcome.Type)

	seenMu.Lock()
	assert.NotContains(t, seen.String(), "as.example", "the model never sees the authorization URL")
	assert.NotContains(t, seen.String(), "st-1", "nor the state")
	seenMu.Unlock()

	// 3. The same resume again sends nothing twice.
	startAndCollect(t, e, resumeInput("si", "r3", resolved(in.ID, `{"action":"accept"}`)))
	assert.Len(t, tools.sent(), 1)
}

func TestSignInDeclinedAndNotDone(t *testing.T) {
	for _, tc := range []struct {
		name  string
		entry func(id string) agui.ResumeEntry
	}{
		{"declined", func(id string) agui.ResumeEntry { return resolved(id, `{"action":"decline"}`) }},
		{"cancelled", func(id string) agui.ResumeEntry { return agui.ResumeEntry{InterruptID: id, Status: "cancelled"} }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tools := &signInTools{signedIn: map[string]bool{}}
			e := newEngine(t, &fakeModel{turn: callThenReport("sec__whoami", `{}`)}, &fakeAgent{}, func(c *Config) { c.Tools = tools })
			in := interruptsOf(t, startAndCollect(t, e, input("d")))[0]
			evs := startAndCollect(t, e, resumeInput("d", "r2", tc.entry(in.ID)))
			res := toolResults(evs)
			require.Len(t, res, 1)
			assert.True(t, strings.HasPrefix(res[0], "[DECLINED]"), res[0])
			assert.Empty(t, tools.sent())
		})
	}
	// Accepted without having signed in: asked again, with a new interrupt.
	tools := &signInTools{signedIn: map[string]bool{}}
	e := newEngine(t, &fakeModel{turn: callThenReport("sec__whoami", `{}`)}, &fakeAgent{}, func(c *Config) { c.Tools = tools })
	in := interruptsOf(t, startAndCollect(t, e, input("nd")))[0]
	again := interruptsOf(t, startAndCollect(t, e, resumeInput("nd", "r2", resolved(in.ID, `{"action":"accept"}`))))
	require.Len(t, again, 1)
	assert.Equal(t, "mcp:authorization", again[0].Reason)
	assert.NotEqual(t, in.ID, again[0].ID)
	assert.Empty(t, tools.sent())
}

// TestSignInExpired: a sign-in interrupt expires as the others do; the call is not sent.
func TestSignInExpired(t *testing.T) {
	clk := &hitlClock{now: time.Date(2026, 11, 21, 10, 0, 0, 0, time.UTC)}
	tools := &signInTools{signedIn: map[string]bool{}}
	e := newEngine(t, &fakeModel{turn: callThenReport("sec__whoami", `{}`)}, &fakeAgent{},
		func(c *Config) { c.Tools = tools; c.Now = clk.Now; c.InterruptTTL = time.Minute })
	in := interruptsOf(t, startAndCollect(t, e, input("ex")))[0]
	tools.mu.Lock()
	tools.signedIn[""] = true
	tools.mu.Unlock()
	clk.add(2 * time.Minute)
	evs := startAndCollect(t, e, resumeInput("ex", "r2", resolved(in.ID, `{"action":"accept"}`)))
	assert.Equal(t, "INTERRUPT_EXPIRED", runErrorCode(t, evs))
	assert.Empty(t, tools.sent(), "nothing is sent after the interrupt expired")
}
