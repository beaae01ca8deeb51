package fakellm

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"iter"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/baton-dev/baton/internal/testutil"
	"github.com/baton-dev/baton/llm"
)

func TestMain(m *testing.M) {
	testutil.VerifyTestMain(m)
}

func client(t *testing.T, srv *Server) openai.Client {
	t.Helper()
	tr := &http.Transport{}
	t.Cleanup(tr.CloseIdleConnections)
	return openai.NewClient(option.WithBaseURL(srv.URL), option.WithAPIKey("k"), option.WithMaxRetries(0),
		option.WithHTTPClient(&http.Client{Transport: tr}))
}

func TestNonStreamingWithSDK(t *testing.T) {
	t.Parallel()
	srv := Start(Sequence(
		Reply{Text: "hello world", Usage: &llm.Usage{InputTokens: 7, OutputTokens: 2}},
		Reply{ToolCalls: []llm.ToolCall{{Name: "travel", Arguments: `{"prompt":"x"}`}}},
	))
	t.Cleanup(srv.Close)
	c := client(t, srv)
	params := openai.ChatCompletionNewParams{Model: "m", Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("hi")}}

	cc, err := c.Chat.Completions.New(context.Background(), params)
	require.NoError(t, err)
	require.Len(t, cc.Choices, 1)
	assert.Equal(t, "hello world", cc.Choices[0].Message.Content)
	assert.Equal(t, "stop", cc.Choices[0].FinishReason)
	assert.EqualValues(t, 7, cc.Usage.PromptTokens)
	assert.EqualValues(t, 2, cc.Usage.CompletionTokens)

	cc, err = c.Chat.Completions.New(context.Background(), params)
	require.NoError(t, err)
	assert.Equal(t, "tool_calls", cc.Choices[0].FinishReason)
	require.Len(t, cc.Choices[0].Message.ToolCalls, 1)
	tc := cc.Choices[0].Message.ToolCalls[0]
	assert.Equal(t, "call_fake_0", tc.ID, "empty ids are filled in")
	assert.Equal(t, "travel", tc.Function.Name)
	assert.Equal(t, `{"prompt":"x"}`, tc.Function.Arguments)

	// The last reply repeats.
	cc, err = c.Chat.Completions.New(context.Background(), params)
	require.NoError(t, err)
	assert.Equal(t, "tool_calls", cc.Choices[0].FinishReason)
	assert.Len(t, srv.Requests(), 3)
}

func TestStreamWireFormat(t *testing.T) {
	t.Parallel()
	srv := Start(Sequence(Reply{Text: "a b", ToolCalls: []llm.ToolCall{{ID: "c1", Name: "t", Arguments: `{"k":1}`}}}))
	t.Cleanup(srv.Close)
	body := `{"model":"m","stream":true,"stream_options":{"include_usage":true},"messages":[{"role":"user","content":"hi"}]}`
	tr := &http.Transport{}
	t.Cleanup(tr.CloseIdleConnections)
	resp, err := (&http.Client{Transport: tr}).Post(srv.URL+"/chat/completions", "application/json", strings.NewReader(body))
	require.NoError(t, err)
	defer resp.Body.Close()
	assert.Equal(t, "text/event-stream", resp.Header.Get("Content-Type"))

	var frames []string
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		if line, ok := strings.CutPrefix(sc.Text(), "data: "); ok {
			frames = append(frames, line)
		}
	}
	require.NoError(t, sc.Err())
	require.NotEmpty(t, frames)
	assert.Equal(t, "[DONE]", frames[len(frames)-1])

	type chunkT struct {
		Object  string `json:"object"`
		Model   string `json:"model"`
		Choices []struct {
			Delta        map[string]any `json:"delta"`
			FinishReason *string        `json:"finish_reason"`
		} `json:"choices"`
		Usage *struct {
			PromptTokens int `json:"prompt_tokens"`
		} `json:"usage"`
	}
	var chunks []chunkT
	for _, f := range frames[:len(frames)-1] {
		var c chunkT
		require.NoError(t, json.Unmarshal([]byte(f), &c), f)
		assert.Equal(t, "chat.completion.chunk", c.Object)
		assert.Equal(t, "m", c.Model)
		chunks = append(chunks, c)
	}
	// role, "a ", "b", tool header, 2 fragments, finish, usage
	require.Len(t, chunks, 8)
	assert.Equal(t, "assistant", chunks[0].Choices[0].Delta["role"])
	assert.Equal(t, "a ", chunks[1].Choices[0].Delta["content"])
	assert.Equal(t, "b", chunks[2].Choices[0].Delta["content"])
	head := chunks[3].Choices[0].Delta["tool_calls"].([]any)[0].(map[string]any)
	assert.Equal(t, "c1", head["id"])
	assert.Equal(t, "function", head["type"])
	assert.Equal(t, "t", head["function"].(map[string]any)["name"])
	var args string
	for _, c := range chunks[4:6] {
		frag := c.Choices[0].Delta["tool_calls"].([]any)[0].(map[string]any)
		assert.EqualValues(t, 0, frag["index"])
		assert.NotContains(t, frag, "id")
		args += frag["function"].(map[string]any)["arguments"].(string)
	}
	assert.Equal(t, `{"k":1}`, args)
	require.NotNil(t, chunks[6].Choices[0].FinishReason)
	assert.Equal(t, "tool_calls", *chunks[6].Choices[0].FinishReason)
	assert.Empty(t, chunks[7].Choices)
	require.NotNil(t, chunks[7].Usage)
	assert.Positive(t, chunks[7].Usage.PromptTokens)
}

func TestRequestDecoding(t *testing.T) {
	t.Parallel()
	srv := Start(Sequence())
	t.Cleanup(srv.Close)
	body := `{"model":"m","messages":[
		{"role":"system","content":[{"type":"text","text":"part1 "},{"type":"text","text":"part2"}]},
		{"role":"assistant","content":null,"tool_calls":[{"id":"c","type":"function","function":{"name":"t","arguments":"{}"}}]},
		{"role":"tool","tool_call_id":"c","content":"res"}],
		"tools":[{"type":"function","function":{"name":"t","description":"d","parameters":{"type":"object"}}}]}`
	tr := &http.Transport{}
	t.Cleanup(tr.CloseIdleConnections)
	req, err := http.NewRequest(http.MethodPost, srv.URL+"/chat/completions", strings.NewReader(body))
	require.NoError(t, err)
	req.Header.Set("Authorization", "Bearer abc")
	resp, err := (&http.Client{Transport: tr}).Do(req)
	require.NoError(t, err)
	require.NoError(t, resp.Body.Close())
	assert.Equal(t, http.StatusOK, resp.StatusCode)

	reqs := srv.Requests()
	require.Len(t, reqs, 1)
	got := reqs[0]
	assert.Equal(t, "Bearer abc", got.Header.Get("Authorization"))
	assert.Equal(t, []Message{
		{Role: "system", Content: "part1 part2"},
		{Role: "assistant", ToolCalls: []ToolCall{{ID: "c", Type: "function", Function: FunctionCall{Name: "t", Arguments: "{}"}}}},
		{Role: "tool", ToolCallID: "c", Content: "res"},
	}, got.Messages)
	assert.Equal(t, []string{"t"}, got.ToolNames())
	assert.Equal(t, "tool", got.Last().Role)
	assert.Equal(t, map[string]any{"type": "object"}, got.Tools[0].Function.Parameters)
}

func TestBadJSONIs400(t *testing.T) {
	t.Parallel()
	srv := Start(Sequence())
	t.Cleanup(srv.Close)
	tr := &http.Transport{}
	t.Cleanup(tr.CloseIdleConnections)
	resp, err := (&http.Client{Transport: tr}).Post(srv.URL+"/chat/completions", "application/json", strings.NewReader("{"))
	require.NoError(t, err)
	require.NoError(t, resp.Body.Close())
	assert.Equal(t, http.StatusBadRequest, resp.StatusCode)
	assert.Empty(t, srv.Requests())
}

func TestToolThenEcho(t *testing.T) {
	t.Parallel()
	h := ToolThenEcho("demo__divide", map[string]any{"a": 1, "b": 0})
	tests := []struct {
		name string
		req  Request
		want Reply
	}{
		{
			name: "user turn calls the tool",
			req:  Request{Messages: []Message{{Role: "system"}, {Role: "user", Content: "go"}}},
			want: Reply{ToolCalls: []llm.ToolCall{{ID: "call_0", Name: "demo__divide", Arguments: `{"a":1,"b":0}`}}},
		},
		{
			name: "tool turn echoes the result",
			req: Request{Messages: []Message{{Role: "user"}, {Role: "assistant"},
				{Role: "tool", ToolCallID: "call_0", Content: "[ERROR]\ndivision by zero"}}},
			want: Reply{Text: "RESULT: [ERROR]\ndivision by zero"},
		},
		{
			name: "a later user turn gets a fresh id",
			req: Request{Messages: []Message{{Role: "user"}, {Role: "assistant"}, {Role: "tool"},
				{Role: "assistant"}, {Role: "user"}}},
			want: Reply{ToolCalls: []llm.ToolCall{{ID: "call_2", Name: "demo__divide", Arguments: `{"a":1,"b":0}`}}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			assert.Equal(t, tt.want, h(tt.req))
		})
	}
	assert.Equal(t, "{}", ToolThenEcho("x", nil)(Request{}).ToolCalls[0].Arguments)
}

func TestSequence(t *testing.T) {
	t.Parallel()
	h := Sequence(Reply{Text: "1"}, Reply{Text: "2"})
	var got []string
	for range 4 {
		got = append(got, h(Request{}).Text)
	}
	assert.Equal(t, []string{"1", "2", "2", "2"}, got)
	assert.Equal(t, "ok", Sequence()(Request{}).Text)
}

func TestCloseEndsPausedStreams(t *testing.T) {
	t.Parallel()
	srv := Start(Sequence(Reply{Text: "a b c", Delay: time.Hour}))
	tr := &http.Transport{}
	t.Cleanup(tr.CloseIdleConnections)
	body := `{"model":"m","stream":true,"messages":[{"role":"user","content":"hi"}]}`
	resp, err := (&http.Client{Transport: tr}).Post(srv.URL+"/chat/completions", "application/json", strings.NewReader(body))
	require.NoError(t, err)
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	require.True(t, sc.Scan(), "the first chunk arrives before the pause")

	srv.Close() // must return although the handler is sleeping for an hour
	for sc.Scan() {
		assert.NotContains(t, sc.Text(), `"c"`, "the paused rest never arrives")
	}
}

func TestSplitWords(t *testing.T) {
	t.Parallel()
	tests := []struct {
		in   string
		want []string
	}{
		{"", nil},
		{"one", []string{"one"}},
		{"a b", []string{"a ", "b"}},
		{"a  b ", []string{"a  ", "b "}},
	}
	for _, tt := range tests {
		got := SplitWords(tt.in)
		assert.Equal(t, tt.want, got)
		assert.Equal(t, tt.in, strings.Join(got, ""))
	}
}

// stubModel replays fixed deltas and records the request it was given.
type stubModel struct {
	deltas []llm.Delta
	err    error
	got    *llm.Request
}

func (s *stubModel) Stream(_ context.Context, req *llm.Request) iter.Seq2[llm.Delta, error] {
	s.got = req
	return func(yield func(llm.Delta, error) bool) {
		for _, d := range s.deltas {
			if !yield(d, nil) {
				return
			}
		}
		if s.err != nil {
			yield(llm.Delta{}, s.err)
		}
	}
}

func TestFromModel(t *testing.T) {
	t.Parallel()
	req := Request{
		Messages: []Message{
			{Role: "developer", Content: "sys"},
			{Role: "assistant", ToolCalls: []ToolCall{{ID: "c", Type: "function", Function: FunctionCall{Name: "t", Arguments: "{}"}}}},
			{Role: "tool", ToolCallID: "c", Content: "r"},
		},
		Tools: []Tool{{Type: "function", Function: Function{Name: "t", Description: "d", Parameters: map[string]any{"type": "object"}}}},
	}
	ok := &stubModel{deltas: []llm.Delta{
		{Text: "hi"},
		{ToolCall: &llm.ToolCallDelta{ID: "x", Name: "t", Arguments: "{"}},
		{ToolCall: &llm.ToolCallDelta{Arguments: "}"}},
		{Done: &llm.Completion{FinishReason: "tool_calls", Usage: llm.Usage{InputTokens: 1, OutputTokens: 2}}},
	}}
	got := FromModel(ok)(req)
	assert.Equal(t, Reply{
		Text:         "hi",
		ToolCalls:    []llm.ToolCall{{ID: "x", Name: "t", Arguments: "{}"}},
		FinishReason: "tool_calls",
		Usage:        &llm.Usage{InputTokens: 1, OutputTokens: 2},
	}, got)
	assert.Equal(t, &llm.Request{
		Messages: []llm.Message{
			{Role: llm.RoleSystem, Content: "sys"},
			{Role: llm.RoleAssistant, ToolCalls: []llm.ToolCall{{ID: "c", Name: "t", Arguments: "{}"}}},
			{Role: llm.RoleTool, ToolCallID: "c", Content: "r"},
		},
		Tools: []llm.Tool{{Name: "t", Description: "d", Parameters: map[string]any{"type": "object"}}},
	}, ok.got)

	failing := &stubModel{err: errors.New("model broke")}
	got = FromModel(failing)(req)
	assert.Equal(t, http.StatusInternalServerError, got.Status)
	assert.Contains(t, got.Text, "model broke")
}

func TestListenBadAddress(t *testing.T) {
	t.Parallel()
	_, err := Listen("256.0.0.1:0", Sequence())
	require.Error(t, err)
}
