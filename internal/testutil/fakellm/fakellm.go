// Package fakellm is an OpenAI-compatible fake model server for tests.
//
// It serves POST /v1/chat/completions on a loopback port and answers each
// request with a scripted Reply chosen by a Handler, so the real openai
// provider code (SDK, SSE decoding, error mapping) runs against it. Streaming
// requests get chat.completion.chunk frames shaped like OpenAI's: a role
// chunk, text split into word chunks, each tool call as a header chunk (id,
// name) followed by two argument fragments, a finish chunk, an optional usage
// chunk, and "data: [DONE]". Integration tests can run it in a tiny main and
// point the coordinator at URL.
package fakellm

import (
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/baton-dev/baton/llm"
)

// Reply scripts the answer to one chat completion request.
type Reply struct {
	// Text is the assistant text; for an error reply, the error message.
	Text string
	// ToolCalls are the calls to make; an empty ID becomes "call_fake_<i>".
	ToolCalls []llm.ToolCall
	// FinishReason defaults to "tool_calls" when ToolCalls is set, else "stop".
	FinishReason string
	Refusal      string
	// Status other than 0 or 200 makes an error response with a JSON error body.
	Status int
	// Code is the error body's "code" (e.g. "context_length_exceeded"); "" sends null.
	Code string
	// Header is added to the response (e.g. Retry-After).
	Header http.Header
	// Delay is slept before an error or non-streaming response, and, when
	// streaming, before every chunk after the first piece of content (text,
	// refusal or tool call header), so a test can cancel mid-stream.
	// The sleep ends early when the client goes away or the server closes.
	Delay time.Duration
	// Usage overrides the token counts reported; by default they are
	// estimated from the text lengths.
	Usage *llm.Usage
	// CutAfter, when streaming, cuts the connection after this many chunks
	// (the role chunk counts), before the finish_reason: a stream broken
	// mid-turn. A tool call is a head chunk and two argument halves, so
	// CutAfter 3 with one call and no text cuts it in the middle of its
	// arguments.
	CutAfter int
}

// Handler chooses the reply to a request.
type Handler func(req Request) Reply

// Request is a decoded chat completion request.
type Request struct {
	Model         string         `json:"model"`
	Messages      []Message      `json:"messages"`
	Tools         []Tool         `json:"tools,omitempty"`
	Stream        bool           `json:"stream"`
	StreamOptions *StreamOptions `json:"stream_options,omitempty"`
	// Header is the HTTP request header, e.g. to check Authorization.
	Header http.Header `json:"-"`
}

// StreamOptions is the stream_options request field.
type StreamOptions struct {
	IncludeUsage bool `json:"include_usage"`
}

// Message is one request message. Content arrays of text parts are joined
// into Content.
type Message struct {
	Role       string     `json:"role"`
	Content    string     `json:"content"`
	Refusal    string     `json:"refusal,omitempty"`
	ToolCalls  []ToolCall `json:"tool_calls,omitempty"`
	ToolCallID string     `json:"tool_call_id,omitempty"`
}

// UnmarshalJSON accepts content as a string, null or an array of text parts.
func (m *Message) UnmarshalJSON(data []byte) error {
	type shadow Message
	var raw struct {
		shadow
		Content json.RawMessage `json:"content"`
	}
	if err := json.Unmarshal(data, &raw); err != nil {
		return err
	}
	*m = Message(raw.shadow)
	m.Content = ""
	c := raw.Content
	if len(c) == 0 || string(c) == "null" {
		return nil
	}
	if c[0] == '"' {
		return json.Unmarshal(c, &m.Content)
	}
	var parts []struct {
		Type string `json:"type"`
		Text string `json:"text"`
	}
	if err := json.Unmarshal(c, &parts); err != nil {
		return fmt.Errorf("message content: %w", err)
	}
	var b strings.Builder
	for _, p := range parts {
		b.WriteString(p.Text)
	}
	m.Content = b.String()
	return nil
}

// ToolCall is a tool call in an assistant message.
type ToolCall struct {
	ID       string       `json:"id"`
	Type     string       `json:"type"`
	Function FunctionCall `json:"function"`
}

// FunctionCall is the function part of a tool call.
type FunctionCall struct {
	Name      string `json:"name"`
	Arguments string `json:"arguments"`
}

// Tool is a tool offered in the request.
type Tool struct {
	Type     string   `json:"type"`
	Function Function `json:"function"`
}

// Function is the definition of a function tool.
type Function struct {
	Name        string         `json:"name"`
	Description string         `json:"description,omitempty"`
	Parameters  map[string]any `json:"parameters,omitempty"`
}

// Last returns the last message, or a zero Message when there is none.
func (r Request) Last() Message {
	if len(r.Messages) == 0 {
		return Message{}
	}
	return r.Messages[len(r.Messages)-1]
}

// ToolNames returns the names of the offered tools, in order.
func (r Request) ToolNames() []string {
	names := make([]string, 0, len(r.Tools))
	for _, t := range r.Tools {
		names = append(names, t.Function.Name)
	}
	return names
}

// Server is a running fake model server.
type Server struct {
	// URL is the base URL including /v1, as given to an OpenAI client.
	URL string

	handler  Handler
	srv      *http.Server
	done     chan struct{}
	served   sync.WaitGroup // the Serve goroutine
	handlers sync.WaitGroup // in-flight requests

	mu        sync.Mutex
	requests  []Request
	closeOnce sync.Once
}

// Start serves h on 127.0.0.1 at a random port. It panics if it cannot
// listen, like httptest.NewServer.
func Start(h Handler) *Server {
	s, err := Listen("127.0.0.1:0", h)
	if err != nil {
		panic(err.Error())
	}
	return s
}

// Listen serves h on addr (host:port; port 0 picks a free one), for use from
// a small main as well as from tests.
func Listen(addr string, h Handler) (*Server, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("fakellm: listen: %w", err)
	}
	s := &Server{
		URL:     "http://" + ln.Addr().String() + "/v1",
		handler: h,
		done:    make(chan struct{}),
	}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /v1/chat/completions", s.track(s.chat))
	mux.HandleFunc("GET /v1/models", s.track(s.models))
	s.srv = &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	s.served.Add(1)
	go func() {
		defer s.served.Done()
		_ = s.srv.Serve(ln) // returns http.ErrServerClosed on Close
	}()
	return s, nil
}

// Close stops the server, drops open connections and waits for in-flight
// handlers to return.
func (s *Server) Close() {
	s.closeOnce.Do(func() {
		close(s.done)
		_ = s.srv.Close()
		s.served.Wait()
		s.handlers.Wait()
	})
}

// Requests returns the requests received so far, in order.
func (s *Server) Requests() []Request {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Request(nil), s.requests...)
}

func (s *Server) track(h http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		s.handlers.Add(1)
		defer s.handlers.Done()
		h(w, r)
	}
}

func (s *Server) models(w http.ResponseWriter, _ *http.Request) {
	writeJSON(w, http.StatusOK, map[string]any{
		"object": "list",
		"data": []any{
			map[string]any{"id": "fake-model", "object": "model", "created": 0, "owned_by": "fakellm"},
			map[string]any{"id": "fake", "object": "model", "created": 0, "owned_by": "fakellm"},
		},
	})
}

func (s *Server) chat(w http.ResponseWriter, r *http.Request) {
	var req Request
	if err := json.NewDecoder(http.MaxBytesReader(w, r.Body, 32<<20)).Decode(&req); err != nil {
		writeError(w, http.StatusBadRequest, "invalid_request_error", "invalid JSON body: "+err.Error())
		return
	}
	req.Header = r.Header.Clone()
	s.mu.Lock()
	s.requests = append(s.requests, req)
	s.mu.Unlock()

	rep := s.handler(req)
	for k, vs := range rep.Header {
		for _, v := range vs {
			w.Header().Add(k, v)
		}
	}
	if rep.Status != 0 && rep.Status != http.StatusOK {
		if !s.sleep(r, rep.Delay) {
			return
		}
		msg := rep.Text
		if msg == "" {
			msg = http.StatusText(rep.Status)
		}
		writeErrorCode(w, rep.Status, errorType(rep.Status), msg, rep.Code)
		return
	}
	rep.ToolCalls = append([]llm.ToolCall(nil), rep.ToolCalls...)
	for i := range rep.ToolCalls {
		if rep.ToolCalls[i].ID == "" {
			rep.ToolCalls[i].ID = fmt.Sprintf("call_fake_%d", i)
		}
	}
	if rep.FinishReason == "" {
		rep.FinishReason = "stop"
		if len(rep.ToolCalls) > 0 {
			rep.FinishReason = "tool_calls"
		}
	}
	usage := estimateUsage(req, rep)
	if req.Stream {
		s.stream(w, r, req, rep, usage)
		return
	}
	if !s.sleep(r, rep.Delay) {
		return
	}
	writeJSON(w, http.StatusOK, completion(req, rep, usage))
}

// sleep waits d, reporting false when the client left or the server closed.
func (s *Server) sleep(r *http.Request, d time.Duration) bool {
	if d <= 0 {
		return true
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-r.Context().Done():
		return false
	case <-s.done:
		return false
	}
}

func (s *Server) stream(w http.ResponseWriter, r *http.Request, req Request, rep Reply, usage llm.Usage) {
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
	w.WriteHeader(http.StatusOK)
	rc := http.NewResponseController(w)

	sent := 0
	send := func(v any) bool {
		// The role chunk and the first content chunk go out at once.
		if sent >= 2 && !s.sleep(r, rep.Delay) {
			return false
		}
		sent++
		data, err := json.Marshal(v)
		if err != nil {
			return false
		}
		if _, err := fmt.Fprintf(w, "data: %s\n\n", data); err != nil {
			return false
		}
		return rc.Flush() == nil
	}
	for i, c := range chunks(req, rep, usage) {
		if rep.CutAfter > 0 && i >= rep.CutAfter {
			// Abort the response: the client sees the connection end mid-stream.
			panic(http.ErrAbortHandler)
		}
		if !send(c) {
			return
		}
	}
	if !s.sleep(r, rep.Delay) {
		return
	}
	_, _ = fmt.Fprint(w, "data: [DONE]\n\n")
	_ = rc.Flush()
}

const completionID = "chatcmpl-fakellm"

func chunk(req Request, choices []any) map[string]any {
	return map[string]any{
		"id":      completionID,
		"object":  "chat.completion.chunk",
		"created": time.Now().Unix(),
		"model":   req.Model,
		"choices": choices,
	}
}

func choiceDelta(delta map[string]any, finish any) map[string]any {
	return map[string]any{"index": 0, "delta": delta, "finish_reason": finish, "logprobs": nil}
}

// chunks renders the reply as the sequence of streamed chunk objects.
func chunks(req Request, rep Reply, usage llm.Usage) []map[string]any {
	out := []map[string]any{chunk(req, []any{choiceDelta(map[string]any{"role": "assistant", "content": ""}, nil)})}
	for _, piece := range SplitWords(rep.Text) {
		out = append(out, chunk(req, []any{choiceDelta(map[string]any{"content": piece}, nil)}))
	}
	for _, piece := range SplitWords(rep.Refusal) {
		out = append(out, chunk(req, []any{choiceDelta(map[string]any{"refusal": piece}, nil)}))
	}
	for i, tc := range rep.ToolCalls {
		head := map[string]any{
			"index": i, "id": tc.ID, "type": "function",
			"function": map[string]any{"name": tc.Name, "arguments": ""},
		}
		out = append(out, chunk(req, []any{choiceDelta(map[string]any{"tool_calls": []any{head}}, nil)}))
		a, b := SplitHalf(tc.Arguments)
		for _, frag := range []string{a, b} {
			part := map[string]any{"index": i, "function": map[string]any{"arguments": frag}}
			out = append(out, chunk(req, []any{choiceDelta(map[string]any{"tool_calls": []any{part}}, nil)}))
		}
	}
	out = append(out, chunk(req, []any{choiceDelta(map[string]any{}, rep.FinishReason)}))
	if req.StreamOptions != nil && req.StreamOptions.IncludeUsage {
		u := chunk(req, []any{})
		u["usage"] = usageJSON(usage)
		out = append(out, u)
	}
	return out
}

func completion(req Request, rep Reply, usage llm.Usage) map[string]any {
	msg := map[string]any{"role": "assistant", "content": nilIfEmpty(rep.Text), "refusal": nilIfEmpty(rep.Refusal)}
	if len(rep.ToolCalls) > 0 {
		calls := make([]any, 0, len(rep.ToolCalls))
		for _, tc := range rep.ToolCalls {
			calls = append(calls, map[string]any{
				"id": tc.ID, "type": "function",
				"function": map[string]any{"name": tc.Name, "arguments": tc.Arguments},
			})
		}
		msg["tool_calls"] = calls
	}
	return map[string]any{
		"id":      completionID,
		"object":  "chat.completion",
		"created": time.Now().Unix(),
		"model":   req.Model,
		"choices": []any{map[string]any{"index": 0, "message": msg, "finish_reason": rep.FinishReason, "logprobs": nil}},
		"usage":   usageJSON(usage),
	}
}

func usageJSON(u llm.Usage) map[string]any {
	return map[string]any{
		"prompt_tokens":     u.InputTokens,
		"completion_tokens": u.OutputTokens,
		"total_tokens":      u.InputTokens + u.OutputTokens,
	}
}

// estimateUsage counts roughly four characters per token, unless the reply
// fixes the numbers.
func estimateUsage(req Request, rep Reply) llm.Usage {
	if rep.Usage != nil {
		return *rep.Usage
	}
	in := 0
	for _, m := range req.Messages {
		in += len(m.Content)
		for _, tc := range m.ToolCalls {
			in += len(tc.Function.Name) + len(tc.Function.Arguments)
		}
	}
	out := len(rep.Text) + len(rep.Refusal)
	for _, tc := range rep.ToolCalls {
		out += len(tc.Name) + len(tc.Arguments)
	}
	return llm.Usage{InputTokens: in/4 + 1, OutputTokens: out/4 + 1}
}

func nilIfEmpty(s string) any {
	if s == "" {
		return nil
	}
	return s
}

func errorType(status int) string {
	switch {
	case status == http.StatusTooManyRequests:
		return "rate_limit_exceeded"
	case status == http.StatusUnauthorized || status == http.StatusForbidden:
		return "authentication_error"
	case status >= 500:
		return "server_error"
	default:
		return "invalid_request_error"
	}
}

func writeError(w http.ResponseWriter, status int, typ, msg string) {
	writeErrorCode(w, status, typ, msg, "")
}

func writeErrorCode(w http.ResponseWriter, status int, typ, msg, code string) {
	var c any
	if code != "" {
		c = code
	}
	writeJSON(w, status, map[string]any{
		"error": map[string]any{"message": msg, "type": typ, "param": nil, "code": c},
	})
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

// SplitWords cuts s into word pieces (each word with its trailing spaces),
// whose concatenation is s. An empty s gives no pieces.
func SplitWords(s string) []string {
	var out []string
	for len(s) > 0 {
		i := strings.IndexByte(s, ' ')
		if i < 0 {
			out = append(out, s)
			break
		}
		j := i
		for j < len(s) && s[j] == ' ' {
			j++
		}
		out = append(out, s[:j])
		s = s[j:]
	}
	return out
}

// SplitHalf cuts s in two at a rune boundary near the middle.
func SplitHalf(s string) (string, string) {
	r := []rune(s)
	h := len(r) / 2
	return string(r[:h]), string(r[h:])
}
