package openai

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/openai/openai-go/v3"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/baton-dev/baton/internal/testutil"
	"github.com/baton-dev/baton/internal/testutil/fakellm"
	"github.com/baton-dev/baton/internal/testutil/llmtest"
	"github.com/baton-dev/baton/llm"
	"github.com/baton-dev/baton/llm/scripted"
)

func TestMain(m *testing.M) {
	testutil.VerifyTestMain(m)
}

// newModel starts a fake server with h and returns a Model pointed at it.
// Both the server and the client's idle connections are closed at cleanup.
func newModel(t *testing.T, h fakellm.Handler) (*Model, *fakellm.Server) {
	t.Helper()
	srv := fakellm.Start(h)
	t.Cleanup(srv.Close)
	return modelFor(t, srv.URL), srv
}

func modelFor(t *testing.T, baseURL string) *Model {
	t.Helper()
	tr := &http.Transport{}
	t.Cleanup(tr.CloseIdleConnections)
	m, err := New(Config{BaseURL: baseURL, Model: "test-model", APIKey: "sk-test-secret", HTTPClient: &http.Client{Transport: tr}})
	require.NoError(t, err)
	return m
}

func userRequest(text string) *llm.Request {
	return &llm.Request{Messages: []llm.Message{
		{Role: llm.RoleSystem, Content: "be brief"},
		{Role: llm.RoleUser, Content: text},
	}}
}

// drain collects every delta and the final error.
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
	_, err := New(Config{BaseURL: "http://127.0.0.1:1/v1"})
	require.ErrorIs(t, err, ErrNoModel)
}

func TestStreamText(t *testing.T) {
	t.Parallel()
	m, srv := newModel(t, fakellm.Sequence(fakellm.Reply{
		Text:  "Hello there, streaming world",
		Usage: &llm.Usage{InputTokens: 12, OutputTokens: 5},
	}))

	deltas, err := drain(m.Stream(context.Background(), userRequest("hi")))
	require.NoError(t, err)
	require.NotEmpty(t, deltas)

	var texts []string
	for _, d := range deltas[:len(deltas)-1] {
		require.Nil(t, d.Done)
		require.Nil(t, d.ToolCall)
		texts = append(texts, d.Text)
	}
	assert.Greater(t, len(texts), 1, "text should arrive in several deltas")
	assert.Equal(t, "Hello there, streaming world", strings.Join(texts, ""))

	done := deltas[len(deltas)-1].Done
	require.NotNil(t, done)
	assert.Equal(t, llm.Completion{FinishReason: "stop", Usage: llm.Usage{InputTokens: 12, OutputTokens: 5}}, *done)

	reqs := srv.Requests()
	require.Len(t, reqs, 1)
	assert.Equal(t, "test-model", reqs[0].Model)
	assert.True(t, reqs[0].Stream)
	require.NotNil(t, reqs[0].StreamOptions)
	assert.True(t, reqs[0].StreamOptions.IncludeUsage)
	assert.Equal(t, "Bearer sk-test-secret", reqs[0].Header.Get("Authorization"))
}

func TestStreamNoStreamUsage(t *testing.T) {
	t.Parallel()
	srv := fakellm.Start(fakellm.Sequence(fakellm.Reply{Text: "ok"}))
	t.Cleanup(srv.Close)
	tr := &http.Transport{}
	t.Cleanup(tr.CloseIdleConnections)
	m, err := New(Config{BaseURL: srv.URL, Model: "x", HTTPClient: &http.Client{Transport: tr}, NoStreamUsage: true})
	require.NoError(t, err)

	_, done, err := llmtest.Collect(m.Stream(context.Background(), userRequest("hi")))
	require.NoError(t, err)
	assert.Equal(t, llm.Usage{}, done.Usage)
	require.Len(t, srv.Requests(), 1)
	assert.Nil(t, srv.Requests()[0].StreamOptions)
	assert.Empty(t, srv.Requests()[0].Header.Get("Authorization"), "no key configured, none sent")
}

func TestRequestMapping(t *testing.T) {
	t.Parallel()
	m, srv := newModel(t, fakellm.Sequence(fakellm.Reply{Text: "done"}))
	req := &llm.Request{
		Messages: []llm.Message{
			{Role: llm.RoleSystem, Content: "sys"},
			{Role: llm.RoleUser, Content: "plan a trip"},
			{Role: llm.RoleAssistant, ToolCalls: []llm.ToolCall{
				{ID: "call_0", Name: "travel", Arguments: `{"prompt":"plan a trip"}`},
				{ID: "call_1", Name: "demo__count_slowly", Arguments: ""},
			}},
			{Role: llm.RoleTool, ToolCallID: "call_0", Content: "[COMPLETED]\nbooked"},
			{Role: llm.RoleTool, ToolCallID: "call_1", Content: "[OK]\n5"},
			{Role: llm.RoleAssistant, Content: "All set."},
			{Role: llm.RoleUser, Content: "thanks"},
		},
		Tools: []llm.Tool{
			{Name: "travel", Description: "plans trips", Parameters: map[string]any{
				"type": "object", "properties": map[string]any{"prompt": map[string]any{"type": "string"}},
				"required": []any{"prompt"},
			}},
			{Name: "ask_user"},
		},
	}
	_, _, err := llmtest.Collect(m.Stream(context.Background(), req))
	require.NoError(t, err)
	require.Len(t, srv.Requests(), 1)
	got := srv.Requests()[0]

	want := []fakellm.Message{
		{Role: "system", Content: "sys"},
		{Role: "user", Content: "plan a trip"},
		{Role: "assistant", ToolCalls: []fakellm.ToolCall{
			{ID: "call_0", Type: "function", Function: fakellm.FunctionCall{Name: "travel", Arguments: `{"prompt":"plan a trip"}`}},
			{ID: "call_1", Type: "function", Function: fakellm.FunctionCall{Name: "demo__count_slowly", Arguments: "{}"}},
		}},
		{Role: "tool", ToolCallID: "call_0", Content: "[COMPLETED]\nbooked"},
		{Role: "tool", ToolCallID: "call_1", Content: "[OK]\n5"},
		{Role: "assistant", Content: "All set."},
		{Role: "user", Content: "thanks"},
	}
	assert.Equal(t, want, got.Messages)

	require.Len(t, got.Tools, 2)
	assert.Equal(t, "function", got.Tools[0].Type)
	assert.Equal(t, "travel", got.Tools[0].Function.Name)
	assert.Equal(t, "plans trips", got.Tools[0].Function.Description)
	assert.Equal(t, req.Tools[0].Parameters, got.Tools[0].Function.Parameters)
	assert.Equal(t, "ask_user", got.Tools[1].Function.Name)
	assert.Equal(t, map[string]any{"type": "object", "properties": map[string]any{}}, got.Tools[1].Function.Parameters)
}

func TestStreamRejectsUnknownRole(t *testing.T) {
	t.Parallel()
	m, srv := newModel(t, fakellm.Sequence())
	_, err := drain(m.Stream(context.Background(), &llm.Request{Messages: []llm.Message{{Role: "narrator", Content: "x"}}}))
	var le *llm.Error
	require.ErrorAs(t, err, &le)
	assert.Equal(t, llm.ErrBadRequest, le.Kind)
	assert.Empty(t, srv.Requests(), "nothing is sent for an invalid request")
}

func TestStreamParallelToolCalls(t *testing.T) {
	t.Parallel()
	calls := []llm.ToolCall{
		{ID: "call_a", Name: "travel", Arguments: `{"prompt":"trip to Lisbon"}`},
		{ID: "call_b", Name: "research", Arguments: `{"prompt":"Go generics","task_id":"t-1"}`},
	}
	m, _ := newModel(t, fakellm.Sequence(fakellm.Reply{ToolCalls: calls}))

	deltas, err := drain(m.Stream(context.Background(), userRequest("do both")))
	require.NoError(t, err)

	seen := map[int]bool{}
	args := map[int]string{}
	for _, d := range deltas {
		if d.ToolCall == nil {
			continue
		}
		tc := d.ToolCall
		if !seen[tc.Index] {
			seen[tc.Index] = true
			assert.NotEmpty(t, tc.ID, "first delta of index %d carries the id", tc.Index)
			assert.NotEmpty(t, tc.Name, "first delta of index %d carries the name", tc.Index)
		} else {
			assert.Empty(t, tc.ID, "later deltas carry only arguments")
			assert.Empty(t, tc.Name, "later deltas carry only arguments")
		}
		args[tc.Index] += tc.Arguments
	}
	assert.Equal(t, map[int]string{0: calls[0].Arguments, 1: calls[1].Arguments}, args)

	msg, done, err := llmtest.Collect(m.Stream(context.Background(), userRequest("do both")))
	require.NoError(t, err)
	assert.Equal(t, "tool_calls", done.FinishReason)
	assert.Equal(t, calls, msg.ToolCalls)
	assert.Empty(t, msg.Content)
}

func TestStreamFinishAndRefusal(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name  string
		reply fakellm.Reply
		want  llm.Completion
		text  string
	}{
		{
			name:  "length",
			reply: fakellm.Reply{Text: "cut off mid", FinishReason: "length", Usage: &llm.Usage{InputTokens: 1, OutputTokens: 2}},
			want:  llm.Completion{FinishReason: "length", Usage: llm.Usage{InputTokens: 1, OutputTokens: 2}},
			text:  "cut off mid",
		},
		{
			name:  "refusal",
			reply: fakellm.Reply{Refusal: "I can't help with that request.", Usage: &llm.Usage{InputTokens: 3, OutputTokens: 4}},
			want:  llm.Completion{FinishReason: "stop", Refusal: "I can't help with that request.", Usage: llm.Usage{InputTokens: 3, OutputTokens: 4}},
		},
		{
			name:  "content filter",
			reply: fakellm.Reply{FinishReason: "content_filter", Usage: &llm.Usage{}},
			want:  llm.Completion{FinishReason: "content_filter"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m, _ := newModel(t, fakellm.Sequence(tt.reply))
			msg, done, err := llmtest.Collect(m.Stream(context.Background(), userRequest("x")))
			require.NoError(t, err)
			require.NotNil(t, done)
			assert.Equal(t, tt.want, *done)
			assert.Equal(t, tt.text, msg.Content)
		})
	}
}

func TestStreamHTTPErrors(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name       string
		reply      fakellm.Reply
		kind       llm.ErrorKind
		retryAfter time.Duration
		transient  bool
		inMessage  string
		notInMsg   string
	}{
		{
			name:       "429 with Retry-After seconds",
			reply:      fakellm.Reply{Status: 429, Text: "slow down", Header: http.Header{"Retry-After": {"2"}}},
			kind:       llm.ErrRateLimited,
			retryAfter: 2 * time.Second,
			transient:  true,
		},
		{
			name:      "500",
			reply:     fakellm.Reply{Status: 500, Text: "boom"},
			kind:      llm.ErrServer,
			transient: true,
		},
		{
			name:      "503 with Retry-After",
			reply:     fakellm.Reply{Status: 503, Header: http.Header{"Retry-After": {"7"}}},
			kind:      llm.ErrServer,
			transient: true, retryAfter: 7 * time.Second,
		},
		{
			name:     "401 hides the provider text",
			reply:    fakellm.Reply{Status: 401, Text: "Incorrect API key provided: sk-tes***cret"},
			kind:     llm.ErrAuth,
			notInMsg: "sk-",
		},
		{
			name:  "403",
			reply: fakellm.Reply{Status: 403, Text: "forbidden"},
			kind:  llm.ErrAuth,
		},
		{
			name:     "400 context_length_exceeded is context_overflow",
			reply:    fakellm.TooLong(8192, 9000),
			kind:     llm.ErrContextOverflow,
			notInMsg: "9000",
		},
		{
			name:      "400 keeps the provider detail",
			reply:     fakellm.Reply{Status: 400, Text: "context length exceeded"},
			kind:      llm.ErrBadRequest,
			inMessage: "context length exceeded",
		},
		{
			name:  "404",
			reply: fakellm.Reply{Status: 404, Text: "no such model"},
			kind:  llm.ErrBadRequest,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m, _ := newModel(t, fakellm.Sequence(tt.reply))
			deltas, err := drain(m.Stream(context.Background(), userRequest("x")))
			assert.Empty(t, deltas)
			var le *llm.Error
			require.ErrorAs(t, err, &le)
			assert.Equal(t, tt.kind, le.Kind)
			assert.Equal(t, tt.reply.Status, le.Status)
			assert.Equal(t, tt.retryAfter, le.RetryAfter)
			assert.Equal(t, tt.transient, le.Transient())
			assert.NotEmpty(t, le.Message)
			if tt.inMessage != "" {
				assert.Contains(t, le.Message, tt.inMessage)
			}
			if tt.notInMsg != "" {
				assert.NotContains(t, le.Message, tt.notInMsg)
				assert.NotContains(t, le.Error(), tt.notInMsg)
			}
			var apiErr *openai.Error
			assert.ErrorAs(t, err, &apiErr, "the SDK error stays reachable for logs")
		})
	}
}

func TestStreamConnectionRefused(t *testing.T) {
	t.Parallel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := ln.Addr().String()
	require.NoError(t, ln.Close())

	m := modelFor(t, "http://"+addr+"/v1")
	_, err = drain(m.Stream(context.Background(), userRequest("x")))
	var le *llm.Error
	require.ErrorAs(t, err, &le)
	assert.Equal(t, llm.ErrNetwork, le.Kind)
	assert.Zero(t, le.Status)
	assert.True(t, le.Transient())
	assert.NotContains(t, le.Message, addr, "no internal detail in the user-facing message")
}

func TestStreamCancelMidStream(t *testing.T) {
	t.Parallel()
	m, _ := newModel(t, fakellm.Sequence(fakellm.Reply{Text: "first second third", Delay: time.Hour}))
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()

	var (
		texts []string
		final error
	)
	for d, err := range m.Stream(ctx, userRequest("x")) {
		if err != nil {
			final = err
			break
		}
		require.Nil(t, d.Done, "the turn cannot complete while the server is paused")
		texts = append(texts, d.Text)
		if len(texts) == 1 {
			cancel()
		}
	}
	require.ErrorIs(t, final, context.Canceled)
	var le *llm.Error
	assert.False(t, errors.As(final, &le), "cancellation is not a provider error")
	assert.Equal(t, []string{"first "}, texts)
}

func TestStreamCancelledBeforeStart(t *testing.T) {
	t.Parallel()
	m, srv := newModel(t, fakellm.Sequence(fakellm.Reply{Text: "never"}))
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	deltas, err := drain(m.Stream(ctx, userRequest("x")))
	assert.Empty(t, deltas)
	require.ErrorIs(t, err, context.Canceled)
	assert.Empty(t, srv.Requests())
}

func TestStreamConsumerStopsEarly(t *testing.T) {
	t.Parallel()
	m, _ := newModel(t, fakellm.Sequence(fakellm.Reply{Text: "one two three four"}))
	n := 0
	for range m.Stream(context.Background(), userRequest("x")) {
		n++
		break
	}
	assert.Equal(t, 1, n)
	// goleak in TestMain checks the response body was closed and nothing lingers.
}

// rawServer serves a fixed SSE body, for stream shapes fakellm never produces.
func rawServer(t *testing.T, body string) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		_, _ = fmt.Fprint(w, body)
	})}
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = srv.Serve(ln)
	}()
	t.Cleanup(func() {
		_ = srv.Close()
		<-done
	})
	return "http://" + ln.Addr().String() + "/v1"
}

func sse(chunks ...any) string {
	var b strings.Builder
	for _, c := range chunks {
		data, _ := json.Marshal(c)
		fmt.Fprintf(&b, "data: %s\n\n", data)
	}
	return b.String()
}

func deltaChunk(delta map[string]any, finish any) map[string]any {
	return map[string]any{
		"id": "c", "object": "chat.completion.chunk", "created": 0, "model": "m",
		"choices": []any{map[string]any{"index": 0, "delta": delta, "finish_reason": finish}},
	}
}

func TestStreamBrokenShapes(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		body string
		kind llm.ErrorKind
	}{
		{
			name: "ends without finish_reason",
			body: sse(deltaChunk(map[string]any{"content": "partial"}, nil)),
			kind: llm.ErrNetwork,
		},
		{
			name: "error event mid-stream",
			body: sse(deltaChunk(map[string]any{"content": "partial"}, nil), map[string]any{"error": map[string]any{"message": "overloaded"}}),
			kind: llm.ErrServer,
		},
		{
			name: "malformed chunk",
			body: sse(deltaChunk(map[string]any{"content": "partial"}, nil)) + "data: {not json\n\n",
			kind: llm.ErrServer,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := modelFor(t, rawServer(t, tt.body))
			msg, done, err := llmtest.Collect(m.Stream(context.Background(), userRequest("x")))
			assert.Nil(t, done)
			assert.Equal(t, "partial", msg.Content)
			var le *llm.Error
			require.ErrorAs(t, err, &le)
			assert.Equal(t, tt.kind, le.Kind)
		})
	}
}

func TestStreamLooseToolCallShapes(t *testing.T) {
	t.Parallel()
	// Name after the first arguments, no id at all, id and name repeated.
	body := sse(
		deltaChunk(map[string]any{"role": "assistant"}, nil),
		deltaChunk(map[string]any{"tool_calls": []any{map[string]any{"index": 0, "function": map[string]any{"arguments": `{"a":`}}}}, nil),
		deltaChunk(map[string]any{"tool_calls": []any{map[string]any{"index": 0, "function": map[string]any{"name": "demo__divide", "arguments": `1,`}}}}, nil),
		deltaChunk(map[string]any{"tool_calls": []any{map[string]any{"index": 0, "id": "ignored", "function": map[string]any{"name": "demo__divide", "arguments": `"b":2}`}}}}, nil),
		deltaChunk(map[string]any{"tool_calls": []any{map[string]any{"index": 1, "id": "call_x", "function": map[string]any{"arguments": `{}`}}}}, nil),
		deltaChunk(map[string]any{}, "tool_calls"),
	) + "data: [DONE]\n\n"
	m := modelFor(t, rawServer(t, body))

	deltas, err := drain(m.Stream(context.Background(), userRequest("x")))
	require.NoError(t, err)
	require.Len(t, deltas, 4)

	first := deltas[0].ToolCall
	require.NotNil(t, first)
	assert.Equal(t, 0, first.Index)
	assert.Equal(t, "demo__divide", first.Name)
	assert.True(t, strings.HasPrefix(first.ID, "call_"), "a missing id is synthesised: %q", first.ID)
	assert.Equal(t, `{"a":1,`, first.Arguments, "held-back arguments go out with the name")

	assert.Equal(t, &llm.ToolCallDelta{Index: 0, Arguments: `"b":2}`}, deltas[1].ToolCall)
	assert.Equal(t, &llm.ToolCallDelta{Index: 1, ID: "call_x", Name: "unnamed_tool", Arguments: `{}`}, deltas[2].ToolCall,
		"a call whose name never came is still reported")
	require.NotNil(t, deltas[3].Done)
	assert.Equal(t, "tool_calls", deltas[3].Done.FinishReason)
}

// TestScriptedDemoOverHTTP runs a demo conversation with the scripted model
// behind the fake server, so the request mapping and the stream decoding
// are exercised in both directions across several turns.
func TestScriptedDemoOverHTTP(t *testing.T) {
	t.Parallel()
	m, _ := newModel(t, fakellm.FromModel(scripted.New(scripted.Config{})))
	req := &llm.Request{
		Messages: []llm.Message{{Role: llm.RoleSystem, Content: "sys"}, {Role: llm.RoleUser, Content: "plan a trip to Lisbon"}},
		Tools:    []llm.Tool{{Name: "travel", Parameters: map[string]any{"type": "object"}}, {Name: "research"}},
	}

	msg, done, err := llmtest.Collect(m.Stream(context.Background(), req))
	require.NoError(t, err)
	assert.Equal(t, "tool_calls", done.FinishReason)
	require.Len(t, msg.ToolCalls, 1)
	assert.Equal(t, "travel", msg.ToolCalls[0].Name)
	assert.JSONEq(t, `{"prompt":"plan a trip to Lisbon"}`, msg.ToolCalls[0].Arguments)

	req.Messages = append(req.Messages, msg,
		llm.Message{Role: llm.RoleTool, ToolCallID: msg.ToolCalls[0].ID, Content: "[INPUT_REQUIRED:task_id=t-9]\nWhich dates?"})
	msg, done, err = llmtest.Collect(m.Stream(context.Background(), req))
	require.NoError(t, err)
	assert.Equal(t, "stop", done.FinishReason)
	assert.Equal(t, scripted.Prefix+"travel needs more information: Which dates?", msg.Content)

	req.Messages = append(req.Messages, msg, llm.Message{Role: llm.RoleUser, Content: "May 3 to 7"})
	msg, _, err = llmtest.Collect(m.Stream(context.Background(), req))
	require.NoError(t, err)
	require.Len(t, msg.ToolCalls, 1)
	assert.Equal(t, "travel", msg.ToolCalls[0].Name)
	assert.JSONEq(t, `{"prompt":"May 3 to 7","task_id":"t-9"}`, msg.ToolCalls[0].Arguments)
	assert.NotEqual(t, req.Messages[2].ToolCalls[0].ID, msg.ToolCalls[0].ID, "call ids are unique within the thread")
}
