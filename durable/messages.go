package durable

import (
	"bytes"
	"encoding/json"
	"slices"
	"unicode/utf8"

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
	// turn), encoded straight into the stored message when it is built (spliceText): a
	// growing buffer would hold up to twice the text while it grows.
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

// build encodes the messages for the store and empties the builder: the log calls it once,
// as it ends, and the encoded messages are then the only copy it holds of their text (the
// text joined for the encoding, and the deltas, are not kept beside them).
func (b *messageBuilder) build() []store.Message {
	out := make([]store.Message, 0, len(b.msgs))
	for i := range b.msgs {
		bm := &b.msgs[i]
		m := *bm.Message // a copy: the builder's message keeps no encoded text
		text, textN := bm.text, bm.textN
		bm.text = nil
		if text != nil || (m.Content == nil && len(m.ToolCalls) == 0 && m.Role != agui.RoleTool) {
			m.Content = json.RawMessage(`""`)
		}
		data, err := json.Marshal(&m)
		if err != nil {
			continue
		}
		if text != nil {
			data = spliceText(data, text, textN)
		}
		out = append(out, store.Message{ID: m.ID, Data: data})
	}
	*b = messageBuilder{}
	return out
}

// emptyContent is the content of a message encoded with empty text, where spliceText
// writes the text. It is the first such key: what precedes it (the id and role) is
// escaped, so holds no bare quote.
var emptyContent = []byte(`,"content":""`)

// spliceText returns data, a message encoded with empty text, with the text whose deltas
// are parts (textN bytes) in its content: the bytes json.Marshal gives for the message
// whose content is the joined text, encoded straight into one buffer, without the joined
// text, its encoding and the encoder's buffers beside each other.
func spliceText(data []byte, parts []string, textN int) []byte {
	at := bytes.Index(data, emptyContent)
	if at < 0 {
		return data
	}
	at += len(emptyContent) - 1 // the closing quote
	out := make([]byte, 0, len(data)+textN+textN/64)
	out = append(out, data[:at]...)
	var carry string
	for _, p := range parts {
		if carry != "" {
			p = carry + p
		}
		n := len(p) - incompleteTail(p)
		out = appendEscaped(out, p[:n])
		carry = p[n:]
	}
	out = appendEscaped(out, carry)
	return append(out, data[at:]...)
}

// appendEscaped appends s as json.Marshal writes it inside a string's quotes (HTML
// characters escaped, invalid bytes replaced). Escaping is rune by rune, so deltas cut
// between runes encode as their joined text does.
func appendEscaped(dst []byte, s string) []byte {
	if s == "" {
		return dst
	}
	enc, err := json.Marshal(s)
	if err != nil {
		return dst
	}
	return append(dst, enc[1:len(enc)-1]...)
}

// incompleteTail is the length of a rune begun but not completed at the end of s, which
// the next delta may complete.
func incompleteTail(s string) int {
	for i := 1; i < utf8.UTFMax && i <= len(s); i++ {
		if c := s[len(s)-i]; utf8.RuneStart(c) {
			if c >= utf8.RuneSelf && !utf8.FullRuneInString(s[len(s)-i:]) {
				return i
			}
			return 0
		}
	}
	return 0
}

// logMessages are the messages a run's stored events add to its thread, as its log builds
// them while it runs (events that cannot be decoded are skipped; withIDs).
func logMessages(evs []store.Event) []store.Message {
	var b messageBuilder
	for _, e := range evs {
		if ev, err := agui.DecodeEvent(e.Data); err == nil {
			b.add(ev)
		}
	}
	return withIDs(b.build())
}

// withIDs leaves out of msgs a message without an id, which the store would refuse with
// the others.
func withIDs(msgs []store.Message) []store.Message {
	return slices.DeleteFunc(msgs, func(m store.Message) bool { return m.ID == "" })
}
