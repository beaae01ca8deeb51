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

// TestTakeOverUsesResultInLogMissingFromCheckpoint: the other way round. The dead replica
// stored a call's TOOL_CALL_RESULT (events are stored ahead of the work document in each
// round) and died before the checkpoint with that result was stored. The call ended: the
// new owner gives the model the logged result, streams no second result, reports nothing
// in doubt and sends nothing again.
func TestTakeOverUsesResultInLogMissingFromCheckpoint(t *testing.T) {
	st, err := store.Open(context.Background(), "memory:")
	require.NoError(t, err)
	t.Cleanup(func() { _ = st.Close() })
	conv := []llm.Message{{Role: llm.RoleUser, Content: "hello"},
		{Role: llm.RoleAssistant, ToolCalls: []llm.ToolCall{{ID: "c-1", Name: "fs__write", Arguments: `{"n":1}`}}},
	}
	deadRun(t, st, "logged-result", conv, durable.Work{
		MCP: []durable.Call{{ToolCallID: "c-1", Tool: "fs__write", State: "started"}},
	}, &agui.ToolCallStart{ToolCallID: "c-1", ToolCallName: "fs__write"},
		&agui.ToolCallArgs{ToolCallID: "c-1", Delta: `{"n":1}`}, &agui.ToolCallEnd{ToolCallID: "c-1"},
		&agui.ToolCallResult{MessageID: "tr-1", ToolCallID: "c-1", Content: "[OK]\nwritten 1", Role: "tool"})
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
	var mu sync.Mutex
	var seen []llm.Message
	model := &fakeModel{turn: func(req *llm.Request) []llm.Delta {
		mu.Lock()
		seen = req.Messages
		mu.Unlock()
		return []llm.Delta{{Text: "done"}, {Done: &llm.Completion{FinishReason: "stop"}}}
	}}
	e, err := New(Config{Model: model, Tools: tools, Store: st, Heartbeat: 20 * time.Millisecond, Lease: time.Second})
	require.NoError(t, err)
	t.Cleanup(func() { _ = e.Shutdown(context.Background()) })

	run, evs := waitEnded(t, st, "logged-result", "r-logged-result")
	assert.Equal(t, string(OutcomeCompleted), run.State)
	checkStream(t, evs)
	results := map[string][]string{}
	for _, ev := range evs {
		if r, ok := storedEvent(ev.Data).(*agui.ToolCallResult); ok {
			results[r.ToolCallID] = append(results[r.ToolCallID], r.Content)
		}
	}
	assert.Equal(t, map[string][]string{"c-1": {"[OK]\nwritten 1"}}, results, "the logged result, once")
	mu.Lock()
	var toModel []string
	for _, m := range seen {
		if m.Role == llm.RoleTool && m.ToolCallID == "c-1" {
			toModel = append(toModel, m.Content)
		}
	}
	mu.Unlock()
	assert.Equal(t, []string{"[OK]\nwritten 1"}, toModel, "the model is given the result the stream showed")
	cmu.Lock()
	defer cmu.Unlock()
	assert.Empty(t, called, "nothing is sent again")
}
