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
	return fromAGUIReleasing(msgs, 0)
}

// fromAGUIReleasing is fromAGUI that, as it goes, drops the content of the first release
// messages, which are the run's own (the thread's history read from the store): a long
// thread is then held about once while it is converted, not twice.
func fromAGUIReleasing(msgs []agui.Message, release int) []llm.Message {
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
		switch m.Role {
		case "system", "developer":
			out = append(out, llm.Message{Role: llm.RoleSystem, Content: m.Text()})
		case "user":
			out = append(out, llm.Message{Role: llm.RoleUser, Content: m.Text()})
		case "assistant":
			am := llm.Message{Role: llm.RoleAssistant, Content: m.Text()}
			for _, tc := range m.ToolCalls {
				args := tc.Function.Arguments
				if args == "" {
					args = "{}"
				}
				am.ToolCalls = append(am.ToolCalls, llm.ToolCall{ID: tc.ID, Name: tc.Function.Name, Arguments: args})
			}
			if am.Content == "" && len(am.ToolCalls) == 0 {
				continue
			}
			out = append(out, am)
			for _, tc := range am.ToolCalls {
				if !answered[tc.ID] {
					out = append(out, llm.Message{Role: llm.RoleTool, ToolCallID: tc.ID, Content: orphanResult})
				}
			}
		case "tool":
			out = append(out, llm.Message{Role: llm.RoleTool, ToolCallID: m.ToolCallID, Content: m.Text()})
		}
	}
	return reorderToolResults(out)
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
