package mcpclient

import (
	"context"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A call's Meta reaches the server in the request's _meta, beside its progress token: a
// Baton behind the server reads the caller's depth from it.
func TestCallMetaReachesServer(t *testing.T) {
	leakCheck(t)
	var mu sync.Mutex
	var got map[string]any
	s := mcp.NewServer(&mcp.Implementation{Name: "meta", Version: "1"}, nil)
	s.AddTool(&mcp.Tool{Name: "echo", InputSchema: map[string]any{"type": "object"}}, func(_ context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		mu.Lock()
		got = req.Params.Meta
		mu.Unlock()
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "ok"}}}, nil
	})
	h := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return s }, &mcp.StreamableHTTPOptions{Stateless: true})
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	r := newRegistry(t, []ServerConfig{{Name: "m", URL: srv.URL}}, Options{})
	_, err := callText(r, context.Background(), "m__echo", []byte(`{}`), CallOptions{Meta: map[string]any{"baton/depth": 2}, Progress: func(Progress) {}})
	require.NoError(t, err)
	mu.Lock()
	defer mu.Unlock()
	assert.EqualValues(t, 2, got["baton/depth"])
	assert.NotNil(t, got["progressToken"], "the progress token is kept beside it")
}
