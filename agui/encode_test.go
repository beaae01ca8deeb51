package agui

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func ptr[T any](v T) *T { return &v }

func TestEncodeExactBytes(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		ev   Event
		want string
	}{
		{
			name: "empty delta is sent",
			ev:   &TextMessageContent{MessageID: "m1", Delta: ""},
			want: `{"type":"TEXT_MESSAGE_CONTENT","messageId":"m1","delta":""}`,
		},
		{
			name: "timestamp integer, escapes, attribution",
			ev: &TextMessageContent{Base: Base{Timestamp: 1700000000123}, MessageID: "m1",
				Delta: "a\nb\"c\\d\te\u2028<&>\x01", SubagentRunID: "sa-1"},
			want: `{"type":"TEXT_MESSAGE_CONTENT","timestamp":1700000000123,"messageId":"m1","delta":"a\nb\"c\\d\te\u2028<&>\u0001","subagentRunId":"sa-1"}`,
		},
		{
			name: "run started optional fields omitted",
			ev:   &RunStarted{ThreadID: "t1", RunID: "r1"},
			want: `{"type":"RUN_STARTED","threadId":"t1","runId":"r1"}`,
		},
		{
			name: "run started full",
			ev:   &RunStarted{ThreadID: "t1", RunID: "r1", ParentRunID: "r0", ProtocolVersion: "1.0"},
			want: `{"type":"RUN_STARTED","threadId":"t1","runId":"r1","parentRunId":"r0","protocolVersion":"1.0"}`,
		},
		{
			name: "run finished bare",
			ev:   &RunFinished{ThreadID: "t1", RunID: "r1"},
			want: `{"type":"RUN_FINISHED","threadId":"t1","runId":"r1"}`,
		},
		{
			name: "run finished null result omitted",
			ev:   &RunFinished{ThreadID: "t1", RunID: "r1", Result: json.RawMessage("null")},
			want: `{"type":"RUN_FINISHED","threadId":"t1","runId":"r1"}`,
		},
		{
			name: "run finished interrupt outcome and compacted raw result",
			ev: &RunFinished{ThreadID: "t1", RunID: "r1", Result: json.RawMessage("{ \"ok\" :\n true }"),
				Outcome: &Outcome{Type: OutcomeInterrupt, Interrupts: []Interrupt{{
					ID: "int-1", Reason: "input_required", SubagentRunID: "sa-1",
					ResponseSchema: map[string]any{"type": "object"},
				}}}},
			want: `{"type":"RUN_FINISHED","threadId":"t1","runId":"r1","outcome":{"type":"interrupt","interrupts":[{"id":"int-1","reason":"input_required","responseSchema":{"type":"object"},"subagentRunId":"sa-1"}]},"result":{"ok":true}}`,
		},
		{
			name: "run finished success with pending tool calls",
			ev: &RunFinished{ThreadID: "t1", RunID: "r1",
				Outcome: &Outcome{Type: OutcomeSuccess, PendingToolCallIDs: []string{"ask1"}}},
			want: `{"type":"RUN_FINISHED","threadId":"t1","runId":"r1","outcome":{"type":"success","pendingToolCallIds":["ask1"]}}`,
		},
		{
			name: "run error without code",
			ev:   &RunError{Message: "boom"},
			want: `{"type":"RUN_ERROR","message":"boom"}`,
		},
		{
			name: "custom nil value becomes object",
			ev:   &Custom{Name: "baton.failure"},
			want: `{"type":"CUSTOM","name":"baton.failure","value":{}}`,
		},
		{
			name: "custom string value",
			ev:   &Custom{Name: "on_interrupt", Value: `{"a":1}`},
			want: `{"type":"CUSTOM","name":"on_interrupt","value":"{\"a\":1}"}`,
		},
		{
			name: "state snapshot nil",
			ev:   &StateSnapshot{},
			want: `{"type":"STATE_SNAPSHOT","snapshot":{}}`,
		},
		{
			name: "state delta nil",
			ev:   &StateDelta{},
			want: `{"type":"STATE_DELTA","delta":[]}`,
		},
		{
			name: "activity snapshot nil content, replace false",
			ev:   &ActivitySnapshot{MessageID: "a1", ActivityType: "progress", Replace: ptr(false)},
			want: `{"type":"ACTIVITY_SNAPSHOT","messageId":"a1","activityType":"progress","content":{},"replace":false}`,
		},
		{
			name: "activity snapshot content",
			ev: &ActivitySnapshot{MessageID: "a1", ActivityType: "progress",
				Content: map[string]any{"progress": 1, "total": 2}},
			want: `{"type":"ACTIVITY_SNAPSHOT","messageId":"a1","activityType":"progress","content":{"progress":1,"total":2}}`,
		},
		{
			name: "tool call result empty content is sent",
			ev:   &ToolCallResult{MessageID: "m2", ToolCallID: "tc1", Content: "", Role: "tool"},
			want: `{"type":"TOOL_CALL_RESULT","messageId":"m2","toolCallId":"tc1","content":"","role":"tool"}`,
		},
		{
			name: "tool call start",
			ev:   &ToolCallStart{ToolCallID: "tc1", ToolCallName: "search", ParentMessageID: "m1"},
			want: `{"type":"TOOL_CALL_START","toolCallId":"tc1","toolCallName":"search","parentMessageId":"m1"}`,
		},
		{
			name: "tool call args empty delta",
			ev:   &ToolCallArgs{ToolCallID: "tc1"},
			want: `{"type":"TOOL_CALL_ARGS","toolCallId":"tc1","delta":""}`,
		},
		{
			name: "subagent started",
			ev:   &SubagentStarted{SubagentRunID: "sa-1", Name: "research", ParentToolCallID: "tc1"},
			want: `{"type":"SUBAGENT_STARTED","subagentRunId":"sa-1","name":"research","parentToolCallId":"tc1"}`,
		},
		{
			name: "subagent finished suspended",
			ev: &SubagentFinished{SubagentRunID: "sa-1",
				Outcome: &SubagentOutcome{Type: SubagentOutcomeSuspended, InterruptIDs: []string{"i1"}}},
			want: `{"type":"SUBAGENT_FINISHED","subagentRunId":"sa-1","outcome":{"type":"suspended","interruptIds":["i1"]}}`,
		},
		{
			name: "subagent error",
			ev:   &SubagentError{SubagentRunID: "sa-1", Message: "failed", Code: "failed"},
			want: `{"type":"SUBAGENT_ERROR","subagentRunId":"sa-1","message":"failed","code":"failed"}`,
		},
		{
			name: "metadata last, empty metadata omitted",
			ev:   &StepStarted{Base: Base{Metadata: map[string]any{"k": "v"}}, StepName: "plan"},
			want: `{"type":"STEP_STARTED","stepName":"plan","metadata":{"k":"v"}}`,
		},
		{
			name: "empty metadata map omitted",
			ev:   &StepFinished{Base: Base{Metadata: map[string]any{}}, StepName: "plan"},
			want: `{"type":"STEP_FINISHED","stepName":"plan"}`,
		},
		{
			name: "messages snapshot nil",
			ev:   &MessagesSnapshot{},
			want: `{"type":"MESSAGES_SNAPSHOT","messages":[]}`,
		},
		{
			name: "messages snapshot with tool calls and null content",
			ev: &MessagesSnapshot{Messages: []Message{
				{ID: "u1", Role: RoleUser, Content: StringContent("hi")},
				{ID: "a1", Role: RoleAssistant, Content: json.RawMessage("null"), ToolCalls: []ToolCall{
					{ID: "tc1", Function: FunctionCall{Name: "search", Arguments: `{"q":"x"}`}}}},
				{ID: "t1", Role: RoleTool, Content: StringContent("[OK]"), ToolCallID: "tc1"},
			}},
			want: `{"type":"MESSAGES_SNAPSHOT","messages":[{"id":"u1","role":"user","content":"hi"},` +
				`{"id":"a1","role":"assistant","toolCalls":[{"id":"tc1","type":"function","function":{"name":"search","arguments":"{\"q\":\"x\"}"}}]},` +
				`{"id":"t1","role":"tool","content":"[OK]","toolCallId":"tc1"}]}`,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := MarshalEvent(tt.ev)
			require.NoError(t, err)
			assert.Equal(t, tt.want, string(got))
			assert.True(t, json.Valid(got))

			// json.Marshal agrees with the encoder (it may escape <, > and & differently).
			viaJSON, err := json.Marshal(tt.ev)
			require.NoError(t, err)
			assert.JSONEq(t, tt.want, string(viaJSON))
			assert.True(t, bytes.HasPrefix(viaJSON, []byte(`{"type":`)), string(viaJSON))

			// Decoding and re-encoding is lossless.
			back, err := DecodeEvent(got)
			require.NoError(t, err)
			again, err := MarshalEvent(back)
			require.NoError(t, err)
			assert.Equal(t, tt.want, string(again))
		})
	}
}

// TestZeroEventsHaveNoNull encodes the zero value of every event type: the type comes first,
// no member is null, and every required member is present.
func TestZeroEventsHaveNoNull(t *testing.T) {
	t.Parallel()
	required := map[EventType][]string{
		EventRunStarted:         {"threadId", "runId"},
		EventRunFinished:        {"threadId", "runId"},
		EventRunError:           {"message"},
		EventStepStarted:        {"stepName"},
		EventStepFinished:       {"stepName"},
		EventTextMessageStart:   {"messageId"},
		EventTextMessageContent: {"messageId", "delta"},
		EventTextMessageEnd:     {"messageId"},
		EventToolCallStart:      {"toolCallId", "toolCallName"},
		EventToolCallArgs:       {"toolCallId", "delta"},
		EventToolCallEnd:        {"toolCallId"},
		EventToolCallResult:     {"messageId", "toolCallId", "content"},
		EventStateSnapshot:      {"snapshot"},
		EventStateDelta:         {"delta"},
		EventMessagesSnapshot:   {"messages"},
		EventActivitySnapshot:   {"messageId", "activityType", "content"},
		EventCustom:             {"name", "value"},
		EventSubagentStarted:    {"subagentRunId", "name"},
		EventSubagentFinished:   {"subagentRunId"},
		EventSubagentError:      {"subagentRunId", "message"},
	}
	require.Len(t, required, len(knownTypes))
	for typ, keys := range required {
		t.Run(string(typ), func(t *testing.T) {
			ev := newEvent(typ)
			require.NotNil(t, ev)
			require.Equal(t, typ, ev.EventType())
			got, err := MarshalEvent(ev)
			require.NoError(t, err)
			assert.True(t, bytes.HasPrefix(got, []byte(`{"type":"`+string(typ)+`"`)), string(got))
			assert.NotContains(t, string(got), "null")
			var m map[string]any
			require.NoError(t, json.Unmarshal(got, &m))
			for k, v := range m {
				assert.NotNil(t, v, "member %s is null", k)
			}
			assert.Len(t, m, len(keys)+1, string(got))
			for _, k := range keys {
				assert.Contains(t, m, k)
			}
		})
	}
}

func TestMarshalEventValue(t *testing.T) {
	t.Parallel()
	// Values (not only pointers) marshal with their type.
	got, err := json.Marshal(TextMessageEnd{MessageID: "m1"})
	require.NoError(t, err)
	assert.Equal(t, `{"type":"TEXT_MESSAGE_END","messageId":"m1"}`, string(got))
	got, err = json.Marshal([]Event{&RunError{Message: "x"}, &Custom{Name: "n", Value: 1}})
	require.NoError(t, err)
	assert.Equal(t, `[{"type":"RUN_ERROR","message":"x"},{"type":"CUSTOM","name":"n","value":1}]`, string(got))
}

func TestAppendFrame(t *testing.T) {
	t.Parallel()
	prefix := []byte(": earlier\n\n")
	got, err := appendFrame(bytes.Clone(prefix), &TextMessageContent{MessageID: "m1", Delta: "line1\r\nline2\n\n"})
	require.NoError(t, err)
	assert.Equal(t, ": earlier\n\n"+`data: {"type":"TEXT_MESSAGE_CONTENT","messageId":"m1","delta":"line1\r\nline2\n\n"}`+"\n\n", string(got))

	frame := got[len(prefix):]
	assert.NotContains(t, string(frame), "\r")
	assert.Equal(t, 2, bytes.Count(frame, []byte("\n")), "only the frame terminator is a raw newline")
	assert.True(t, bytes.HasSuffix(frame, []byte("\n\n")))
}

func TestAppendFrameErrorLeavesDst(t *testing.T) {
	t.Parallel()
	dst := []byte("keep")
	got, err := appendFrame(dst, &Custom{Name: "x", Value: make(chan int)})
	require.Error(t, err)
	assert.Equal(t, "keep", string(got))

	_, err = appendFrame(nil, nil)
	require.Error(t, err)
	_, err = appendFrame(nil, (*RunStarted)(nil))
	require.Error(t, err)
}

// foreignEvent is an event defined outside the package's closed set.
type foreignEvent struct {
	Base
	X string `json:"x,omitempty"`
}

func (*foreignEvent) EventType() EventType { return "FOREIGN" }

func TestForeignEvent(t *testing.T) {
	t.Parallel()
	got, err := MarshalEvent(&foreignEvent{X: "1"})
	require.NoError(t, err)
	assert.Equal(t, `{"type":"FOREIGN","x":"1"}`, string(got))

	got, err = MarshalEvent(&foreignEvent{})
	require.NoError(t, err)
	assert.Equal(t, `{"type":"FOREIGN"}`, string(got))

	got, err = MarshalEvent(&foreignEvent{Base: Base{Timestamp: 5}})
	require.NoError(t, err)
	assert.Equal(t, `{"type":"FOREIGN","timestamp":5}`, string(got))
}

func TestDecodeEventErrors(t *testing.T) {
	t.Parallel()
	_, err := DecodeEvent([]byte(`{"type":"NOPE"}`))
	require.ErrorIs(t, err, ErrUnknownEvent)
	_, err = DecodeEvent([]byte(`{"type":`))
	require.Error(t, err)
	_, err = DecodeEvent([]byte(`{"type":"TEXT_MESSAGE_CONTENT","delta":5}`))
	require.Error(t, err)
}

func TestAppendStringMatchesEncodingJSON(t *testing.T) {
	t.Parallel()
	for _, s := range []string{
		"", "plain", "quote\"back\\slash", "ctl\x00\x1f\x7f", "\b\f\n\r\t", "é ü 日本 🎉",
		"bad\xffutf8\xc3", "\u2028\u2029", "<script>&amp;</script>", strings.Repeat("x", 300),
	} {
		checkAppendString(t, s)
	}
}

func checkAppendString(t *testing.T, s string) {
	t.Helper()
	got := appendString(nil, s)
	require.True(t, json.Valid(got), "%q -> %s", s, got)
	require.NotContains(t, string(got), "\n")
	want, err := json.Marshal(s)
	require.NoError(t, err)
	var a, b string
	require.NoError(t, json.Unmarshal(got, &a))
	require.NoError(t, json.Unmarshal(want, &b))
	require.Equal(t, b, a, "input %q", s)
}

func FuzzAppendString(f *testing.F) {
	for _, s := range []string{"", "a\nb", "\xff", "\u2028", `"\`} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		checkAppendString(t, s)
	})
}
