package coordinator

import (
	"encoding/json"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stretchr/testify/assert"

	"github.com/baton-dev/baton/agui"
	"github.com/baton-dev/baton/llm"
	"github.com/baton-dev/baton/mcpclient"
	"github.com/baton-dev/baton/store"
)

// takeoverRig is what a takeover test's new owner runs against: MCP tools that record every
// call sent (each answers OK with content), and a model that records the conversation it
// was last given and answers "done".
type takeoverRig struct {
	tools   []mcpclient.Tool
	content *mcp.CallToolResult

	mu     sync.Mutex
	called []string
	seen   []llm.Message
}

// writeTool is the non-idempotent tool of the takeover tests.
var writeTool = mcpclient.Tool{Name: "fs__write", Server: "fs", ToolName: "write", InputSchema: map[string]any{"type": "object"}}

// takeOver starts an engine on st (a 20 ms heartbeat, a 1 s lease), which takes over the
// dead replica's run thread/runID, waits for the run to end completed with a well-formed
// stream, and returns its stored events.
func (g *takeoverRig) takeOver(t *testing.T, st store.Store, thread, runID string) []store.Event {
	t.Helper()
	tools := &fakeTools{tools: g.tools, status: func(name string, _ json.RawMessage) mcpclient.Result {
		g.mu.Lock()
		g.called = append(g.called, name)
		g.mu.Unlock()
		return mcpclient.Result{Status: mcpclient.StatusOK, Tool: name, Server: "fs", Content: g.content}
	}}
	model := &fakeModel{turn: func(req *llm.Request) []llm.Delta {
		g.mu.Lock()
		g.seen = req.Messages
		g.mu.Unlock()
		return []llm.Delta{{Text: "done"}, {Done: &llm.Completion{FinishReason: "stop"}}}
	}}
	newStartedEngine(t, Config{Model: model, Tools: tools, Store: st, Heartbeat: 20 * time.Millisecond, Lease: time.Second})
	run, evs := waitEnded(t, st, thread, runID)
	assert.Equal(t, string(OutcomeCompleted), run.State)
	checkStream(t, evs)
	return evs
}

// sent returns the tools called, in order.
func (g *takeoverRig) sent() []string {
	g.mu.Lock()
	defer g.mu.Unlock()
	return append([]string(nil), g.called...)
}

// toolMessages returns the tool results the model was last given, by call id.
func (g *takeoverRig) toolMessages() map[string][]string {
	g.mu.Lock()
	defer g.mu.Unlock()
	out := map[string][]string{}
	for _, m := range g.seen {
		if m.Role == llm.RoleTool {
			out[m.ToolCallID] = append(out[m.ToolCallID], m.Content)
		}
	}
	return out
}

// loggedResults returns the TOOL_CALL_RESULT contents of a stored log, by call id.
func loggedResults(evs []store.Event) map[string][]string {
	out := map[string][]string{}
	for _, ev := range evs {
		if r, ok := storedEvent(ev.Data).(*agui.ToolCallResult); ok {
			out[r.ToolCallID] = append(out[r.ToolCallID], r.Content)
		}
	}
	return out
}
