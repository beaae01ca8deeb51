package mcpserver

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/baton-dev/baton/agui"
	"github.com/baton-dev/baton/internal/principal"
	"github.com/baton-dev/baton/internal/testutil"
)

func TestMain(m *testing.M) { testutil.VerifyTestMain(m) }

func newTestServer(t *testing.T, e *fakeEngine, mod ...func(*Config)) *Server {
	t.Helper()
	cfg := Config{
		Engine:          e,
		Name:            "baton",
		Version:         "test",
		CoordinatorTool: "ask",
		Agents: []Agent{
			{Name: "research", Target: "research", Describe: func() string { return "Finds papers. Skills: search;" }},
			{Name: "travel", Target: "travel_agent"},
		},
		MaxPromptBytes: 1000,
		Anonymous:      "local:tester",
		CancelHorizon:  5 * time.Second,
	}
	for _, f := range mod {
		f(&cfg)
	}
	s, err := New(cfg)
	require.NoError(t, err)
	return s
}

// connect connects a go-sdk client to s over in-memory transports.
func connect(t *testing.T, s *Server, opts *mcp.ClientOptions) *mcp.ClientSession {
	t.Helper()
	ctx := context.Background()
	ct, st := mcp.NewInMemoryTransports()
	ss, err := s.srv.Connect(ctx, st, nil)
	require.NoError(t, err)
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "test", Version: "1"}, opts).Connect(ctx, ct, nil)
	require.NoError(t, err)
	t.Cleanup(func() {
		_ = cs.Close()
		_ = ss.Wait()
	})
	return cs
}

func text(t *testing.T, res *mcp.CallToolResult) string {
	t.Helper()
	require.Len(t, res.Content, 1)
	tc, ok := res.Content[0].(*mcp.TextContent)
	require.True(t, ok, "content is %T", res.Content[0])
	return tc.Text
}

func TestToolsList(t *testing.T) {
	t.Parallel()
	cs := connect(t, newTestServer(t, newFakeEngine()), nil)
	res, err := cs.ListTools(context.Background(), nil)
	require.NoError(t, err)
	byName := map[string]*mcp.Tool{}
	for _, tl := range res.Tools {
		byName[tl.Name] = tl
	}
	require.Len(t, byName, 3)
	assert.Contains(t, byName["ask"].Description, "coordinator")
	assert.Equal(t, "Finds papers. Skills: search;", byName["research"].Description)
	assert.Contains(t, byName["travel"].Description, `"travel"`)
	schema, _ := json.Marshal(byName["research"].InputSchema)
	assert.Contains(t, string(schema), `"required":["prompt"]`)
}

func TestNewRefusesTwoToolsOfOneName(t *testing.T) {
	t.Parallel()
	_, err := New(Config{Engine: newFakeEngine(), CoordinatorTool: "research", Agents: []Agent{{Name: "research", Target: "research"}}})
	require.Error(t, err)
	assert.Contains(t, err.Error(), `"research"`)
}

func TestCoordinatorToolAnswers(t *testing.T) {
	t.Parallel()
	e := newFakeEngine()
	cs := connect(t, newTestServer(t, e), nil)
	res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "ask", Arguments: map[string]any{"prompt": "hello you"}})
	require.NoError(t, err)
	assert.False(t, res.IsError)
	assert.Equal(t, "hi there", text(t, res))
	s := <-e.started
	assert.Equal(t, "", s.agent, "the coordinator tool runs the model loop")
	assert.Equal(t, "local:tester", s.who, "a call without token info is the anonymous principal's")
	assert.Equal(t, "hello you", promptOf(s.in))
}

func TestAgentToolOutcomes(t *testing.T) {
	t.Parallel()
	e := newFakeEngine()
	cs := connect(t, newTestServer(t, e), nil)
	ctx := context.Background()

	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "travel", Arguments: map[string]any{"prompt": "complete a trip"}})
	require.NoError(t, err)
	assert.False(t, res.IsError)
	assert.Equal(t, "done: complete a trip", text(t, res))
	s := <-e.started
	assert.Equal(t, "travel_agent", s.agent, "an agent tool is a delegation to the engine's tool of that agent")

	res, err = cs.CallTool(ctx, &mcp.CallToolParams{Name: "research", Arguments: map[string]any{"prompt": "fail please"}})
	require.NoError(t, err)
	assert.True(t, res.IsError)
	assert.Equal(t, "[FAILED]\nno way", text(t, res), "the tag and the agent's words")
	sc, _ := json.Marshal(res.StructuredContent)
	assert.JSONEq(t, `{"status":"failed","tag":"FAILED"}`, string(sc))
}

func TestBadInputStartsNothing(t *testing.T) {
	t.Parallel()
	e := newFakeEngine()
	cs := connect(t, newTestServer(t, e), nil)
	ctx := context.Background()
	for _, tc := range []struct {
		name string
		tool string
		args any
		want string
	}{
		{"unknown tool", "nope", map[string]any{"prompt": "x"}, `unknown tool "nope"`},
		{"prompt not a string", "ask", map[string]any{"prompt": 42}, `"prompt" must be a string`},
		{"no prompt", "ask", map[string]any{}, `"prompt" is required`},
		{"empty prompt", "research", map[string]any{"prompt": "  "}, `must not be empty`},
		{"unknown argument", "ask", map[string]any{"prompt": "x", "task_id": "t"}, `unknown argument "task_id"`},
		{"oversized prompt", "research", map[string]any{"prompt": strings.Repeat("a", 1001)}, `1001 bytes; at most 1000`},
		{"resume not an object", "ask", map[string]any{"prompt": "", "resume": "yes"}, `"resume" must be an object`},
		{"resume without id", "ask", map[string]any{"prompt": "", "resume": map[string]any{"payload": "x"}}, `"interruptId"`},
		{"resume of a malformed id", "ask", map[string]any{"prompt": "", "resume": map[string]any{"interruptId": "no-slash"}}, `unknown interruptId`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: tc.tool, Arguments: tc.args})
			require.Error(t, err)
			var we *jsonrpc.Error
			require.True(t, errors.As(err, &we), "a JSON-RPC error, got %T: %v", err, err)
			assert.Equal(t, int64(jsonrpc.CodeInvalidParams), we.Code)
			assert.Contains(t, we.Message, tc.want)
		})
	}
	assert.Zero(t, e.startCount(), "no run started")
}

func TestProgressFromTheRunsEvents(t *testing.T) {
	t.Parallel()
	e := newFakeEngine()
	var mu sync.Mutex
	var got []*mcp.ProgressNotificationParams
	cs := connect(t, newTestServer(t, e), &mcp.ClientOptions{
		ProgressNotificationHandler: func(_ context.Context, req *mcp.ProgressNotificationClientRequest) {
			mu.Lock()
			got = append(got, req.Params)
			mu.Unlock()
		},
	})
	params := &mcp.CallToolParams{Name: "research", Arguments: map[string]any{"prompt": "progress now"}}
	params.SetProgressToken("tok-1")
	res, err := cs.CallTool(context.Background(), params)
	require.NoError(t, err)
	assert.Equal(t, "found it", text(t, res))
	// Notifications are sent before the result, in order.
	mu.Lock()
	defer mu.Unlock()
	require.NotEmpty(t, got)
	assert.Less(t, len(got), 50, "50 deltas are coalesced")
	for i, p := range got {
		assert.Equal(t, "tok-1", p.ProgressToken)
		assert.Equal(t, float64(i+1), p.Progress, "progress grows")
		assert.True(t, strings.HasPrefix(p.Message, "research: "), "names the sub-agent: %q", p.Message)
	}
}

func TestNoProgressWithoutToken(t *testing.T) {
	t.Parallel()
	e := newFakeEngine()
	var mu sync.Mutex
	n := 0
	cs := connect(t, newTestServer(t, e), &mcp.ClientOptions{
		ProgressNotificationHandler: func(context.Context, *mcp.ProgressNotificationClientRequest) { mu.Lock(); n++; mu.Unlock() },
	})
	_, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "research", Arguments: map[string]any{"prompt": "progress now"}})
	require.NoError(t, err)
	mu.Lock()
	defer mu.Unlock()
	assert.Zero(t, n)
}

func TestCancelledCallStopsTheRunAndWaitsForConfirmation(t *testing.T) {
	t.Parallel()
	e := newFakeEngine()
	cs := connect(t, newTestServer(t, e), nil)
	ctx, cancelCall := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	go func() {
		_, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "research", Arguments: map[string]any{"prompt": "slow please"}})
		errc <- err
	}()
	s := <-e.started
	cancelCall() // the client sends notifications/cancelled
	require.Error(t, <-errc)
	assert.Equal(t, s.in.RunID, <-e.stopped, "the call's run is stopped")
	// The handler asks for the downstream cancels after the run's end, until none is pending.
	require.Eventually(t, func() bool {
		s.run.mu.Lock()
		defer s.run.mu.Unlock()
		return s.run.settledAsked > 0
	}, 5*time.Second, 5*time.Millisecond)
}

func TestQuestionsWithoutElicitation(t *testing.T) {
	t.Parallel()
	e := newFakeEngine()
	srv := newTestServer(t, e)
	cs := connect(t, srv, nil)
	ctx := context.Background()
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "research", Arguments: map[string]any{"prompt": "ask me"}})
	require.NoError(t, err)
	assert.False(t, res.IsError)
	first := <-e.started
	assert.Contains(t, text(t, res), "Which colour?")
	sc := res.StructuredContent.(map[string]any)
	assert.Equal(t, "input_required", sc["status"])
	id, _ := sc["interruptId"].(string)
	assert.Equal(t, first.in.ThreadID+"/int-1", id)
	assert.Contains(t, text(t, res), id, "the text says how to answer")

	// Another principal cannot answer it.
	other := connect(t, newTestServer(t, e, func(c *Config) { c.Anonymous = "someone-else" }), nil)
	_, err = other.CallTool(ctx, &mcp.CallToolParams{Name: "research", Arguments: map[string]any{"prompt": "", "resume": map[string]any{"interruptId": id, "payload": "blue"}}})
	var we *jsonrpc.Error
	require.ErrorAs(t, err, &we)
	assert.Contains(t, we.Message, "not open for this caller")

	// The caller answers with resume: the same thread is resumed once, with the answer.
	res, err = cs.CallTool(ctx, &mcp.CallToolParams{Name: "research", Arguments: map[string]any{"prompt": "", "resume": map[string]any{"interruptId": id, "payload": "blue"}}})
	require.NoError(t, err)
	assert.False(t, res.IsError)
	assert.Equal(t, `answer: {"text":"blue"}`, text(t, res))
	resumed := <-e.started
	assert.Equal(t, first.in.ThreadID, resumed.in.ThreadID)
	assert.Equal(t, []agui.ResumeEntry{{InterruptID: "int-1", Status: agui.ResumeResolved, Payload: json.RawMessage(`{"text":"blue"}`)}}, resumed.in.Resume)
	assert.Equal(t, "research", resumed.agent, "an agent tool's resume is a delegation again")
}

func TestQuestionsByElicitation(t *testing.T) {
	t.Parallel()
	e := newFakeEngine()
	var asked []*mcp.ElicitParams
	cs := connect(t, newTestServer(t, e), &mcp.ClientOptions{
		ElicitationHandler: func(_ context.Context, req *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
			asked = append(asked, req.Params)
			if _, ok := req.Params.RequestedSchema.(map[string]any)["properties"].(map[string]any)["approved"]; ok {
				return &mcp.ElicitResult{Action: "decline"}, nil
			}
			return &mcp.ElicitResult{Action: "accept", Content: map[string]any{"text": "green"}}, nil
		},
	})
	ctx := context.Background()
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "ask", Arguments: map[string]any{"prompt": "ask me"}})
	require.NoError(t, err)
	assert.Equal(t, `answer: {"text":"green"}`, text(t, res))
	require.Len(t, asked, 1, "asked once")
	assert.Equal(t, "Which colour?", asked[0].Message)
	<-e.started
	resumed := <-e.started
	assert.Equal(t, agui.ResumeResolved, resumed.in.Resume[0].Status)

	// An approval's form holds only what a form can: approved, not editedArgs. A decline
	// resumes the question as cancelled.
	res, err = cs.CallTool(ctx, &mcp.CallToolParams{Name: "research", Arguments: map[string]any{"prompt": "approve it"}})
	require.NoError(t, err)
	assert.True(t, res.IsError)
	assert.Equal(t, "[CANCELED]\nthe question was declined", text(t, res))
	require.Len(t, asked, 2)
	schema, _ := json.Marshal(asked[1].RequestedSchema)
	assert.JSONEq(t, `{"type":"object","properties":{"approved":{"type":"boolean"}},"required":["approved"]}`, string(schema))
}

// TestHTTPPrincipals serves the handler over HTTP: each caller's principal comes from the
// request context (the server's authentication), and a session cannot change hands.
func TestHTTPPrincipals(t *testing.T) {
	t.Parallel()
	e := newFakeEngine()
	s := newTestServer(t, e)
	h := s.Handler(HTTPOptions{})
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		// Stands for package server's authentication: the bearer token is the principal.
		who, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
		if !ok {
			http.Error(w, "no", http.StatusUnauthorized)
			return
		}
		h.ServeHTTP(w, r.WithContext(principal.With(r.Context(), who)))
	}))
	t.Cleanup(ts.Close) // after the clients' sessions are closed (cleanups run last first)
	ctx := context.Background()
	client := func(who string, opts ...*mcp.ClientOptions) *mcp.ClientSession {
		hc := &http.Client{Transport: bearer{who: who, next: ts.Client().Transport}}
		cs, err := mcp.NewClient(&mcp.Implementation{Name: "t", Version: "1"}, append(opts, nil)[0]).Connect(ctx, &mcp.StreamableClientTransport{Endpoint: ts.URL, HTTPClient: hc}, nil)
		require.NoError(t, err)
		t.Cleanup(func() { _ = cs.Close() })
		return cs
	}
	alice := client("alice")
	assert.Equal(t, "2026-07-28", alice.InitializeResult().ProtocolVersion, "go-sdk's client speaks 2026-07-28, served statelessly")
	res, err := alice.CallTool(ctx, &mcp.CallToolParams{Name: "research", Arguments: map[string]any{"prompt": "ask me"}})
	require.NoError(t, err)
	assert.Equal(t, "alice", (<-e.started).who)
	id := res.StructuredContent.(map[string]any)["interruptId"].(string)

	bob := client("bob")
	_, err = bob.CallTool(ctx, &mcp.CallToolParams{Name: "research", Arguments: map[string]any{"prompt": "", "resume": map[string]any{"interruptId": id, "payload": "x"}}})
	require.Error(t, err, "bob cannot answer alice's question")
	assert.Contains(t, err.Error(), "not open for this caller")

	// Over stateless HTTP a question is a multi round-trip result, which go-sdk's client
	// answers with its elicitation handler and calls again.
	carol := client("carol", &mcp.ClientOptions{ElicitationHandler: func(context.Context, *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
		return &mcp.ElicitResult{Action: "accept", Content: map[string]any{"text": "red"}}, nil
	}})
	res, err = carol.CallTool(ctx, &mcp.CallToolParams{Name: "research", Arguments: map[string]any{"prompt": "ask me"}})
	require.NoError(t, err)
	assert.Equal(t, `answer: {"text":"red"}`, text(t, res))
	first, resumed := <-e.started, <-e.started
	assert.Equal(t, "carol", resumed.who)
	assert.Equal(t, first.in.ThreadID, resumed.in.ThreadID)
}

type bearer struct {
	who  string
	next http.RoundTripper
}

func (b bearer) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.who)
	return b.next.RoundTrip(r)
}

// TestDroppedRequestCancelsTheCall: a 2025-11-25 client that drops the HTTP request
// carrying a call, without notifications/cancelled, cancels the call's run.
func TestDroppedRequestCancelsTheCall(t *testing.T) {
	t.Parallel()
	e := newFakeEngine()
	h := newTestServer(t, e).Handler(HTTPOptions{})
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h.ServeHTTP(w, r.WithContext(principal.With(r.Context(), "")))
	}))
	t.Cleanup(ts.Close)
	post := func(ctx context.Context, session, body string) *http.Response {
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, ts.URL, strings.NewReader(body))
		require.NoError(t, err)
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		// A client cannot name another request: the surface replaces this header.
		req.Header.Set(callHeader, "forged")
		if session != "" {
			req.Header.Set("Mcp-Session-Id", session)
			req.Header.Set("MCP-Protocol-Version", "2025-11-25")
		}
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		return resp
	}
	ctx := context.Background()
	resp := post(ctx, "", `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"raw","version":"1"}}}`)
	session := resp.Header.Get("Mcp-Session-Id")
	_ = resp.Body.Close()
	require.NotEmpty(t, session)
	_ = post(ctx, session, `{"jsonrpc":"2.0","method":"notifications/initialized"}`).Body.Close()
	t.Cleanup(func() {
		req, _ := http.NewRequest(http.MethodDelete, ts.URL, nil)
		req.Header.Set("Mcp-Session-Id", session)
		if resp, err := http.DefaultClient.Do(req); err == nil {
			_ = resp.Body.Close()
		}
	})

	callCtx, drop := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		req, err := http.NewRequestWithContext(callCtx, http.MethodPost, ts.URL, strings.NewReader(`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"research","arguments":{"prompt":"slow"}}}`))
		if err != nil {
			return
		}
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		req.Header.Set("Mcp-Session-Id", session)
		req.Header.Set("MCP-Protocol-Version", "2025-11-25")
		if resp, err := http.DefaultClient.Do(req); err == nil {
			_, _ = io.Copy(io.Discard, resp.Body)
			_ = resp.Body.Close()
		}
	}()
	s := <-e.started
	drop() // the client goes away: no notifications/cancelled
	<-done
	assert.Equal(t, s.in.RunID, <-e.stopped, "the dropped call's run is stopped")
}

// TestFollowRequest: a call follows the HTTP request that carries it (named by the nonce
// Handler puts in its headers), unless KeepOnDisconnect; an unknown nonce follows nothing.
func TestFollowRequest(t *testing.T) {
	t.Parallel()
	for _, keep := range []bool{false, true} {
		s := newTestServer(t, newFakeEngine(), func(c *Config) { c.KeepOnDisconnect = keep })
		post, drop := context.WithCancel(context.Background())
		s.posts.Store("n1", post)
		req := &mcp.CallToolRequest{Extra: &mcp.RequestExtra{Header: http.Header{callHeader: {"n1"}}}}
		ctx, stop := s.followRequest(context.Background(), req)
		other, stopOther := s.followRequest(context.Background(), &mcp.CallToolRequest{Extra: &mcp.RequestExtra{Header: http.Header{callHeader: {"forged"}}}})
		drop()
		if keep {
			assert.NoError(t, ctx.Err(), "kept")
		} else {
			<-ctx.Done() // ends with the request
		}
		assert.NoError(t, other.Err())
		stop()
		stopOther()
	}
}

// TestCancelOverStatelessHTTP: go-sdk's client (2026-07-28, stateless) cancels a call by
// closing its request; the run is stopped.
func TestCancelOverStatelessHTTP(t *testing.T) {
	t.Parallel()
	e := newFakeEngine()
	h := newTestServer(t, e).Handler(HTTPOptions{})
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h.ServeHTTP(w, r.WithContext(principal.With(r.Context(), "")))
	}))
	t.Cleanup(ts.Close)
	ctx := context.Background()
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "t", Version: "1"}, nil).Connect(ctx, &mcp.StreamableClientTransport{Endpoint: ts.URL}, nil)
	require.NoError(t, err)
	t.Cleanup(func() { _ = cs.Close() })
	require.Equal(t, "2026-07-28", cs.InitializeResult().ProtocolVersion)
	cctx, cancelCall := context.WithCancel(ctx)
	errc := make(chan error, 1)
	go func() {
		_, err := cs.CallTool(cctx, &mcp.CallToolParams{Name: "research", Arguments: map[string]any{"prompt": "slow"}})
		errc <- err
	}()
	s := <-e.started
	cancelCall()
	require.Error(t, <-errc)
	assert.Equal(t, s.in.RunID, <-e.stopped)
}
