package coordinator

import (
	"context"
	"encoding/json"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/baton-dev/baton/agui"
	"github.com/baton-dev/baton/durable"
	"github.com/baton-dev/baton/failure"
	"github.com/baton-dev/baton/llm"
	"github.com/baton-dev/baton/mcpclient"
	"github.com/baton-dev/baton/store"
)

// TestTakeOverStreamsResultsMissingFromLog: the dead replica stored its work document (the
// checkpoint after a tool round, a result of the next turn) and died before the results'
// events reached the log. The new owner streams each missing TOOL_CALL_RESULT once, sends
// nothing again, and the log ends with one result per call.
func TestTakeOverStreamsResultsMissingFromLog(t *testing.T) {
	st, err := store.Open(context.Background(), "memory:")
	require.NoError(t, err)
	t.Cleanup(func() { _ = st.Close() })
	conv := []llm.Message{{Role: llm.RoleUser, Content: "hello"},
		{Role: llm.RoleAssistant, ToolCalls: []llm.ToolCall{{ID: "c-1", Name: "fs__write", Arguments: `{"n":1}`}}},
		{Role: llm.RoleTool, ToolCallID: "c-1", Content: "[OK]\nwritten 1"},
		{Role: llm.RoleAssistant, ToolCalls: []llm.ToolCall{{ID: "c-2", Name: "fs__write", Arguments: `{"n":2}`}}},
	}
	call := func(id, args string) []agui.Event {
		return []agui.Event{&agui.ToolCallStart{ToolCallID: id, ToolCallName: "fs__write"},
			&agui.ToolCallArgs{ToolCallID: id, Delta: args}, &agui.ToolCallEnd{ToolCallID: id}}
	}
	deadRun(t, st, "lost-results", conv, durable.Work{
		MCP:     []durable.Call{{ToolCallID: "c-2", Tool: "fs__write", State: "done"}},
		Results: map[string]failure.ToolResult{"c-2": {Text: "[OK]\nwritten 2", Tag: "OK"}},
	}, append(call("c-1", `{"n":1}`), call("c-2", `{"n":2}`)...)...)
	var cmu sync.Mutex
	var called []string
	tools := &fakeTools{
		tools: []mcpclient.Tool{{Name: "fs__write", Server: "fs", ToolName: "write", InputSchema: map[string]any{"type": "object"}}},
		status: func(name string, _ json.RawMessage) mcpclient.Result {
			cmu.Lock()
			called = append(called, name)
			cmu.Unlock()
			return mcpclient.Result{Status: mcpclient.StatusOK, Tool: name, Server: "fs"}
		},
	}
	model := &fakeModel{turn: func(*llm.Request) []llm.Delta {
		return []llm.Delta{{Text: "done"}, {Done: &llm.Completion{FinishReason: "stop"}}}
	}}
	e, err := New(Config{Model: model, Tools: tools, Store: st, Heartbeat: 20 * time.Millisecond, Lease: time.Second})
	require.NoError(t, err)
	t.Cleanup(func() { _ = e.Shutdown(context.Background()) })

	run, evs := waitEnded(t, st, "lost-results", "r-lost-results")
	assert.Equal(t, string(OutcomeCompleted), run.State)
	checkStream(t, evs)
	results := map[string][]string{}
	for _, ev := range evs {
		if r, ok := storedEvent(ev.Data).(*agui.ToolCallResult); ok {
			results[r.ToolCallID] = append(results[r.ToolCallID], r.Content)
		}
	}
	assert.Equal(t, map[string][]string{"c-1": {"[OK]\nwritten 1"}, "c-2": {"[OK]\nwritten 2"}}, results, "one result per call, as recorded")
	cmu.Lock()
	defer cmu.Unlock()
	assert.Empty(t, called, "nothing is sent again")
}
