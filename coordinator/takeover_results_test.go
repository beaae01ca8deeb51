package coordinator

import (
	"context"
	"testing"

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
	rig := &takeoverRig{tools: []mcpclient.Tool{writeTool}}
	evs := rig.takeOver(t, st, "lost-results", "r-lost-results")
	assert.Equal(t, map[string][]string{"c-1": {"[OK]\nwritten 1"}, "c-2": {"[OK]\nwritten 2"}}, loggedResults(evs), "one result per call, as recorded")
	assert.Empty(t, rig.sent(), "nothing is sent again")
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
	rig := &takeoverRig{tools: []mcpclient.Tool{writeTool}}
	evs := rig.takeOver(t, st, "logged-result", "r-logged-result")
	assert.Equal(t, map[string][]string{"c-1": {"[OK]\nwritten 1"}}, loggedResults(evs), "the logged result, once")
	assert.Equal(t, []string{"[OK]\nwritten 1"}, rig.toolMessages()["c-1"], "the model is given the result the stream showed")
	assert.Empty(t, rig.sent(), "nothing is sent again")
}
