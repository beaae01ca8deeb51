package coordinator

import (
	"github.com/baton-dev/baton/agui"
	"github.com/baton-dev/baton/llm"
)

// orphanResult stands in for a tool result the client never sent (a run that was cancelled
// mid-call, say); chat APIs refuse a tool call without a result.
const orphanResult = "[ERROR]\nNo result was recorded for this call (the run that made it ended early)."

// fromAGUI converts the client's message history into model messages. Activity and
// reasoning messages are the client's own and are not sent to the model.
func fromAGUI(msgs []agui.Message) []llm.Message {
	out, _ := convertHistory(msgs, 0, nil, -1)
	return out
}

// convertHistory is fromAGUI that, as it goes, drops the content of the first release
// messages, which are the run's own (the thread's history read from the store): a long
// thread is then held about once while it is converted, not twice. Each message with an
// id (the thread keeps it) is noted in stored (nil: not noted). region is how many of the
// model messages keyed by their text (history.Keys: neither tool results nor calls) come
// from msgs[:mark].
func convertHistory(msgs []agui.Message, release int, stored *storedMessages, mark int) (_ []llm.Message, region int) {
	out := make([]llm.Message, 0, len(msgs))
	answered := map[string]bool{}
	for _, m := range msgs {
		if m.Role == "tool" {
			answered[m.ToolCallID] = true
		}
	}
	for i, m := range msgs {
		if i < release {
			msgs[i].Content = nil
		}
		lm, ok := toLLM(m)
		if !ok {
			continue
		}
		if stored != nil {
			stored.note(lm, m.ID)
		}
		if i < mark && lm.Role != llm.RoleTool && len(lm.ToolCalls) == 0 {
			region++
		}
		out = append(out, lm)
		for _, tc := range lm.ToolCalls {
			if !answered[tc.ID] {
				out = append(out, llm.Message{Role: llm.RoleTool, ToolCallID: tc.ID, Content: orphanResult})
			}
		}
	}
	return reorderToolResults(out), region
}

// toLLM is m as the model reads it; false for a message the model is not sent (activity,
// reasoning, an assistant message with neither text nor calls).
func toLLM(m agui.Message) (llm.Message, bool) {
	switch m.Role {
	case "system", "developer":
		return llm.Message{Role: llm.RoleSystem, Content: m.Text()}, true
	case "user":
		return llm.Message{Role: llm.RoleUser, Content: m.Text()}, true
	case "assistant":
		am := llm.Message{Role: llm.RoleAssistant, Content: m.Text()}
		for _, tc := range m.ToolCalls {
			args := tc.Function.Arguments
			if args == "" {
				args = "{}"
			}
			am.ToolCalls = append(am.ToolCalls, llm.ToolCall{ID: tc.ID, Name: tc.Function.Name, Arguments: args})
		}
		return am, am.Content != "" || len(am.ToolCalls) > 0
	case "tool":
		return llm.Message{Role: llm.RoleTool, ToolCallID: m.ToolCallID, Content: m.Text()}, true
	}
	return llm.Message{}, false
}

// reorderToolResults moves each tool result right behind the assistant turn that made the
// call, as chat APIs require; clients may record them later (after other messages).
func reorderToolResults(in []llm.Message) []llm.Message {
	results := map[string]llm.Message{}
	for _, m := range in {
		if m.Role == llm.RoleTool {
			if _, dup := results[m.ToolCallID]; !dup || results[m.ToolCallID].Content == orphanResult {
				results[m.ToolCallID] = m
			}
		}
	}
	out := make([]llm.Message, 0, len(in))
	for _, m := range in {
		if m.Role == llm.RoleTool {
			continue
		}
		out = append(out, m)
		for _, tc := range m.ToolCalls {
			if res, ok := results[tc.ID]; ok {
				out = append(out, res)
				delete(results, tc.ID)
			}
		}
	}
	return out
}
