package anthropic

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/baton-dev/baton/internal/testutil"
	"github.com/baton-dev/baton/internal/testutil/llmtest"
	"github.com/baton-dev/baton/llm"
)

func TestMain(m *testing.M) {
	testutil.VerifyTestMain(m)
}

// fakeAPI is a minimal Messages API server: it records each request and
// answers with a canned status, headers and SSE body. With hang set, it
// writes the body and then waits for the client to leave.
type fakeAPI struct {
	status int
	header http.Header
	body   string
	hang   bool

	mu      sync.Mutex
	bodies  []map[string]any
	headers []http.Header
	paths   []string
}

func (f *fakeAPI) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	raw, _ := io.ReadAll(r.Body)
	var body map[string]any
	_ = json.Unmarshal(raw, &body)
	f.mu.Lock()
	f.bodies = append(f.bodies, body)
	f.headers = append(f.headers, r.Header.Clone())
	f.paths = append(f.paths, r.URL.Path)
	f.mu.Unlock()

	for k, vs := range f.header {
		w.Header()[k] = vs
	}
	if f.status != 0 && f.status != http.StatusOK {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(f.status)
		_, _ = fmt.Fprint(w, f.body)
		return
	}
	w.Header().Set("Content-Type", "text/event-stream")
	_, _ = fmt.Fprint(w, f.body)
	if f.hang {
		_ = http.NewResponseController(w).Flush()
		<-r.Context().Done()
	}
}

func start(t *testing.T, f *fakeAPI) *Model {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	srv := &http.Server{Handler: f}
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = srv.Serve(ln)
	}()
	t.Cleanup(func() {
		_ = srv.Close()
		<-done
	})
	return modelAt(t, "http://"+ln.Addr().String())
}

func modelAt(t *testing.T, base string) *Model {
	t.Helper()
	tr := &http.Transport{}
	t.Cleanup(tr.CloseIdleConnections)
	m, err := New(Config{BaseURL: base + "/v1", Model: "claude-test", APIKey: "sk-ant-secret", HTTPClient: &http.Client{Transport: tr}})
	require.NoError(t, err)
	return m
}

// events renders (type, data) pairs as an SSE body.
func events(pairs ...any) string {
	var b strings.Builder
	for i := 0; i+1 < len(pairs); i += 2 {
		data, _ := json.Marshal(pairs[i+1])
		fmt.Fprintf(&b, "event: %s\ndata: %s\n\n", pairs[i], data)
	}
	return b.String()
}

func messageStart(in int) any {
	return map[string]any{"type": "message_start", "message": map[string]any{
		"id": "msg_1", "type": "message", "role": "assistant", "content": []any{}, "model": "claude-test",
		"stop_reason": nil, "stop_sequence": nil, "usage": map[string]any{"input_tokens": in, "output_tokens": 1},
	}}
}

func blockStart(idx int, block map[string]any) any {
	return map[string]any{"type": "content_block_start", "index": idx, "content_block": block}
}

func textDelta(idx int, text string) any {
	return map[string]any{"type": "content_block_delta", "index": idx, "delta": map[string]any{"type": "text_delta", "text": text}}
}

func jsonDelta(idx int, frag string) any {
	return map[string]any{"type": "content_block_delta", "index": idx, "delta": map[string]any{"type": "input_json_delta", "partial_json": frag}}
}

func blockStop(idx int) any { return map[string]any{"type": "content_block_stop", "index": idx} }

func messageDelta(stop string, out int, details any) any {
	return map[string]any{"type": "message_delta", "delta": map[string]any{"stop_reason": stop, "stop_sequence": nil, "stop_details": details},
		"usage": map[string]any{"output_tokens": out}}
}

var messageStop = map[string]any{"type": "message_stop"}

func userReq(text string) *llm.Request {
	return &llm.Request{Messages: []llm.Message{{Role: llm.RoleSystem, Content: "sys"}, {Role: llm.RoleUser, Content: text}}}
}

func drain(seq func(func(llm.Delta, error) bool)) ([]llm.Delta, error) {
	var out []llm.Delta
	for d, err := range seq {
		if err != nil {
			return out, err
		}
		out = append(out, d)
	}
	return out, nil
}

func TestNewRequiresModel(t *testing.T) {
	t.Parallel()
	_, err := New(Config{})
	require.ErrorIs(t, err, ErrNoModel)
}

func TestStreamTextAndTools(t *testing.T) {
	t.Parallel()
	f := &fakeAPI{body: events(
		"message_start", messageStart(10),
		"ping", map[string]any{"type": "ping"},
		"content_block_start", blockStart(0, map[string]any{"type": "text", "text": ""}),
		"content_block_delta", textDelta(0, "Let me "),
		"content_block_delta", textDelta(0, "check."),
		"content_block_stop", blockStop(0),
		"content_block_start", blockStart(1, map[string]any{"type": "tool_use", "id": "toolu_a", "name": "travel", "input": map[string]any{}}),
		"content_block_delta", jsonDelta(1, `{"prompt":`),
		"content_block_delta", jsonDelta(1, `"Lisbon"}`),
		"content_block_stop", blockStop(1),
		"content_block_start", blockStart(2, map[string]any{"type": "tool_use", "id": "toolu_b", "name": "deploy__deploy", "input": map[string]any{}}),
		"content_block_stop", blockStop(2),
		"message_delta", messageDelta("tool_use", 42, nil),
		"message_stop", messageStop,
	)}
	m := start(t, f)

	deltas, err := drain(m.Stream(context.Background(), userReq("go")))
	require.NoError(t, err)
	var tcs []llm.ToolCallDelta
	for _, d := range deltas {
		if d.ToolCall != nil {
			tcs = append(tcs, *d.ToolCall)
		}
	}
	assert.Equal(t, []llm.ToolCallDelta{
		{Index: 0, ID: "toolu_a", Name: "travel"},
		{Index: 0, Arguments: `{"prompt":`},
		{Index: 0, Arguments: `"Lisbon"}`},
		{Index: 1, ID: "toolu_b", Name: "deploy__deploy"},
		{Index: 1, Arguments: "{}"},
	}, tcs)

	msg, done, err := llmtest.Collect(m.Stream(context.Background(), userReq("go")))
	require.NoError(t, err)
	assert.Equal(t, "Let me check.", msg.Content)
	assert.Equal(t, &llm.Completion{FinishReason: "tool_calls", Usage: llm.Usage{InputTokens: 10, OutputTokens: 42}}, done)
	assert.Equal(t, []llm.ToolCall{
		{ID: "toolu_a", Name: "travel", Arguments: `{"prompt":"Lisbon"}`},
		{ID: "toolu_b", Name: "deploy__deploy", Arguments: "{}"},
	}, msg.ToolCalls)
}

func TestStopReasons(t *testing.T) {
	t.Parallel()
	tests := []struct {
		stop    string
		details any
		want    llm.Completion
	}{
		{stop: "end_turn", want: llm.Completion{FinishReason: "stop"}},
		{stop: "stop_sequence", want: llm.Completion{FinishReason: "stop"}},
		{stop: "max_tokens", want: llm.Completion{FinishReason: "length"}},
		{stop: "model_context_window_exceeded", want: llm.Completion{FinishReason: "length"}},
		{stop: "refusal", want: llm.Completion{FinishReason: "content_filter", Refusal: "the model declined to respond"}},
		{
			stop:    "refusal",
			details: map[string]any{"type": "refusal", "category": "cyber", "explanation": "I won't help with that."},
			want:    llm.Completion{FinishReason: "content_filter", Refusal: "I won't help with that."},
		},
	}
	for _, tt := range tests {
		t.Run(tt.stop, func(t *testing.T) {
			m := start(t, &fakeAPI{body: events(
				"message_start", messageStart(3),
				"message_delta", messageDelta(tt.stop, 5, tt.details),
				"message_stop", messageStop,
			)})
			_, done, err := llmtest.Collect(m.Stream(context.Background(), userReq("x")))
			require.NoError(t, err)
			tt.want.Usage = llm.Usage{InputTokens: 3, OutputTokens: 5}
			assert.Equal(t, tt.want, *done)
		})
	}
}

func TestRequestMapping(t *testing.T) {
	t.Parallel()
	f := &fakeAPI{body: events("message_start", messageStart(1), "message_delta", messageDelta("end_turn", 1, nil), "message_stop", messageStop)}
	m := start(t, f)
	req := &llm.Request{
		Messages: []llm.Message{
			{Role: llm.RoleSystem, Content: "sys"},
			{Role: llm.RoleUser, Content: "plan a trip"},
			{Role: llm.RoleAssistant, Content: "Sure.", ToolCalls: []llm.ToolCall{
				{ID: "t1", Name: "travel", Arguments: `{"prompt":"trip"}`},
				{ID: "t2", Name: "demo__count_slowly", Arguments: ""},
			}},
			{Role: llm.RoleTool, ToolCallID: "t1", Content: "[COMPLETED]\nok"},
			{Role: llm.RoleTool, ToolCallID: "t2", Content: ""},
			{Role: llm.RoleUser, Content: "thanks"},
		},
		Tools: []llm.Tool{{Name: "travel", Description: "plans trips", Parameters: map[string]any{
			"type": "object", "properties": map[string]any{"prompt": map[string]any{"type": "string"}},
			"required": []any{"prompt"}, "additionalProperties": false,
		}}},
	}
	_, _, err := llmtest.Collect(m.Stream(context.Background(), req))
	require.NoError(t, err)

	require.Len(t, f.bodies, 1)
	assert.Equal(t, "/v1/messages", f.paths[0])
	assert.Equal(t, "Bearer sk-ant-secret", f.headers[0].Get("Authorization"))
	assert.Equal(t, "sk-ant-secret", f.headers[0].Get("X-Api-Key"))

	var got map[string]any
	b, _ := json.Marshal(f.bodies[0])
	require.NoError(t, json.Unmarshal(b, &got))
	want := `{
		"model": "claude-test", "max_tokens": 4096, "stream": true,
		"system": [{"type":"text","text":"sys"}],
		"messages": [
			{"role":"user","content":[{"type":"text","text":"plan a trip"}]},
			{"role":"assistant","content":[
				{"type":"text","text":"Sure."},
				{"type":"tool_use","id":"t1","name":"travel","input":{"prompt":"trip"}},
				{"type":"tool_use","id":"t2","name":"demo__count_slowly","input":{}}]},
			{"role":"user","content":[
				{"type":"tool_result","tool_use_id":"t1","content":[{"type":"text","text":"[COMPLETED]\nok"}],"is_error":false},
				{"type":"tool_result","tool_use_id":"t2","content":[{"type":"text","text":"(empty)"}],"is_error":false},
				{"type":"text","text":"thanks"}]}
		],
		"tools": [{"name":"travel","description":"plans trips","input_schema":{
			"type":"object","properties":{"prompt":{"type":"string"}},"required":["prompt"],"additionalProperties":false}}]
	}`
	assert.JSONEq(t, want, string(b))
}

func TestHTTPErrors(t *testing.T) {
	t.Parallel()
	errBody := func(typ, msg string) string {
		return fmt.Sprintf(`{"type":"error","error":{"type":%q,"message":%q}}`, typ, msg)
	}
	tests := []struct {
		name       string
		f          *fakeAPI
		kind       llm.ErrorKind
		status     int
		retryAfter time.Duration
		notInMsg   string
	}{
		{
			name: "429", kind: llm.ErrRateLimited, status: 429, retryAfter: 2 * time.Second,
			f: &fakeAPI{status: 429, header: http.Header{"Retry-After": {"2"}}, body: errBody("rate_limit_error", "slow")},
		},
		{
			name: "529 overloaded", kind: llm.ErrServer, status: 529,
			f: &fakeAPI{status: 529, body: errBody("overloaded_error", "Overloaded")},
		},
		{
			name: "401", kind: llm.ErrAuth, status: 401, notInMsg: "sk-ant",
			f: &fakeAPI{status: 401, body: errBody("authentication_error", "invalid x-api-key sk-ant-secret")},
		},
		{
			name: "400 prompt is too long is context_overflow", kind: llm.ErrContextOverflow, status: 400, notInMsg: "210000",
			f: &fakeAPI{status: 400, body: errBody("invalid_request_error", "prompt is too long: 210000 tokens > 200000 maximum")},
		},
		{
			name: "400", kind: llm.ErrBadRequest, status: 400,
			f: &fakeAPI{status: 400, body: errBody("invalid_request_error", "bad")},
		},
		{
			name: "error event mid-stream", kind: llm.ErrServer,
			f: &fakeAPI{body: events("message_start", messageStart(1),
				"error", map[string]any{"type": "error", "error": map[string]any{"type": "overloaded_error", "message": "Overloaded"}})},
		},
		{
			name: "cut short", kind: llm.ErrNetwork,
			f: &fakeAPI{body: events("message_start", messageStart(1), "content_block_start", blockStart(0, map[string]any{"type": "text", "text": ""}))},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := start(t, tt.f)
			_, err := drain(m.Stream(context.Background(), userReq("x")))
			var le *llm.Error
			require.ErrorAs(t, err, &le)
			assert.Equal(t, tt.kind, le.Kind)
			assert.Equal(t, tt.status, le.Status)
			assert.Equal(t, tt.retryAfter, le.RetryAfter)
			if tt.notInMsg != "" {
				assert.NotContains(t, le.Error(), tt.notInMsg)
			}
		})
	}
}

func TestConnectionRefused(t *testing.T) {
	t.Parallel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := ln.Addr().String()
	require.NoError(t, ln.Close())
	_, err = drain(modelAt(t, "http://"+addr).Stream(context.Background(), userReq("x")))
	var le *llm.Error
	require.ErrorAs(t, err, &le)
	assert.Equal(t, llm.ErrNetwork, le.Kind)
}

func TestCancelMidStream(t *testing.T) {
	t.Parallel()
	m := start(t, &fakeAPI{hang: true, body: events(
		"message_start", messageStart(1),
		"content_block_start", blockStart(0, map[string]any{"type": "text", "text": ""}),
		"content_block_delta", textDelta(0, "partial"),
	)})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var final error
	var texts []string
	for d, err := range m.Stream(ctx, userReq("x")) {
		if err != nil {
			final = err
			break
		}
		texts = append(texts, d.Text)
		cancel()
	}
	assert.Equal(t, []string{"partial"}, texts)
	require.ErrorIs(t, final, context.Canceled)
	var le *llm.Error
	assert.False(t, errors.As(final, &le))
}
