package mcpclient

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/baton-dev/baton/internal/demomcp"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// tagOf returns the tag on the first line of a tool result, e.g. "OK" or
// "RETRY:tool_error".
func tagOf(t *testing.T, out string) string {
	t.Helper()
	first, _, _ := strings.Cut(out, "\n")
	require.True(t, strings.HasPrefix(first, "["), "no tag in %q", out)
	end := strings.Index(first, "]")
	require.Positive(t, end, "no tag in %q", out)
	return first[1:end]
}

// signalOf parses the JSON of a [RETRY:<code>] result.
func signalOf(t *testing.T, out string) map[string]any {
	t.Helper()
	require.True(t, strings.HasPrefix(out, "[RETRY:"), "not a retry signal: %q", out)
	_, js, ok := strings.Cut(out, "] ")
	require.True(t, ok, out)
	var m map[string]any
	require.NoError(t, json.Unmarshal([]byte(js), &m), out)
	return m
}

func mustCall(t *testing.T, r *Registry, name, args string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	out, err := callText(r, ctx, name, json.RawMessage(args), CallOptions{})
	require.NoError(t, err)
	return out
}

// demoTransports runs f against the demo server over stdio and over
// stateless HTTP.
func demoTransports(t *testing.T, opts Options, f func(t *testing.T, r *Registry)) {
	t.Run("stdio", func(t *testing.T) {
		leakCheck(t)
		f(t, newRegistry(t, []ServerConfig{demoStdio()}, opts))
	})
	t.Run("http", func(t *testing.T) {
		leakCheck(t)
		url := startDemoHTTP(t, true, demomcp.Options{})
		f(t, newRegistry(t, []ServerConfig{{Name: "demo", URL: url}}, opts))
	})
}

func TestMCPCatalog(t *testing.T) {
	demoTransports(t, Options{}, func(t *testing.T, r *Registry) {
		tools := r.Tools()
		byName := map[string]Tool{}
		for _, tl := range tools {
			byName[tl.Name] = tl
		}
		tests := []struct {
			name, tool string
			idempotent bool
			props      []string
		}{
			{"demo__deploy", "deploy", false, []string{"service", "version"}},
			{"demo__divide", "divide", true, []string{"a", "b"}},
			{"demo__count_slowly", "count_slowly", true, []string{"to", "interval_ms"}},
			{"demo__delete_release", "delete_release", true, []string{"release", "service"}},
		}
		require.Len(t, tools, len(tests))
		for _, tt := range tests {
			tl, ok := byName[tt.name]
			require.True(t, ok, tt.name)
			assert.Equal(t, "demo", tl.Server)
			assert.Equal(t, tt.tool, tl.ToolName)
			assert.Equal(t, tt.idempotent, tl.Idempotent, tt.name)
			// Annotations for approvals.destructive: deploy and delete_release are
			// annotated destructiveHint, divide and count_slowly readOnlyHint.
			assert.Equal(t, tt.tool == "deploy" || tt.tool == "delete_release", tl.Destructive, tt.name)
			assert.Equal(t, tt.tool == "divide" || tt.tool == "count_slowly", tl.ReadOnly, tt.name)
			assert.NotEmpty(t, tl.Description)
			assert.Equal(t, "object", tl.InputSchema["type"])
			props, _ := tl.InputSchema["properties"].(map[string]any)
			for _, p := range tt.props {
				assert.Contains(t, props, p)
			}
		}
		st := r.Status()
		require.Len(t, st, 1)
		assert.Equal(t, ServerStatus{Name: "demo", Connected: true, Tools: 4}, st[0])
	})
}

func TestMCPCallResults(t *testing.T) {
	demoTransports(t, Options{}, func(t *testing.T, r *Registry) {
		tests := []struct {
			name, tool, args string
			tag              string
			contains         []string
			signal           map[string]any // expected fields of a retry signal
		}{
			{name: "ok structured", tool: "demo__divide", args: `{"a":6,"b":3}`, tag: "OK", contains: []string{`"quotient":2`}},
			{name: "null args", tool: "demo__count_slowly", args: `null`, tag: "OK", contains: []string{"Counted to 5."}},
			{name: "isError", tool: "demo__divide", args: `{"a":1,"b":0}`, tag: "RETRY:tool_error",
				signal: map[string]any{"error": "tool_error", "requested": "demo__divide"}},
			{name: "wrong type", tool: "demo__divide", args: `{"a":"x","b":1}`, tag: "RETRY:validation_failed",
				signal: map[string]any{"error": "validation_failed", "details": map[string]any{"field": "a", "got": "x"}}},
			{name: "missing required", tool: "demo__divide", args: `{"b":1}`, tag: "RETRY:validation_failed",
				signal: map[string]any{"error": "validation_failed", "details": map[string]any{"field": "a", "got": nil}}},
			{name: "out of range", tool: "demo__count_slowly", args: `{"to":5000}`, tag: "RETRY:validation_failed",
				signal: map[string]any{"details": map[string]any{"field": "to", "got": 5000.0}}},
			{name: "not an object", tool: "demo__divide", args: `[1,2]`, tag: "RETRY:validation_failed",
				signal: map[string]any{"reason": "the arguments must be a JSON object"}},
			{name: "not JSON", tool: "demo__divide", args: `{"a":`, tag: "RETRY:validation_failed",
				signal: map[string]any{"reason": "the arguments are not valid JSON"}},
			{name: "unknown tool", tool: "demo__nope", args: `{}`, tag: "RETRY:unknown_action",
				signal: map[string]any{"error": "unknown_action", "requested": "demo__nope"}},
			{name: "no elicitor declines", tool: "demo__deploy", args: `{"service":"api"}`, tag: "OK",
				contains: []string{"Baton cannot ask the user yet", "Deploy api (latest) to which environment?", `the user chose "decline"`}},
		}
		for _, tt := range tests {
			t.Run(tt.name, func(t *testing.T) {
				out := mustCall(t, r, tt.tool, tt.args)
				assert.Equal(t, tt.tag, tagOf(t, out), out)
				for _, c := range tt.contains {
					assert.Contains(t, out, c)
				}
				if tt.signal != nil {
					sig := signalOf(t, out)
					for k, v := range tt.signal {
						assert.Equal(t, v, sig[k], k)
					}
					assert.NotEmpty(t, sig["message"])
					assert.Contains(t, sig, "valid_next_actions")
				}
			})
		}
	})
}

// TestMCPToolErrorsReported: the registry reports every tool error the same way, however
// many came before: no budget is kept per process (a per-process budget let one user's
// failures spend another user's retries). What a failure costs is the run's business (package
// coordinator).
func TestMCPToolErrorsReported(t *testing.T) {
	leakCheck(t)
	url := startDemoHTTP(t, true, demomcp.Options{})
	r := newRegistry(t, []ServerConfig{{Name: "retry", URL: url}}, Options{})
	ctx := context.Background()
	zero := json.RawMessage(`{"a":1,"b":0}`)
	for range 5 {
		res, err := r.Call(ctx, "retry__divide", zero, CallOptions{})
		require.NoError(t, err)
		require.Equal(t, StatusToolError, res.Status)
		assert.Contains(t, res.Detail, "division by zero")
		assert.Equal(t, "retry__divide", res.Tool)
		assert.Equal(t, "retry", res.Server)
	}
	res, err := r.Call(ctx, "retry__divide", json.RawMessage(`{"a":4,"b":2}`), CallOptions{})
	require.NoError(t, err)
	assert.Equal(t, StatusOK, res.Status)
}

func TestMCPElicitation(t *testing.T) {
	accept := &mcp.ElicitResult{Action: "accept", Content: map[string]any{"environment": "production"}}
	tests := []struct {
		name      string
		stateless bool // false: a 2025-11-25 session, elicitation/create inside the call
		res       *mcp.ElicitResult
		shape     string
		want      string
	}{
		{"mrtr accept", true, accept, ShapeMRTR, "Deployed api (v2) to production."},
		{"mrtr decline", true, &mcp.ElicitResult{Action: "decline"}, ShapeMRTR, `not started: the user chose "decline"`},
		{"session accept", false, accept, ShapeSession, "Deployed api (v2) to production."},
		{"session cancel", false, &mcp.ElicitResult{Action: "cancel"}, ShapeSession, `not started: the user chose "cancel"`},
	}
	for _, stateless := range []bool{true, false} {
		t.Run(fmt.Sprintf("elicitor error stateless=%v", stateless), func(t *testing.T) {
			leakCheck(t)
			el := &recElicitor{err: errSuspend}
			url := startDemoHTTP(t, stateless, demomcp.Options{})
			r := newRegistry(t, []ServerConfig{{Name: "demo", URL: url}}, Options{Elicitor: el})
			out, err := callText(r, context.Background(), "demo__deploy", json.RawMessage(`{"service":"api"}`), CallOptions{})
			require.ErrorIs(t, err, errSuspend)
			assert.Empty(t, out)
		})
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			leakCheck(t)
			el := &recElicitor{res: tt.res}
			url := startDemoHTTP(t, tt.stateless, demomcp.Options{})
			r := newRegistry(t, []ServerConfig{{Name: "demo", URL: url}}, Options{Elicitor: el})
			out := mustCall(t, r, "demo__deploy", `{"service":"api","version":"v2"}`)
			assert.Equal(t, "OK", tagOf(t, out))
			assert.Contains(t, out, tt.want)
			reqs := el.requests()
			require.Len(t, reqs, 1)
			got := reqs[0]
			assert.Equal(t, "demo", got.Server)
			assert.Equal(t, "deploy", got.Tool)
			assert.Equal(t, "form", got.Mode)
			assert.Equal(t, tt.shape, got.Shape)
			assert.Equal(t, "Deploy api (v2) to which environment?", got.Message)
			js, err := json.Marshal(got.Schema)
			require.NoError(t, err)
			assert.Contains(t, string(js), `"enum":["staging","production"]`)
		})
	}
}

func TestMCPElicitationMRTRDetails(t *testing.T) {
	leakCheck(t)
	fe := newFaultEnv(t)
	tests := []struct {
		name    string
		el      *recElicitor
		tag     string
		want    string
		wantErr error
	}{
		{"defaults kept", &recElicitor{res: &mcp.ElicitResult{Action: "accept"}}, "OK", "action=accept name=Ada count=3", nil},
		{"answer kept", &recElicitor{res: &mcp.ElicitResult{Action: "accept", Content: map[string]any{"name": "Bob"}}}, "OK", "name=Bob count=3", nil},
		{"invalid answer", &recElicitor{res: &mcp.ElicitResult{Action: "accept", Content: map[string]any{"count": 99}}}, "ERROR", "does not match the form", nil},
		{"elicitor error", &recElicitor{err: errSuspend}, "", "", errSuspend},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := newRegistry(t, []ServerConfig{fe.server("f")}, Options{Elicitor: tt.el})
			out, err := callText(r, context.Background(), "f__ask", nil, CallOptions{})
			if tt.wantErr != nil {
				require.ErrorIs(t, err, tt.wantErr)
				assert.Empty(t, out)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tt.tag, tagOf(t, out), out)
			assert.Contains(t, out, tt.want)
			require.Len(t, tt.el.requests(), 1)
			assert.Equal(t, ShapeMRTR, tt.el.requests()[0].Shape)
		})
	}
	t.Run("sampling unsupported", func(t *testing.T) {
		r := newRegistry(t, []ServerConfig{fe.server("f")}, Options{})
		out := mustCall(t, r, "f__sample", `{}`)
		assert.Equal(t, "ERROR", tagOf(t, out))
		assert.Contains(t, out, "sampling")
	})
}

var errSuspend = errors.New("suspend")

func TestMCPProgress(t *testing.T) {
	demoTransports(t, Options{}, func(t *testing.T, r *Registry) {
		var mu sync.Mutex
		var got []Progress
		out, err := callText(r, context.Background(), "demo__count_slowly", json.RawMessage(`{"to":3,"interval_ms":1}`), CallOptions{
			Progress: func(p Progress) {
				mu.Lock()
				defer mu.Unlock()
				got = append(got, p)
			},
		})
		require.NoError(t, err)
		assert.Equal(t, "OK", tagOf(t, out))
		// The last notifications may arrive after the result.
		require.Eventually(t, func() bool {
			mu.Lock()
			defer mu.Unlock()
			return len(got) == 3
		}, 10*time.Second, 10*time.Millisecond)
		mu.Lock()
		defer mu.Unlock()
		want := map[Progress]bool{
			{Progress: 1, Total: 3, Message: "counted 1 of 3"}: true,
			{Progress: 2, Total: 3, Message: "counted 2 of 3"}: true,
			{Progress: 3, Total: 3, Message: "counted 3 of 3"}: true,
		}
		for _, p := range got {
			assert.True(t, want[p], "%+v", p)
		}
	})
}

func TestMCPTimeout(t *testing.T) {
	t.Run("stdio", func(t *testing.T) {
		leakCheck(t)
		fe := newFaultEnv(t)
		r := newRegistry(t, []ServerConfig{fe.server("f")}, Options{})
		ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
		defer cancel()
		out, err := callText(r, ctx, "f__hang", nil, CallOptions{})
		require.NoError(t, err)
		sig := signalOf(t, out)
		assert.Equal(t, "action_timeout", sig["error"])
		assert.InDelta(t, 0.3, sig["timeout_seconds"], 0.05)
		// The server saw the cancellation, and the session still works.
		require.Eventually(t, func() bool { return fe.cancellations() == "hang\n" }, 10*time.Second, 10*time.Millisecond)
		assert.Equal(t, "OK", tagOf(t, mustCall(t, r, "f__echo", `{"text":"hi"}`)))
	})
	t.Run("http", func(t *testing.T) {
		leakCheck(t)
		cancelled := make(chan string, 1)
		url := startDemoHTTP(t, true, demomcp.Options{OnCancelled: func(tool string) { cancelled <- tool }})
		r := newRegistry(t, []ServerConfig{{Name: "demo", URL: url}}, Options{})
		ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
		defer cancel()
		out, err := callText(r, ctx, "demo__count_slowly", json.RawMessage(`{"to":1000,"interval_ms":10000}`), CallOptions{})
		require.NoError(t, err)
		assert.Equal(t, "action_timeout", signalOf(t, out)["error"])
		select {
		case tool := <-cancelled:
			assert.Equal(t, "count_slowly", tool)
		case <-time.After(10 * time.Second):
			t.Fatal("the server never saw the cancellation")
		}
	})
}

func TestMCPRunCancelled(t *testing.T) {
	leakCheck(t)
	fe := newFaultEnv(t)
	r := newRegistry(t, []ServerConfig{fe.server("f")}, Options{})
	ctx, cancel := context.WithCancel(context.Background())
	var canceller sync.WaitGroup
	canceller.Go(func() {
		time.Sleep(100 * time.Millisecond)
		cancel()
	})
	out, err := callText(r, ctx, "f__hang", nil, CallOptions{})
	canceller.Wait()
	require.ErrorIs(t, err, context.Canceled)
	assert.Empty(t, out)
	require.Eventually(t, func() bool { return fe.cancellations() == "hang\n" }, 10*time.Second, 10*time.Millisecond)
}

func TestMCPStdioCrash(t *testing.T) {
	tests := []struct {
		name, tool string
		tag        string
		contains   string
	}{
		// Not idempotent: not sent again, the model is told.
		{"not idempotent", "f__crash_once", "ERROR", "may or may not have run"},
		// Idempotent: the server is restarted and the call sent again.
		{"idempotent", "f__crash_once_idem", "OK", "survived"},
		// Crashes every time: the budget runs out.
		{"always", "f__crash_always_idem", "UNREACHABLE", `"f"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			leakCheck(t)
			fe := newFaultEnv(t)
			r := newRegistry(t, []ServerConfig{fe.server("f")}, Options{MaxReconnects: 2})
			out := mustCall(t, r, tt.tool, `{}`)
			assert.Equal(t, tt.tag, tagOf(t, out), out)
			assert.Contains(t, out, tt.contains)
			// The server is restarted for the next call.
			assert.Equal(t, "OK", tagOf(t, mustCall(t, r, "f__echo", `{"text":"again"}`)))
		})
	}
}

func TestMCPHTTPRestart(t *testing.T) {
	t.Run("stateless", func(t *testing.T) {
		leakCheck(t)
		addr := freeAddr(t)
		start := func() context.CancelFunc {
			ctx, cancel := context.WithCancel(context.Background())
			_, err := demomcp.StartWith(ctx, addr, demomcp.Options{})
			require.NoError(t, err)
			return cancel
		}
		stop := start()
		r := newRegistry(t, []ServerConfig{{Name: "demo", URL: "http://" + addr + "/mcp"}}, Options{})
		assert.Equal(t, "OK", tagOf(t, mustCall(t, r, "demo__divide", `{"a":1,"b":1}`)))

		stop()
		require.Eventually(t, func() bool { return refused(addr) }, 10*time.Second, 10*time.Millisecond)
		out := mustCall(t, r, "demo__divide", `{"a":1,"b":1}`)
		assert.Equal(t, "UNREACHABLE", tagOf(t, out), out)
		out = mustCall(t, r, "demo__deploy", `{"service":"x"}`)
		assert.Equal(t, "UNREACHABLE", tagOf(t, out), "not sent, so not ambiguous: %s", out)

		stop = start()
		defer stop()
		assert.Equal(t, "OK", tagOf(t, mustCall(t, r, "demo__divide", `{"a":1,"b":1}`)))
	})
	t.Run("stateful session lost", func(t *testing.T) {
		leakCheck(t)
		// A restarted stateful server forgets the session (404): the client
		// starts a new session and sends the call again, even a
		// non-idempotent one, since the server refused it. (No keep-alive:
		// a request written to a connection the old server had open is
		// ambiguous, and not what this test is about.)
		addr := freeAddr(t)
		var srv *httpServer
		start := func() {
			srv = startHTTP(t, addr, demomcp.Options{}, false)
		}
		start()
		hc := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}
		r := newRegistry(t, []ServerConfig{{Name: "demo", URL: "http://" + addr + "/mcp"}}, Options{
			HTTPClient: hc,
			Elicitor:   &recElicitor{res: &mcp.ElicitResult{Action: "accept", Content: map[string]any{"environment": "staging"}}},
		})
		assert.Equal(t, "OK", tagOf(t, mustCall(t, r, "demo__divide", `{"a":1,"b":1}`)))
		srv.stop(t)
		start()
		defer srv.stop(t)
		out := mustCall(t, r, "demo__deploy", `{"service":"api"}`)
		assert.Equal(t, "OK", tagOf(t, out), out)
		assert.Contains(t, out, "to staging")
	})
}

func TestMCPLazyConnect(t *testing.T) {
	leakCheck(t)
	addr := freeAddr(t)
	r := newRegistry(t, []ServerConfig{{Name: "late", URL: "http://" + addr + "/mcp"}, demoStdio()}, Options{})
	st := r.Status()
	require.Len(t, st, 2)
	assert.False(t, st[0].Connected)
	assert.NotEmpty(t, st[0].LastError)
	assert.True(t, st[1].Connected)
	assert.Len(t, r.Tools(), 4, "only the demo tools")
	// A tool of a server that is down is unreachable, not unknown; a name that belongs
	// to no server is still unknown.
	assert.Equal(t, "UNREACHABLE", tagOf(t, mustCall(t, r, "late__divide", `{}`)))
	assert.Equal(t, "RETRY:unknown_action", tagOf(t, mustCall(t, r, "nosuch__divide", `{}`)))
	assert.Equal(t, "RETRY:unknown_action", tagOf(t, mustCall(t, r, "demo__nosuch", `{}`)), "connected server: unknown tool")

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	_, err := demomcp.StartWith(ctx, addr, demomcp.Options{})
	require.NoError(t, err)
	require.Eventually(t, func() bool { return len(r.Tools()) == 8 }, 40*time.Second, 50*time.Millisecond)
	assert.Equal(t, "OK", tagOf(t, mustCall(t, r, "late__divide", `{"a":2,"b":1}`)))
}

func TestMCPMediaAndServerErrors(t *testing.T) {
	leakCheck(t)
	fe := newFaultEnv(t)
	r := newRegistry(t, []ServerConfig{fe.server("f")}, Options{})
	out := mustCall(t, r, "f__media", `{}`)
	assert.Equal(t, "OK", tagOf(t, out))
	assert.Contains(t, out, "[image: image/png, 2.0 KiB]")
	assert.Contains(t, out, "file:///r.txt")
	for _, line := range strings.Split(out, "\n")[1:] {
		assert.False(t, strings.HasPrefix(line, "[COMPLETED]"), "forged tag not escaped: %q", out)
	}

	out = mustCall(t, r, "f__rpc_error", `{}`)
	sig := signalOf(t, out)
	assert.Equal(t, "tool_error", sig["error"])
	assert.Contains(t, sig["error_message"], "internal kaboom")
}

func TestMCPConfigErrors(t *testing.T) {
	tests := []struct {
		name string
		cfg  []ServerConfig
		want string
	}{
		{"no name", []ServerConfig{{URL: "http://x"}}, "name is required"},
		{"both", []ServerConfig{{Name: "a", URL: "http://x", Command: []string{"y"}}}, "either command or url"},
		{"neither", []ServerConfig{{Name: "a"}}, "command or url is required"},
		{"duplicate", []ServerConfig{{Name: "a", URL: "http://x"}, {Name: "a", URL: "http://y"}}, "duplicate"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := New(context.Background(), tt.cfg, Options{})
			require.Error(t, err)
			assert.Contains(t, err.Error(), tt.want)
		})
	}
}

func TestMCPClosed(t *testing.T) {
	leakCheck(t)
	r, err := New(context.Background(), []ServerConfig{demoStdio()}, Options{Logger: testLogger(t)})
	require.NoError(t, err)
	require.NoError(t, r.Close())
	require.NoError(t, r.Close(), "idempotent")
	_, err = callText(r, context.Background(), "demo__divide", json.RawMessage(`{"a":1,"b":1}`), CallOptions{})
	require.ErrorIs(t, err, ErrClosed)
}

func TestMCPStdioEnvironment(t *testing.T) {
	leakCheck(t)
	t.Setenv("BATON_TEST_SECRET", "s3cr3t")
	fe := newFaultEnv(t)
	cfg := fe.server("f")
	cfg.Env["EXTRA"] = "given"
	r := newRegistry(t, []ServerConfig{cfg}, Options{})
	tests := []struct{ name, want string }{
		{"BATON_TEST_SECRET", "value="},
		{"EXTRA", "value=given"},
		{"PATH", "value=/"},
	}
	for _, tt := range tests {
		out := mustCall(t, r, "f__getenv", fmt.Sprintf(`{"text":%q}`, tt.name))
		assert.Contains(t, out, tt.want, tt.name)
	}
}

func TestMCPHTTPHeaders(t *testing.T) {
	leakCheck(t)
	s := demomcp.NewServer(demomcp.Options{})
	h := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return s }, &mcp.StreamableHTTPOptions{Stateless: true})
	var mu sync.Mutex
	seen := map[string]int{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		seen[r.Header.Get("Authorization")]++
		mu.Unlock()
		if r.Header.Get("Authorization") != "Bearer t0k" {
			http.Error(w, "unauthorized", http.StatusUnauthorized)
			return
		}
		h.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	r := newRegistry(t, []ServerConfig{{Name: "demo", URL: srv.URL, Headers: map[string]string{"Authorization": "Bearer t0k"}}}, Options{})
	assert.Equal(t, "OK", tagOf(t, mustCall(t, r, "demo__divide", `{"a":1,"b":1}`)))
	mu.Lock()
	defer mu.Unlock()
	assert.Positive(t, seen["Bearer t0k"])
	assert.Zero(t, seen[""], "every request carries the header")
}
