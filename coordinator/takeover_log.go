package coordinator

import (
	"encoding/json"

	"github.com/baton-dev/baton/agui"
)

// storedEvent rebuilds, from a stored event, what the sequencer needs to know of it (what
// it opens and closes) and what the thread's messages are built from (text, tool calls and
// results); nil for other events.
func storedEvent(data json.RawMessage) agui.Event {
	var v struct {
		Delta               string `json:"delta"`
		Content             string `json:"content"`
		ParentMessageID     string `json:"parentMessageId"`
		Type                string `json:"type"`
		ThreadID            string `json:"threadId"`
		RunID               string `json:"runId"`
		MessageID           string `json:"messageId"`
		Role                string `json:"role"`
		ToolCallID          string `json:"toolCallId"`
		ToolCallName        string `json:"toolCallName"`
		StepName            string `json:"stepName"`
		SubagentRunID       string `json:"subagentRunId"`
		ParentSubagentRunID string `json:"parentSubagentRunId"`
		Name                string `json:"name"`
	}
	if json.Unmarshal(data, &v) != nil {
		return nil
	}
	switch agui.EventType(v.Type) {
	case agui.EventRunStarted:
		return &agui.RunStarted{ThreadID: v.ThreadID, RunID: v.RunID}
	case agui.EventTextMessageStart:
		return &agui.TextMessageStart{MessageID: v.MessageID, Role: v.Role, SubagentRunID: v.SubagentRunID}
	case agui.EventTextMessageContent:
		return &agui.TextMessageContent{MessageID: v.MessageID, Delta: v.Delta, SubagentRunID: v.SubagentRunID}
	case agui.EventTextMessageEnd:
		return &agui.TextMessageEnd{MessageID: v.MessageID, SubagentRunID: v.SubagentRunID}
	case agui.EventToolCallStart:
		return &agui.ToolCallStart{ToolCallID: v.ToolCallID, ToolCallName: v.ToolCallName, ParentMessageID: v.ParentMessageID, SubagentRunID: v.SubagentRunID}
	case agui.EventToolCallArgs:
		return &agui.ToolCallArgs{ToolCallID: v.ToolCallID, Delta: v.Delta, SubagentRunID: v.SubagentRunID}
	case agui.EventToolCallResult:
		return &agui.ToolCallResult{MessageID: v.MessageID, ToolCallID: v.ToolCallID, Content: v.Content, Role: v.Role, SubagentRunID: v.SubagentRunID}
	case agui.EventToolCallEnd:
		return &agui.ToolCallEnd{ToolCallID: v.ToolCallID, SubagentRunID: v.SubagentRunID}
	case agui.EventStepStarted:
		return &agui.StepStarted{StepName: v.StepName, SubagentRunID: v.SubagentRunID}
	case agui.EventStepFinished:
		return &agui.StepFinished{StepName: v.StepName, SubagentRunID: v.SubagentRunID}
	case agui.EventSubagentStarted:
		return &agui.SubagentStarted{SubagentRunID: v.SubagentRunID, Name: v.Name, ParentSubagentRunID: v.ParentSubagentRunID}
	case agui.EventSubagentFinished:
		return &agui.SubagentFinished{SubagentRunID: v.SubagentRunID}
	case agui.EventSubagentError:
		return &agui.SubagentError{SubagentRunID: v.SubagentRunID}
	}
	return nil
}
