package demomcp

import (
	"context"
	"encoding/json"
	"net"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/baton-dev/baton/internal/testutil"
)

// The leak check runs once, after every test: the tests run in parallel, so a check around
// one of them would count the goroutines of the others.
func TestMain(m *testing.M) { testutil.VerifyTestMain(m) }

// connect runs the demo server and a client over in-memory transports.
func connect(t *testing.T, opts Options, copts *mcp.ClientOptions) *mcp.ClientSession {
	t.Helper()
	ctx := context.Background()
	ct, st := mcp.NewInMemoryTransports()
	ss, err := NewServer(opts).Connect(ctx, st, nil)
	require.NoError(t, err)
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "test", Version: "0"}, copts).Connect(ctx, ct, nil)
	require.NoError(t, err)
	t.Cleanup(func() {
		_ = cs.Close()
		_ = ss.Wait()
	})
	return cs
}

func textOf(t *testing.T, res *mcp.CallToolResult) string {
	t.Helper()
	var parts []string
	for _, c := range res.Content {
		tc, ok := c.(*mcp.TextContent)
		require.True(t, ok, "%T", c)
		parts = append(parts, tc.Text)
	}
	return strings.Join(parts, "\n")
}

func TestMCPDemoDeleteRelease(t *testing.T) {
	t.Parallel()
	cs := connect(t, Options{}, nil)
	res, err := cs.ListTools(context.Background(), nil)
	require.NoError(t, err)
	var del *mcp.Tool
	for _, tl := range res.Tools {
		if tl.Name == ToolDelete {
			del = tl
		}
	}
	require.NotNil(t, del)
	require.NotNil(t, del.Annotations.DestructiveHint)
	assert.True(t, *del.Annotations.DestructiveHint, "approvals.destructive picks it up")
	assert.False(t, del.Annotations.ReadOnlyHint)
	out, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: ToolDelete, Arguments: map[string]any{"release": "v1.2.3"}})
	require.NoError(t, err)
	assert.False(t, out.IsError)
	assert.Equal(t, "Would delete release v1.2.3 of web: its images, its configuration and its deployment record. (Demo: nothing was deleted.)", textOf(t, out))
	out, err = cs.CallTool(context.Background(), &mcp.CallToolParams{Name: ToolDelete, Arguments: map[string]any{"release": ""}})
	if err == nil {
		assert.True(t, out.IsError, "an empty release is refused")
	}
}

func TestMCPDemoTools(t *testing.T) {
	t.Parallel()
	cs := connect(t, Options{}, nil)
	res, err := cs.ListTools(context.Background(), nil)
	require.NoError(t, err)
	got := map[string]*mcp.Tool{}
	for _, tl := range res.Tools {
		got[tl.Name] = tl
	}
	tests := []struct {
		name                 string
		readOnly, idempotent bool
	}{
		{ToolDeploy, false, false},
		{ToolDivide, true, true},
		{ToolCountSlowly, true, true},
		{ToolDelete, false, true},
	}
	require.Len(t, got, len(tests))
	for _, tt := range tests {
		tl := got[tt.name]
		require.NotNil(t, tl, tt.name)
		require.NotNil(t, tl.Annotations, tt.name)
		assert.Equal(t, tt.readOnly, tl.Annotations.ReadOnlyHint, tt.name)
		assert.Equal(t, tt.idempotent, tl.Annotations.IdempotentHint, tt.name)
		assert.NotEmpty(t, tl.Description, tt.name)
	}
}

func TestMCPDemoDivide(t *testing.T) {
	t.Parallel()
	cs := connect(t, Options{}, nil)
	tests := []struct {
		name    string
		args    map[string]any
		isError bool
		want    string
	}{
		{"quotient", map[string]any{"a": 7, "b": 2}, false, `{"quotient":3.5}`},
		{"by zero", map[string]any{"a": 1, "b": 0}, true, "division by zero"},
		{"missing b", map[string]any{"a": 1}, true, "required"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: ToolDivide, Arguments: tt.args})
			require.NoError(t, err)
			assert.Equal(t, tt.isError, res.IsError)
			assert.Contains(t, textOf(t, res), tt.want)
		})
	}
}

func TestMCPDemoDeploy(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	cs := connect(t, Options{}, &mcp.ClientOptions{MultiRoundTrip: &mcp.MultiRoundTripOptions{Disabled: true}})
	args := map[string]any{"service": "api"}
	first, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: ToolDeploy, Arguments: args})
	require.NoError(t, err)
	require.True(t, first.NeedsInput())
	ep, ok := first.InputRequests["environment"].(*mcp.ElicitParams)
	require.True(t, ok)
	assert.Equal(t, "Deploy api (latest) to which environment?", ep.Message)
	assert.Contains(t, toJSON(t, ep.RequestedSchema), `"enum":["staging","production"]`)

	tests := []struct {
		name    string
		answer  *mcp.ElicitResult
		isError bool
		want    string
	}{
		{"accept", &mcp.ElicitResult{Action: "accept", Content: map[string]any{"environment": "production"}}, false, "Deployed api (latest) to production."},
		{"decline", &mcp.ElicitResult{Action: "decline"}, false, `not started: the user chose "decline"`},
		{"bad environment", &mcp.ElicitResult{Action: "accept", Content: map[string]any{"environment": "moon"}}, true, `unknown environment "moon"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res, err := cs.CallTool(ctx, &mcp.CallToolParams{
				Name: ToolDeploy, Arguments: args,
				InputResponses: mcp.InputResponseMap{"environment": tt.answer},
				RequestState:   first.RequestState,
			})
			require.NoError(t, err)
			assert.False(t, res.NeedsInput())
			assert.Equal(t, tt.isError, res.IsError)
			assert.Contains(t, textOf(t, res), tt.want)
		})
	}

	t.Run("automatic round trip", func(t *testing.T) {
		cs := connect(t, Options{}, &mcp.ClientOptions{
			ElicitationHandler: func(context.Context, *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
				return &mcp.ElicitResult{Action: "accept", Content: map[string]any{"environment": "staging"}}, nil
			},
		})
		res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: ToolDeploy, Arguments: map[string]any{"service": "web", "version": "1.2"}})
		require.NoError(t, err)
		assert.Equal(t, "Deployed web (1.2) to staging. (Demo: nothing was deployed.)", textOf(t, res))
	})
}

func TestMCPDemoCountSlowly(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	var progress []float64
	cancelled := make(chan string, 1)
	cs := connect(t, Options{OnCancelled: func(tool string) { cancelled <- tool }}, &mcp.ClientOptions{
		ProgressNotificationHandler: func(_ context.Context, req *mcp.ProgressNotificationClientRequest) {
			mu.Lock()
			defer mu.Unlock()
			progress = append(progress, req.Params.Progress)
		},
	})
	p := &mcp.CallToolParams{Name: ToolCountSlowly, Arguments: map[string]any{"to": 3, "interval_ms": 1}}
	p.SetProgressToken("tok")
	res, err := cs.CallTool(context.Background(), p)
	require.NoError(t, err)
	assert.Equal(t, "Counted to 3.", textOf(t, res))
	require.Eventually(t, func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(progress) == 3
	}, 10*time.Second, 5*time.Millisecond)
	mu.Lock()
	assert.ElementsMatch(t, []float64{1, 2, 3}, progress)
	mu.Unlock()

	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	_, err = cs.CallTool(ctx, &mcp.CallToolParams{Name: ToolCountSlowly, Arguments: map[string]any{"to": 100, "interval_ms": 10000}})
	require.ErrorIs(t, err, context.DeadlineExceeded)
	select {
	case tool := <-cancelled:
		assert.Equal(t, ToolCountSlowly, tool)
	case <-time.After(10 * time.Second):
		t.Fatal("count_slowly did not see the cancellation")
	}
}

func TestMCPDemoStartHTTP(t *testing.T) {
	t.Parallel()
	ctx, stop := context.WithCancel(context.Background())
	cancelled := make(chan string, 1)
	endpoint, err := StartWith(ctx, "127.0.0.1:0", Options{OnCancelled: func(tool string) { cancelled <- tool }})
	require.NoError(t, err)
	u, err := url.Parse(endpoint)
	require.NoError(t, err)
	assert.Equal(t, "/mcp", u.Path)

	// The test's own transport, whose idle connections it closes: the shared default one
	// would keep a connection it dialled but never used, which the server's shutdown leaves
	// open for five seconds.
	tr := &http.Transport{}
	defer tr.CloseIdleConnections()
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "test", Version: "0"}, nil).
		Connect(context.Background(), &mcp.StreamableClientTransport{Endpoint: endpoint, HTTPClient: &http.Client{Transport: tr}}, nil)
	require.NoError(t, err)
	assert.Equal(t, "2026-07-28", cs.InitializeResult().ProtocolVersion, "stateless HTTP serves the latest protocol")
	res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: ToolDivide, Arguments: map[string]any{"a": 9, "b": 3}})
	require.NoError(t, err)
	assert.Contains(t, textOf(t, res), `{"quotient":3}`)

	// Cancellation reaches the tool over stateless HTTP.
	cctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	_, err = cs.CallTool(cctx, &mcp.CallToolParams{Name: ToolCountSlowly, Arguments: map[string]any{"to": 100, "interval_ms": 10000}})
	require.Error(t, err)
	select {
	case tool := <-cancelled:
		assert.Equal(t, ToolCountSlowly, tool)
	case <-time.After(10 * time.Second):
		t.Fatal("count_slowly did not see the cancellation")
	}
	require.NoError(t, cs.Close())
	tr.CloseIdleConnections()

	stop()
	require.Eventually(t, func() bool {
		c, err := net.Dial("tcp", u.Host)
		if err != nil {
			return true
		}
		_ = c.Close()
		return false
	}, 10*time.Second, 10*time.Millisecond, "server still listening after ctx is done")
}

func TestMCPDemoLoopbackAddr(t *testing.T) {
	t.Parallel()
	tests := []struct{ in, want string }{
		{"[::]:3902", "127.0.0.1:3902"},
		{"0.0.0.0:80", "127.0.0.1:80"},
		{"127.0.0.1:1", "127.0.0.1:1"},
		{"[::1]:5", "[::1]:5"},
	}
	for _, tt := range tests {
		a, err := net.ResolveTCPAddr("tcp", tt.in)
		require.NoError(t, err)
		assert.Equal(t, tt.want, loopbackAddr(a), tt.in)
	}
}

func toJSON(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	require.NoError(t, err)
	return string(b)
}
