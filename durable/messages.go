package durable

import (
	"encoding/json"
	"strings"

	"github.com/baton-dev/baton/agui"
	"github.com/baton-dev/baton/store"
)

// messageBuilder turns a run's events into the AG-UI messages they add to the thread: the
// assistant's text and tool calls, and the tool results. Sub-agent output (attributed with
// subagentRunId) is progress, not conversation, and is left out. Messages and calls are
// kept in slices searched from the newest (events almost always continue the latest): an
// open run retains these, and maps would cost more than the few entries.
type messageBuilder struct {
	msgs  []builtMessage // in order
	owner []callOwner    // tool call id -> message id
}

type builtMessage struct {
	*agui.Message
	// text is the message's text so far as its deltas (shared with the run's events and
	// turn), joined once when the message is built: a growing buffer would hold up to
	// twice the text while it grows.
	text  []string
	textN int
}

type callOwner struct{ call, msg string }

// activityCompaction is the activityType of a compaction's ACTIVITY_SNAPSHOT, which the
// thread keeps as a message (design/history.md).
const activityCompaction = "compaction"

// maxMessageBytes bounds the text collected per message.
const maxMessageBytes = 1 << 20

func (b *messageBuilder) find(id string) *builtMessage {
	for i := len(b.msgs) - 1; i >= 0; i-- {
		if b.msgs[i].ID == id {
			return &b.msgs[i]
		}
	}
	return nil
}

func (b *messageBuilder) msg(id, role string) *agui.Message {
	if m := b.find(id); m != nil {
		return m.Message
	}
	m := &agui.Message{ID: id, Role: role}
	b.msgs = append(b.msgs, builtMessage{Message: m})
	return m
}

func (b *messageBuilder) ownerOf(callID string) string {
	for i := len(b.owner) - 1; i >= 0; i-- {
		if b.owner[i].call == callID {
			return b.owner[i].msg
		}
	}
	return ""
}

func (b *messageBuilder) add(ev agui.Event) {
	switch v := ev.(type) {
	case *agui.TextMessageStart:
		if v.SubagentRunID == "" {
			role := v.Role
			if role == "" {
				role = agui.RoleAssistant
			}
			b.msg(v.MessageID, role)
		}
	case *agui.TextMessageContent:
		if m := b.find(v.MessageID); m != nil && v.SubagentRunID == "" {
			if v.Delta != "" && m.textN+len(v.Delta) <= maxMessageBytes {
				m.text = append(m.text, v.Delta)
				m.textN += len(v.Delta)
			}
		}
	case *agui.ToolCallStart:
		if v.SubagentRunID != "" {
			return
		}
		parent := v.ParentMessageID
		if parent == "" {
			parent = v.ToolCallID
		}
		m := b.msg(parent, agui.RoleAssistant)
		m.ToolCalls = append(m.ToolCalls, agui.ToolCall{ID: v.ToolCallID, Type: "function", Function: agui.FunctionCall{Name: v.ToolCallName}})
		b.owner = append(b.owner, callOwner{call: v.ToolCallID, msg: parent})
	case *agui.ToolCallArgs:
		if v.SubagentRunID != "" {
			return
		}
		parent := b.ownerOf(v.ToolCallID)
		if m := b.find(parent); m != nil && parent != "" {
			for i := range m.ToolCalls {
				if m.ToolCalls[i].ID == v.ToolCallID && len(m.ToolCalls[i].Function.Arguments)+len(v.Delta) <= maxMessageBytes {
					m.ToolCalls[i].Function.Arguments += v.Delta
				}
			}
		}
	case *agui.ActivitySnapshot:
		// A compaction's summary is the thread's too, marked as such (an activity message
		// beside the messages it replaced, which the thread keeps).
		if v.ActivityType == activityCompaction && v.SubagentRunID == "" {
			m := b.msg(v.MessageID, agui.RoleActivity)
			m.ActivityType = v.ActivityType
			m.Content, _ = json.Marshal(v.Content)
		}
	case *agui.ToolCallResult:
		if v.SubagentRunID == "" {
			m := b.msg(v.MessageID, agui.RoleTool)
			m.ToolCallID = v.ToolCallID
			m.Content, _ = json.Marshal(v.Content)
		}
	}
}

func (b *messageBuilder) build() []store.Message {
	out := make([]store.Message, 0, len(b.msgs))
	for _, bm := range b.msgs {
		m, id := bm.Message, bm.ID
		if bm.text != nil {
			m.Content, _ = json.Marshal(strings.Join(bm.text, ""))
		}
		if m.Content == nil && len(m.ToolCalls) == 0 && m.Role != agui.RoleTool {
			m.Content = json.RawMessage(`""`)
		}
		data, err := json.Marshal(m)
		if err != nil {
			continue
		}
		out = append(out, store.Message{ID: id, Data: data})
	}
	return out
}
