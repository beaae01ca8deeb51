package coordinator

import (
	"context"
	"encoding/json"

	"github.com/baton-dev/baton/agui"
	"github.com/baton-dev/baton/store"
)

// readLog reads a run's whole event log.
func (e *Engine) readLog(ctx context.Context, threadID, runID string) ([]store.Event, error) {
	var out []store.Event
	var last int64
	for {
		evs, err := e.cfg.Store.Events(ctx, threadID, runID, last, store.MaxEventsRead)
		if err != nil {
			return nil, err
		}
		if len(evs) == 0 {
			return out, nil
		}
		out = append(out, evs...)
		last = evs[len(evs)-1].Seq
	}
}

// lastSeq is the number of the last of evs (0 for none).
func lastSeq(evs []store.Event) int64 {
	if n := len(evs); n > 0 {
		return evs[n-1].Seq
	}
	return 0
}

// terminalOf returns the store's end state of a run whose log ends with its terminal
// event, or "".
func terminalOf(evs []store.Event) string {
	if len(evs) == 0 {
		return ""
	}
	var head struct {
		Type    string `json:"type"`
		Outcome *struct {
			Type string `json:"type"`
		} `json:"outcome"`
	}
	if json.Unmarshal(evs[len(evs)-1].Data, &head) != nil {
		return ""
	}
	switch agui.EventType(head.Type) {
	case agui.EventRunFinished:
		if head.Outcome != nil && head.Outcome.Type == agui.OutcomeInterrupt {
			return string(OutcomeInterrupt)
		}
		if head.Outcome != nil && head.Outcome.Type == agui.OutcomeCancelled {
			return string(OutcomeCancelled)
		}
		return string(OutcomeCompleted)
	case agui.EventRunError:
		return string(OutcomeError)
	}
	return ""
}

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
