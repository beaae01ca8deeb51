package agui

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"unicode/utf8"
)

// ErrUnknownEvent is returned by DecodeEvent for a type this package does not define.
var ErrUnknownEvent = errors.New("agui: unknown event type")

// appendFrame appends one SSE frame, "data: <json>\n\n", to dst. Framing is LF only (the
// official client splits on "\n\n" and dies on CRLF) and the JSON never contains a raw newline.
// On error dst is returned unchanged.
func appendFrame(dst []byte, ev Event) ([]byte, error) {
	n := len(dst)
	dst = append(dst, "data: "...)
	dst, err := appendEvent(dst, ev)
	if err != nil {
		return dst[:n], err
	}
	return append(dst, '\n', '\n'), nil
}

// MarshalEvent returns the JSON object of ev, with "type" as its first key.
func MarshalEvent(ev Event) ([]byte, error) {
	return appendEvent(nil, ev)
}

// enc writes one JSON object. Every field after "type" is prefixed with a comma, so the
// object is always opened by head.
type enc struct {
	b   []byte
	err error
}

func (e *enc) head(t EventType, b *Base) {
	e.b = append(e.b, `{"type":`...)
	e.b = appendString(e.b, string(t))
	if b.Timestamp != 0 {
		e.b = append(e.b, `,"timestamp":`...)
		e.b = strconv.AppendInt(e.b, b.Timestamp, 10)
	}
}

func (e *enc) tail(b *Base) {
	if len(b.Metadata) > 0 {
		e.optVal("metadata", b.Metadata)
	}
	e.b = append(e.b, '}')
}

func (e *enc) key(k string) {
	e.b = append(e.b, ',', '"')
	e.b = append(e.b, k...)
	e.b = append(e.b, '"', ':')
}

// str writes a required string, even when empty.
func (e *enc) str(k, v string) {
	e.key(k)
	e.b = appendString(e.b, v)
}

// optStr writes an optional string, omitted when empty.
func (e *enc) optStr(k, v string) {
	if v != "" {
		e.str(k, v)
	}
}

// val writes a required value; nil (or anything that encodes as null) is written as def,
// because the client rejects null in every field.
func (e *enc) val(k string, v any, def string) {
	e.key(k)
	raw, err := marshalValue(v)
	if err != nil {
		e.fail(k, err)
		return
	}
	if raw == nil {
		raw = []byte(def)
	}
	e.b = append(e.b, raw...)
}

// optVal writes an optional value, omitted when nil or null.
func (e *enc) optVal(k string, v any) {
	raw, err := marshalValue(v)
	if err != nil {
		e.fail(k, err)
		return
	}
	if raw == nil {
		return
	}
	e.key(k)
	e.b = append(e.b, raw...)
}

func (e *enc) fail(k string, err error) {
	if e.err == nil {
		e.err = fmt.Errorf("agui: encode field %q: %w", k, err)
	}
}

// marshalValue encodes v compactly; it returns nil for nil and for values that encode as null.
func marshalValue(v any) ([]byte, error) {
	switch x := v.(type) {
	case nil:
		return nil, nil
	case string:
		return appendString(nil, x), nil
	case json.RawMessage:
		if len(bytes.TrimSpace(x)) == 0 {
			return nil, nil
		}
	}
	raw, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	if string(raw) == "null" {
		return nil, nil
	}
	return raw, nil
}

// appendEvent appends the JSON object of ev. The hot event types are written without
// reflection; values of type any go through encoding/json.
func appendEvent(dst []byte, ev Event) ([]byte, error) {
	e := enc{b: dst}
	switch v := ev.(type) {
	case nil:
		return dst, errors.New("agui: nil event")
	case *TextMessageContent:
		if v == nil {
			return dst, errNilEvent(ev)
		}
		e.head(EventTextMessageContent, &v.Base)
		e.str("messageId", v.MessageID)
		e.str("delta", v.Delta)
		e.optStr("subagentRunId", v.SubagentRunID)
		e.tail(&v.Base)
	case *ToolCallArgs:
		if v == nil {
			return dst, errNilEvent(ev)
		}
		e.head(EventToolCallArgs, &v.Base)
		e.str("toolCallId", v.ToolCallID)
		e.str("delta", v.Delta)
		e.optStr("subagentRunId", v.SubagentRunID)
		e.tail(&v.Base)
	case *TextMessageStart:
		if v == nil {
			return dst, errNilEvent(ev)
		}
		e.head(EventTextMessageStart, &v.Base)
		e.str("messageId", v.MessageID)
		e.optStr("role", v.Role)
		e.optStr("name", v.Name)
		e.optStr("subagentRunId", v.SubagentRunID)
		e.tail(&v.Base)
	case *TextMessageEnd:
		if v == nil {
			return dst, errNilEvent(ev)
		}
		e.head(EventTextMessageEnd, &v.Base)
		e.str("messageId", v.MessageID)
		e.optStr("subagentRunId", v.SubagentRunID)
		e.tail(&v.Base)
	case *ToolCallStart:
		if v == nil {
			return dst, errNilEvent(ev)
		}
		e.head(EventToolCallStart, &v.Base)
		e.str("toolCallId", v.ToolCallID)
		e.str("toolCallName", v.ToolCallName)
		e.optStr("parentMessageId", v.ParentMessageID)
		e.optStr("subagentRunId", v.SubagentRunID)
		e.tail(&v.Base)
	case *ToolCallEnd:
		if v == nil {
			return dst, errNilEvent(ev)
		}
		e.head(EventToolCallEnd, &v.Base)
		e.str("toolCallId", v.ToolCallID)
		e.optStr("subagentRunId", v.SubagentRunID)
		e.tail(&v.Base)
	case *ToolCallResult:
		if v == nil {
			return dst, errNilEvent(ev)
		}
		e.head(EventToolCallResult, &v.Base)
		e.str("messageId", v.MessageID)
		e.str("toolCallId", v.ToolCallID)
		e.str("content", v.Content)
		e.optStr("role", v.Role)
		e.optStr("subagentRunId", v.SubagentRunID)
		e.tail(&v.Base)
	case *RunStarted:
		if v == nil {
			return dst, errNilEvent(ev)
		}
		e.head(EventRunStarted, &v.Base)
		e.str("threadId", v.ThreadID)
		e.str("runId", v.RunID)
		e.optStr("parentRunId", v.ParentRunID)
		e.optStr("protocolVersion", v.ProtocolVersion)
		e.tail(&v.Base)
	case *RunFinished:
		if v == nil {
			return dst, errNilEvent(ev)
		}
		e.head(EventRunFinished, &v.Base)
		e.str("threadId", v.ThreadID)
		e.str("runId", v.RunID)
		if v.Outcome != nil {
			e.optVal("outcome", v.Outcome)
		}
		e.optVal("result", v.Result)
		e.tail(&v.Base)
	case *RunError:
		if v == nil {
			return dst, errNilEvent(ev)
		}
		e.head(EventRunError, &v.Base)
		e.str("message", v.Message)
		e.optStr("code", v.Code)
		e.tail(&v.Base)
	case *StepStarted:
		if v == nil {
			return dst, errNilEvent(ev)
		}
		e.head(EventStepStarted, &v.Base)
		e.str("stepName", v.StepName)
		e.optStr("subagentRunId", v.SubagentRunID)
		e.tail(&v.Base)
	case *StepFinished:
		if v == nil {
			return dst, errNilEvent(ev)
		}
		e.head(EventStepFinished, &v.Base)
		e.str("stepName", v.StepName)
		e.optStr("subagentRunId", v.SubagentRunID)
		e.tail(&v.Base)
	case *StateSnapshot:
		if v == nil {
			return dst, errNilEvent(ev)
		}
		e.head(EventStateSnapshot, &v.Base)
		e.val("snapshot", v.Snapshot, "{}")
		e.tail(&v.Base)
	case *StateDelta:
		if v == nil {
			return dst, errNilEvent(ev)
		}
		e.head(EventStateDelta, &v.Base)
		e.val("delta", v.Delta, "[]")
		e.tail(&v.Base)
	case *MessagesSnapshot:
		if v == nil {
			return dst, errNilEvent(ev)
		}
		e.head(EventMessagesSnapshot, &v.Base)
		e.key("messages")
		e.b = append(e.b, '[')
		for i := range v.Messages {
			if i > 0 {
				e.b = append(e.b, ',')
			}
			e.b = v.Messages[i].appendJSON(e.b)
		}
		e.b = append(e.b, ']')
		e.tail(&v.Base)
	case *ActivitySnapshot:
		if v == nil {
			return dst, errNilEvent(ev)
		}
		e.head(EventActivitySnapshot, &v.Base)
		e.str("messageId", v.MessageID)
		e.str("activityType", v.ActivityType)
		e.val("content", v.Content, "{}")
		if v.Replace != nil {
			e.key("replace")
			e.b = strconv.AppendBool(e.b, *v.Replace)
		}
		e.optStr("subagentRunId", v.SubagentRunID)
		e.tail(&v.Base)
	case *Custom:
		if v == nil {
			return dst, errNilEvent(ev)
		}
		e.head(EventCustom, &v.Base)
		e.str("name", v.Name)
		e.val("value", v.Value, "{}")
		e.optStr("subagentRunId", v.SubagentRunID)
		e.tail(&v.Base)
	case *SubagentStarted:
		if v == nil {
			return dst, errNilEvent(ev)
		}
		e.head(EventSubagentStarted, &v.Base)
		e.str("subagentRunId", v.SubagentRunID)
		e.str("name", v.Name)
		e.optStr("description", v.Description)
		e.optStr("parentSubagentRunId", v.ParentSubagentRunID)
		e.optStr("parentToolCallId", v.ParentToolCallID)
		e.optStr("parentMessageId", v.ParentMessageID)
		e.tail(&v.Base)
	case *SubagentFinished:
		if v == nil {
			return dst, errNilEvent(ev)
		}
		e.head(EventSubagentFinished, &v.Base)
		e.str("subagentRunId", v.SubagentRunID)
		if v.Outcome != nil {
			e.optVal("outcome", v.Outcome)
		}
		e.optVal("result", v.Result)
		e.tail(&v.Base)
	case *SubagentError:
		if v == nil {
			return dst, errNilEvent(ev)
		}
		e.head(EventSubagentError, &v.Base)
		e.str("subagentRunId", v.SubagentRunID)
		e.str("message", v.Message)
		e.optStr("code", v.Code)
		e.tail(&v.Base)
	default:
		return appendForeign(dst, ev)
	}
	if e.err != nil {
		return dst, e.err
	}
	return e.b, nil
}

func errNilEvent(ev Event) error {
	return fmt.Errorf("agui: nil %T event", ev)
}

// appendForeign encodes an Event defined outside this package: its own JSON object with the
// wire type put in front.
func appendForeign(dst []byte, ev Event) ([]byte, error) {
	raw, err := json.Marshal(ev)
	if err != nil {
		return dst, fmt.Errorf("agui: encode %s: %w", ev.EventType(), err)
	}
	if len(raw) < 2 || raw[0] != '{' {
		return dst, fmt.Errorf("agui: encode %s: event must encode as a JSON object", ev.EventType())
	}
	dst = append(dst, `{"type":`...)
	dst = appendString(dst, string(ev.EventType()))
	if len(raw) > 2 {
		dst = append(dst, ',')
	}
	return append(dst, raw[1:]...), nil
}

// appendJSON writes a message with every optional field omitted when empty; a null content is
// treated as absent.
func (m *Message) appendJSON(dst []byte) []byte {
	e := enc{b: dst}
	e.b = append(e.b, `{"id":`...)
	e.b = appendString(e.b, m.ID)
	e.str("role", m.Role)
	if c := bytes.TrimSpace(m.Content); len(c) > 0 && string(c) != "null" {
		var buf bytes.Buffer
		if json.Compact(&buf, c) == nil {
			e.key("content")
			e.b = append(e.b, buf.Bytes()...)
		}
	}
	e.optStr("name", m.Name)
	if len(m.ToolCalls) > 0 {
		e.key("toolCalls")
		e.b = append(e.b, '[')
		for i, tc := range m.ToolCalls {
			if i > 0 {
				e.b = append(e.b, ',')
			}
			typ := tc.Type
			if typ == "" {
				typ = "function"
			}
			e.b = append(e.b, `{"id":`...)
			e.b = appendString(e.b, tc.ID)
			e.str("type", typ)
			e.b = append(e.b, `,"function":{"name":`...)
			e.b = appendString(e.b, tc.Function.Name)
			e.str("arguments", tc.Function.Arguments)
			e.b = append(e.b, '}', '}')
		}
		e.b = append(e.b, ']')
	}
	e.optStr("toolCallId", m.ToolCallID)
	e.optStr("error", m.Error)
	e.optStr("activityType", m.ActivityType)
	e.optStr("subagentRunId", m.SubagentRunID)
	return append(e.b, '}')
}

// MarshalJSON implements json.Marshaler with the same rules as the event encoder.
func (m Message) MarshalJSON() ([]byte, error) { return m.appendJSON(nil), nil }

// MarshalJSON implements json.Marshaler, writing "type" first.
func (v RunStarted) MarshalJSON() ([]byte, error) { return appendEvent(nil, &v) }

// MarshalJSON implements json.Marshaler, writing "type" first.
func (v RunFinished) MarshalJSON() ([]byte, error) { return appendEvent(nil, &v) }

// MarshalJSON implements json.Marshaler, writing "type" first.
func (v RunError) MarshalJSON() ([]byte, error) { return appendEvent(nil, &v) }

// MarshalJSON implements json.Marshaler, writing "type" first.
func (v StepStarted) MarshalJSON() ([]byte, error) { return appendEvent(nil, &v) }

// MarshalJSON implements json.Marshaler, writing "type" first.
func (v StepFinished) MarshalJSON() ([]byte, error) { return appendEvent(nil, &v) }

// MarshalJSON implements json.Marshaler, writing "type" first.
func (v TextMessageStart) MarshalJSON() ([]byte, error) { return appendEvent(nil, &v) }

// MarshalJSON implements json.Marshaler, writing "type" first.
func (v TextMessageContent) MarshalJSON() ([]byte, error) { return appendEvent(nil, &v) }

// MarshalJSON implements json.Marshaler, writing "type" first.
func (v TextMessageEnd) MarshalJSON() ([]byte, error) { return appendEvent(nil, &v) }

// MarshalJSON implements json.Marshaler, writing "type" first.
func (v ToolCallStart) MarshalJSON() ([]byte, error) { return appendEvent(nil, &v) }

// MarshalJSON implements json.Marshaler, writing "type" first.
func (v ToolCallArgs) MarshalJSON() ([]byte, error) { return appendEvent(nil, &v) }

// MarshalJSON implements json.Marshaler, writing "type" first.
func (v ToolCallEnd) MarshalJSON() ([]byte, error) { return appendEvent(nil, &v) }

// MarshalJSON implements json.Marshaler, writing "type" first.
func (v ToolCallResult) MarshalJSON() ([]byte, error) { return appendEvent(nil, &v) }

// MarshalJSON implements json.Marshaler, writing "type" first.
func (v StateSnapshot) MarshalJSON() ([]byte, error) { return appendEvent(nil, &v) }

// MarshalJSON implements json.Marshaler, writing "type" first.
func (v StateDelta) MarshalJSON() ([]byte, error) { return appendEvent(nil, &v) }

// MarshalJSON implements json.Marshaler, writing "type" first.
func (v MessagesSnapshot) MarshalJSON() ([]byte, error) { return appendEvent(nil, &v) }

// MarshalJSON implements json.Marshaler, writing "type" first.
func (v ActivitySnapshot) MarshalJSON() ([]byte, error) { return appendEvent(nil, &v) }

// MarshalJSON implements json.Marshaler, writing "type" first.
func (v Custom) MarshalJSON() ([]byte, error) { return appendEvent(nil, &v) }

// MarshalJSON implements json.Marshaler, writing "type" first.
func (v SubagentStarted) MarshalJSON() ([]byte, error) { return appendEvent(nil, &v) }

// MarshalJSON implements json.Marshaler, writing "type" first.
func (v SubagentFinished) MarshalJSON() ([]byte, error) { return appendEvent(nil, &v) }

// MarshalJSON implements json.Marshaler, writing "type" first.
func (v SubagentError) MarshalJSON() ([]byte, error) { return appendEvent(nil, &v) }

// newEvent returns an empty event of the given wire type.
func newEvent(t EventType) Event {
	switch t {
	case EventRunStarted:
		return &RunStarted{}
	case EventRunFinished:
		return &RunFinished{}
	case EventRunError:
		return &RunError{}
	case EventStepStarted:
		return &StepStarted{}
	case EventStepFinished:
		return &StepFinished{}
	case EventTextMessageStart:
		return &TextMessageStart{}
	case EventTextMessageContent:
		return &TextMessageContent{}
	case EventTextMessageEnd:
		return &TextMessageEnd{}
	case EventToolCallStart:
		return &ToolCallStart{}
	case EventToolCallArgs:
		return &ToolCallArgs{}
	case EventToolCallEnd:
		return &ToolCallEnd{}
	case EventToolCallResult:
		return &ToolCallResult{}
	case EventStateSnapshot:
		return &StateSnapshot{}
	case EventStateDelta:
		return &StateDelta{}
	case EventMessagesSnapshot:
		return &MessagesSnapshot{}
	case EventActivitySnapshot:
		return &ActivitySnapshot{}
	case EventCustom:
		return &Custom{}
	case EventSubagentStarted:
		return &SubagentStarted{}
	case EventSubagentFinished:
		return &SubagentFinished{}
	case EventSubagentError:
		return &SubagentError{}
	}
	return nil
}

// DecodeEvent parses one event object, as found in an SSE frame's data. It is meant for tests
// and tools that read Baton's streams; a type this package does not define gives an error
// wrapping ErrUnknownEvent.
func DecodeEvent(data []byte) (Event, error) {
	var head struct {
		Type EventType `json:"type"`
	}
	if err := json.Unmarshal(data, &head); err != nil {
		return nil, fmt.Errorf("agui: decode event: %w", err)
	}
	ev := newEvent(head.Type)
	if ev == nil {
		return nil, fmt.Errorf("%w %q", ErrUnknownEvent, head.Type)
	}
	if err := json.Unmarshal(data, ev); err != nil {
		return nil, fmt.Errorf("agui: decode %s: %w", head.Type, err)
	}
	return ev, nil
}

// safeASCII marks the ASCII bytes that need no escaping inside a JSON string.
var safeASCII = func() (t [utf8.RuneSelf]bool) {
	for b := 0x20; b < utf8.RuneSelf; b++ {
		t[b] = b != '"' && b != '\\'
	}
	return t
}()

const hexDigits = "0123456789abcdef"

// appendString appends s as a JSON string. It escapes like encoding/json except that it leaves
// <, > and & alone (nothing here is embedded in HTML): control characters are escaped (so a
// frame never holds a raw newline), invalid UTF-8 becomes U+FFFD, and U+2028/U+2029 are
// escaped for JavaScript consumers.
func appendString(dst []byte, s string) []byte {
	dst = append(dst, '"')
	start := 0
	for i := 0; i < len(s); {
		if b := s[i]; b < utf8.RuneSelf {
			if safeASCII[b] {
				i++
				continue
			}
			dst = append(dst, s[start:i]...)
			switch b {
			case '"', '\\':
				dst = append(dst, '\\', b)
			case '\n':
				dst = append(dst, '\\', 'n')
			case '\r':
				dst = append(dst, '\\', 'r')
			case '\t':
				dst = append(dst, '\\', 't')
			case '\b':
				dst = append(dst, '\\', 'b')
			case '\f':
				dst = append(dst, '\\', 'f')
			default:
				dst = append(dst, '\\', 'u', '0', '0', hexDigits[b>>4], hexDigits[b&0xF])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			dst = append(dst, s[start:i]...)
			dst = append(dst, `\ufffd`...)
			i += size
			start = i
			continue
		}
		if r == '\u2028' || r == '\u2029' {
			dst = append(dst, s[start:i]...)
			dst = append(dst, '\\', 'u', '2', '0', '2', hexDigits[r&0xF])
			i += size
			start = i
			continue
		}
		i += size
	}
	dst = append(dst, s[start:]...)
	return append(dst, '"')
}
