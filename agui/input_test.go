package agui

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"testing/iotest"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Bodies as HttpAgent sends them (reference §1): 1.0.0 and 0.0.59 (no protocolVersion).
const (
	body10   = `{"threadId":"thread-valid","runId":"87e44c7d-0000","protocolVersion":"1.0","state":{},"messages":[],"tools":[],"context":[],"forwardedProps":{}}`
	body059  = `{"threadId":"thread-valid","runId":"87e44c7d-0000","state":{},"messages":[],"tools":[],"context":[],"forwardedProps":{}}`
	bodyFull = `{"threadId":"t1","runId":"r2","parentRunId":"r1","protocolVersion":"1.0",
	  "state":{"a":1},
	  "messages":[
	    {"id":"s1","role":"system","content":"be nice"},
	    {"id":"d1","role":"developer","content":"dev"},
	    {"id":"u1","role":"user","content":[{"type":"text","text":"look at"},{"type":"image","source":{"type":"url","value":"http://x/y.png","mimeType":"image/png"}},{"type":"text","text":"this"}]},
	    {"id":"a1","role":"assistant","toolCalls":[{"id":"tc1","type":"function","function":{"name":"ask_user","arguments":"{\"question\":\"?\"}"}}]},
	    {"id":"t1","role":"tool","toolCallId":"tc1","content":"yes","error":"none"},
	    {"id":"r1","role":"reasoning","content":"hmm"},
	    {"id":"x1","role":"activity","activityType":"progress","content":{"pct":5}},
	    {"id":"u2","role":"user","content":null,"name":"bob","subagentRunId":"sa-1","encryptedValue":"zzz","metadata":{"k":1}}
	  ],
	  "tools":[{"name":"ask_user","description":"Ask","parameters":{"type":"object"}}],
	  "context":[{"description":"tz","value":"Europe/Berlin"}],
	  "forwardedProps":{"command":{"resume":"x"}},
	  "resume":[{"interruptId":"int-1","status":"resolved","payload":{"env":"staging"},"metadata":{"m":true}},{"interruptId":"int-2","status":"cancelled"}],
	  "someFutureField":{"x":[1,2,3]}}`
)

type decodeCase struct {
	name     string
	body     string
	max      int64
	status   int    // 0: success
	code     string // expected InputError code
	contains string // expected in the message
}

var decodeCases = []decodeCase{
	{name: "valid 1.0", body: body10},
	{name: "valid 0.0.59", body: body059},
	{name: "full", body: bodyFull},
	{name: "minimal, absent lists", body: `{"threadId":"t","runId":"r"}`},
	{name: "null lists and state", body: `{"threadId":"t","runId":"r","messages":null,"tools":null,"state":null,"forwardedProps":null,"protocolVersion":null}`},
	{name: "unknown fields tolerated", body: `{"threadId":"t","runId":"r","x":1,"messages":[{"id":"m","role":"user","content":"hi","y":[{}]}],"tools":[{"name":"n","z":true}]}`},
	{name: "any protocol version string", body: `{"threadId":"t","runId":"r","protocolVersion":"2.7"}`},

	{name: "malformed JSON", body: `{"threadId":"t",`, status: 400, code: codeInvalidJSON},
	{name: "empty body", body: ``, status: 400, code: codeInvalidJSON},
	{name: "trailing garbage", body: `{"threadId":"t","runId":"r"} x`, status: 400, code: codeInvalidJSON},
	{name: "not JSON at all", body: `hello`, status: 400, code: codeInvalidJSON},
	{name: "top-level array", body: `[]`, status: 400, code: codeInvalidInput, contains: "JSON object"},
	{name: "top-level null", body: `null`, status: 400, code: codeInvalidInput, contains: "threadId"},
	{name: "missing threadId", body: `{"runId":"r"}`, status: 400, code: codeInvalidInput, contains: "threadId"},
	{name: "empty threadId", body: `{"threadId":"","runId":"r"}`, status: 400, code: codeInvalidInput, contains: "threadId"},
	{name: "missing runId", body: `{"threadId":"t"}`, status: 400, code: codeInvalidInput, contains: "runId"},
	{name: "threadId as number", body: `{"threadId":5,"runId":"r"}`, status: 400, code: codeInvalidInput, contains: "threadId must be a string, got number"},
	{name: "messages as object", body: `{"threadId":"t","runId":"r","messages":{}}`, status: 400, code: codeInvalidInput, contains: "messages must be an array, got object"},
	{name: "tools as string", body: `{"threadId":"t","runId":"r","tools":"x"}`, status: 400, code: codeInvalidInput, contains: "tools must be an array, got string"},
	{name: "context item as string", body: `{"threadId":"t","runId":"r","context":["x"]}`, status: 400, code: codeInvalidInput, contains: "context"},
	{name: "role as number", body: `{"threadId":"t","runId":"r","messages":[{"id":"m","role":1}]}`, status: 400, code: codeInvalidInput, contains: "messages.role"},
	{name: "resume as object", body: `{"threadId":"t","runId":"r","resume":{}}`, status: 400, code: codeInvalidInput, contains: "resume"},
	{name: "protocolVersion as number", body: `{"threadId":"t","runId":"r","protocolVersion":1}`, status: 400, code: codeInvalidInput, contains: "protocolVersion"},
	{name: "protocolVersion empty", body: `{"threadId":"t","runId":"r","protocolVersion":""}`, status: 400, code: codeInvalidInput, contains: "protocolVersion"},
	{name: "unknown role", body: `{"threadId":"t","runId":"r","messages":[{"id":"m","role":"robot","content":"x"}]}`, status: 400, code: codeInvalidInput, contains: "messages[0].role"},
	{name: "missing role", body: `{"threadId":"t","runId":"r","messages":[{"id":"m"}]}`, status: 400, code: codeInvalidInput, contains: "messages[0].role"},
	{name: "missing message id", body: `{"threadId":"t","runId":"r","messages":[{"role":"user","content":"x"}]}`, status: 400, code: codeInvalidInput, contains: "messages[0].id"},
	{name: "tool message without toolCallId", body: `{"threadId":"t","runId":"r","messages":[{"id":"m","role":"tool","content":"x"}]}`, status: 400, code: codeInvalidInput, contains: "toolCallId"},
	{name: "content as number", body: `{"threadId":"t","runId":"r","messages":[{"id":"m","role":"user","content":5}]}`, status: 400, code: codeInvalidInput, contains: "messages[0].content"},
	{name: "content parts as strings", body: `{"threadId":"t","runId":"r","messages":[{"id":"m","role":"user","content":["x"]}]}`, status: 400, code: codeInvalidInput, contains: "messages[0].content"},
	{name: "content part without type", body: `{"threadId":"t","runId":"r","messages":[{"id":"m","role":"user","content":[{"text":"x"}]}]}`, status: 400, code: codeInvalidInput, contains: "content[0].type"},
	{name: "object content outside activity", body: `{"threadId":"t","runId":"r","messages":[{"id":"m","role":"user","content":{"a":1}}]}`, status: 400, code: codeInvalidInput, contains: "messages[0].content"},
	{name: "string content for activity", body: `{"threadId":"t","runId":"r","messages":[{"id":"m","role":"activity","content":"x"}]}`, status: 400, code: codeInvalidInput, contains: "activity"},
	{name: "tool call without id", body: `{"threadId":"t","runId":"r","messages":[{"id":"m","role":"assistant","toolCalls":[{"function":{"name":"f","arguments":"{}"}}]}]}`, status: 400, code: codeInvalidInput, contains: "toolCalls[0].id"},
	{name: "tool call arguments as object", body: `{"threadId":"t","runId":"r","messages":[{"id":"m","role":"assistant","toolCalls":[{"id":"x","function":{"name":"f","arguments":{}}}]}]}`, status: 400, code: codeInvalidInput, contains: "arguments"},
	{name: "tool without name", body: `{"threadId":"t","runId":"r","tools":[{"description":"d"}]}`, status: 400, code: codeInvalidInput, contains: "tools[0].name"},
	{name: "tool parameters not an object", body: `{"threadId":"t","runId":"r","tools":[{"name":"n","parameters":"x"}]}`, status: 400, code: codeInvalidInput, contains: "tools[0].parameters"},
	{name: "resume without interruptId", body: `{"threadId":"t","runId":"r","resume":[{"status":"resolved"}]}`, status: 400, code: codeInvalidInput, contains: "resume[0].interruptId"},
	{name: "resume bad status", body: `{"threadId":"t","runId":"r","resume":[{"interruptId":"i","status":"done"}]}`, status: 400, code: codeInvalidInput, contains: "resume[0].status"},
	{name: "resume metadata not object", body: `{"threadId":"t","runId":"r","resume":[{"interruptId":"i","status":"resolved","metadata":[]}]}`, status: 400, code: codeInvalidInput, contains: "metadata"},

	{name: "oversized", body: `{"threadId":"t","runId":"r","pad":"` + strings.Repeat("x", 200) + `"}`, max: 100, status: 413, code: codeBodyTooLarge},
	{name: "exactly at the limit", body: `{"threadId":"t","runId":"r"}`, max: int64(len(`{"threadId":"t","runId":"r"}`))},
}

func TestDecodeRunAgentInput(t *testing.T) {
	t.Parallel()
	for _, tt := range decodeCases {
		t.Run(tt.name, func(t *testing.T) {
			in, err := DecodeRunAgentInput(strings.NewReader(tt.body), tt.max)
			if tt.status == 0 {
				require.NoError(t, err)
				require.NotNil(t, in)
				assert.NotEmpty(t, in.ThreadID)
				assert.NotEmpty(t, in.RunID)
				assert.NotNil(t, in.Messages, "absent messages read as an empty list")
				return
			}
			require.Nil(t, in)
			var ie *InputError
			require.ErrorAs(t, err, &ie)
			assert.Equal(t, tt.status, ie.Status)
			assert.Equal(t, tt.code, ie.Code)
			assert.Contains(t, ie.Message, tt.contains)
			assert.NotContains(t, ie.Message, "RunAgentInput", "Go type names are not shown to clients")
			assert.Contains(t, err.Error(), tt.code)
		})
	}
}

func TestDecodeRunAgentInputFields(t *testing.T) {
	t.Parallel()
	in, err := DecodeRunAgentInput(strings.NewReader(bodyFull), 0)
	require.NoError(t, err)
	assert.Equal(t, "t1", in.ThreadID)
	assert.Equal(t, "r2", in.RunID)
	assert.Equal(t, "r1", in.ParentRunID)
	assert.Equal(t, "1.0", in.ProtocolVersion)
	assert.False(t, in.Legacy())
	assert.JSONEq(t, `{"a":1}`, string(in.State))
	assert.JSONEq(t, `{"command":{"resume":"x"}}`, string(in.ForwardedProps))
	require.Len(t, in.Messages, 8)

	assert.Equal(t, "be nice", in.Messages[0].Text())
	assert.Equal(t, "look at\n[image]\nthis", in.Messages[2].Text())
	parts := in.Messages[2].Parts()
	require.Len(t, parts, 3)
	assert.Equal(t, &ContentSource{Type: "url", Value: "http://x/y.png", MimeType: "image/png"}, parts[1].Source)

	a := in.Messages[3]
	assert.Equal(t, RoleAssistant, a.Role)
	assert.Empty(t, a.Text())
	assert.Equal(t, []ToolCall{{ID: "tc1", Type: "function", Function: FunctionCall{Name: "ask_user", Arguments: `{"question":"?"}`}}}, a.ToolCalls)

	tool := in.Messages[4]
	assert.Equal(t, "tc1", tool.ToolCallID)
	assert.Equal(t, "none", tool.Error)
	assert.Equal(t, "yes", tool.Text())

	act := in.Messages[6]
	assert.Equal(t, "progress", act.ActivityType)
	assert.Empty(t, act.Text())
	assert.Nil(t, act.Parts())

	u2 := in.Messages[7]
	assert.Nil(t, u2.Content, "null content reads as absent")
	assert.Equal(t, "bob", u2.Name)
	assert.Equal(t, "sa-1", u2.SubagentRunID)

	assert.Equal(t, []Tool{{Name: "ask_user", Description: "Ask", Parameters: json.RawMessage(`{"type":"object"}`)}}, in.Tools)
	assert.Equal(t, []ContextItem{{Description: "tz", Value: "Europe/Berlin"}}, in.Context)
	require.Len(t, in.Resume, 2)
	assert.Equal(t, "int-1", in.Resume[0].InterruptID)
	assert.Equal(t, ResumeResolved, in.Resume[0].Status)
	assert.JSONEq(t, `{"env":"staging"}`, string(in.Resume[0].Payload))
	assert.Equal(t, map[string]any{"m": true}, in.Resume[0].Metadata)
	assert.Equal(t, ResumeCancelled, in.Resume[1].Status)
	assert.Nil(t, in.Resume[1].Payload)

	legacy, err := DecodeRunAgentInput(strings.NewReader(body059), 0)
	require.NoError(t, err)
	assert.True(t, legacy.Legacy())
	assert.Empty(t, legacy.Messages)

	// A decoded input encodes back without nulls.
	out, err := json.Marshal(in)
	require.NoError(t, err)
	assert.NotContains(t, string(out), "null")
	again, err := DecodeRunAgentInput(bytes.NewReader(out), 0)
	require.NoError(t, err)
	assert.Equal(t, in, again)
}

func TestDecodeRunAgentInputReadErrors(t *testing.T) {
	t.Parallel()
	// A body already capped by http.MaxBytesReader reports 413.
	rec := httptest.NewRecorder()
	r := http.MaxBytesReader(rec, io.NopCloser(strings.NewReader(body10)), 10)
	_, err := DecodeRunAgentInput(r, 0)
	var ie *InputError
	require.ErrorAs(t, err, &ie)
	assert.Equal(t, http.StatusRequestEntityTooLarge, ie.Status)
	assert.Equal(t, codeBodyTooLarge, ie.Code)

	// Any other read failure is a 400 without internal detail.
	_, err = DecodeRunAgentInput(iotest.ErrReader(errors.New("secret internal detail")), 0)
	require.ErrorAs(t, err, &ie)
	assert.Equal(t, http.StatusBadRequest, ie.Status)
	assert.NotContains(t, ie.Message, "secret")

	// The default cap is 1 MiB.
	big := `{"threadId":"t","runId":"r","pad":"` + strings.Repeat("x", defaultMaxBodyBytes) + `"}`
	_, err = DecodeRunAgentInput(strings.NewReader(big), 0)
	require.ErrorAs(t, err, &ie)
	assert.Equal(t, http.StatusRequestEntityTooLarge, ie.Status)
}

func TestMessageText(t *testing.T) {
	t.Parallel()
	tests := []struct {
		content string
		want    string
	}{
		{``, ""},
		{`"plain"`, "plain"},
		{`[]`, ""},
		{`[{"type":"text","text":"a"},{"type":"text","text":"b"}]`, "a\nb"},
		{`[{"type":"audio","source":{"type":"data","value":"..."}}]`, "[audio]"},
		{`{"pct":1}`, ""},
		{`[1,2]`, ""},
	}
	for _, tt := range tests {
		t.Run(tt.content, func(t *testing.T) {
			m := Message{ID: "m", Role: RoleUser, Content: json.RawMessage(tt.content)}
			assert.Equal(t, tt.want, m.Text())
		})
	}
	assert.Equal(t, "hi \"x\"\n", Message{Content: StringContent("hi \"x\"\n")}.Text())
}

func TestWriteInputError(t *testing.T) {
	t.Parallel()
	rec := httptest.NewRecorder()
	WriteInputError(rec, &InputError{Status: 413, Code: codeBodyTooLarge, Message: `too "big"`})
	assert.Equal(t, 413, rec.Code)
	assert.Equal(t, "application/json", rec.Header().Get("Content-Type"))
	assert.JSONEq(t, `{"error":"BODY_TOO_LARGE","message":"too \"big\""}`, rec.Body.String())

	// Wrapped InputErrors are found.
	rec = httptest.NewRecorder()
	_, err := DecodeRunAgentInput(strings.NewReader(`{`), 0)
	WriteInputError(rec, errors.Join(errors.New("context"), err))
	assert.Equal(t, 400, rec.Code)
	var body map[string]string
	require.NoError(t, json.Unmarshal(rec.Body.Bytes(), &body))
	assert.Equal(t, codeInvalidJSON, body["error"])
	assert.NotEmpty(t, body["message"])

	// Anything else is a 500 that shows nothing internal.
	rec = httptest.NewRecorder()
	WriteInputError(rec, errors.New("db password wrong"))
	assert.Equal(t, 500, rec.Code)
	assert.NotContains(t, rec.Body.String(), "password")
}

func FuzzDecodeRunAgentInput(f *testing.F) {
	for _, tt := range decodeCases {
		f.Add([]byte(tt.body))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		in, err := DecodeRunAgentInput(bytes.NewReader(body), 4096)
		if err != nil {
			var ie *InputError
			if !errors.As(err, &ie) {
				t.Fatalf("error is %T, not *InputError: %v", err, err)
			}
			if ie.Status < 400 || ie.Status > 499 {
				t.Fatalf("status %d is not 4xx", ie.Status)
			}
			if ie.Code == "" || ie.Message == "" {
				t.Fatalf("incomplete error %+v", ie)
			}
			return
		}
		if !ValidID(in.ThreadID) || !ValidID(in.RunID) {
			t.Fatalf("accepted input with invalid ids: %q %q", in.ThreadID, in.RunID)
		}
		for _, m := range in.Messages {
			if !knownRoles[m.Role] {
				t.Fatalf("accepted unknown role %q", m.Role)
			}
			_ = m.Text()
		}
		for _, r := range in.Resume {
			if r.InterruptID == "" || (r.Status != ResumeResolved && r.Status != ResumeCancelled) {
				t.Fatalf("accepted bad resume entry %+v", r)
			}
		}
	})
}
