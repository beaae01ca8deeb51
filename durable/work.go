package durable

import (
	"encoding/json"

	"github.com/baton-dev/baton/failure"
)

// Work is a run's downstream work as the store keeps it (runs.work): the A2A tasks it
// delegated to and the MCP calls it made, with what a replica taking the run over needs to
// know (task ids to resubscribe or cancel; whether a call may be sent again). It is one JSON
// document: nothing queries inside it.
type Work struct {
	A2A []Task `json:"a2a"`
	MCP []Call `json:"mcp"`
	// Checkpoint is where a replica taking the run over continues it from, encoded when it
	// was taken; Results are the results of the current turn's tool calls that have ended
	// since (by tool call id).
	Checkpoint json.RawMessage               `json:"checkpoint,omitempty"`
	Results    map[string]failure.ToolResult `json:"results,omitempty"`
}

// Task is an A2A task of a run and its latest state.
type Task struct {
	Agent     string `json:"agent"`
	TaskID    string `json:"taskId"`
	ContextID string `json:"contextId,omitempty"`
	State     string `json:"state"`
	// ToolCallID and SubagentRunID tie the task to the call that started it and to its
	// attribution in the run's stream, for a replica that takes the run over.
	ToolCallID    string `json:"toolCallId,omitempty"`
	SubagentRunID string `json:"subagentRunId,omitempty"`
}

// Call is an MCP call of a run.
type Call struct {
	ToolCallID string `json:"toolCallId"`
	Tool       string `json:"tool"`
	// Idempotent: the tool is annotated idempotent or read-only, so it may be re-issued.
	Idempotent bool `json:"idempotent"`
	// State is CallStarted until the call returns, then CallDone.
	State string `json:"state"`
}

// States of a Call.
const (
	CallStarted = "started"
	CallDone    = "done"
)

// MaxWorkItems bounds the entries of each list of a Work (a run is bounded by
// max_iterations anyway).
const MaxWorkItems = 1000
