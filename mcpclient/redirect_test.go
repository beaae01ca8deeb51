package mcpclient

import (
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/baton-dev/baton/internal/demomcp"
)

// recorder is an MCP HTTP server that counts requests and the Authorization values it saw.
type recorder struct {
	mu    sync.Mutex
	total int
	auth  map[string]int
}

func (rc *recorder) handler() http.Handler {
	s := demomcp.NewServer(demomcp.Options{})
	h := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return s }, &mcp.StreamableHTTPOptions{Stateless: true})
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rc.mu.Lock()
		rc.total++
		if rc.auth == nil {
			rc.auth = map[string]int{}
		}
		rc.auth[r.Header.Get("Authorization")]++
		rc.mu.Unlock()
		h.ServeHTTP(w, r)
	})
}

// TestMCPRedirectToAnotherOriginIsNotFollowed: an MCP server answering 307 to another
// host gets neither the configured headers nor the request: the connection fails.
func TestMCPRedirectToAnotherOriginIsNotFollowed(t *testing.T) {
	leakCheck(t)
	var other recorder
	elsewhere := httptest.NewServer(other.handler())
	t.Cleanup(elsewhere.Close)
	redirector := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, elsewhere.URL+"/mcp", http.StatusTemporaryRedirect)
	}))
	t.Cleanup(redirector.Close)

	r := newRegistry(t, []ServerConfig{{Name: "hostile", URL: redirector.URL + "/mcp", Headers: map[string]string{"Authorization": "Bearer s3cr3t-canary"}}}, Options{MaxReconnects: 1})
	assert.Empty(t, r.Tools(), "the redirected server is not connected")
	other.mu.Lock()
	defer other.mu.Unlock()
	assert.Zero(t, other.total, "the other origin received nothing")
	assert.Zero(t, other.auth["Bearer s3cr3t-canary"])
}

// TestMCPRedirectWithinTheOriginKeepsHeaders: a redirect to another path of the same
// origin is followed, and the configured headers go with it.
func TestMCPRedirectWithinTheOriginKeepsHeaders(t *testing.T) {
	leakCheck(t)
	var rc recorder
	mcpH := rc.handler()
	mux := http.NewServeMux()
	mux.Handle("/mcp", mcpH)
	mux.HandleFunc("/old", func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, "/mcp", http.StatusTemporaryRedirect)
	})
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	r := newRegistry(t, []ServerConfig{{Name: "demo", URL: srv.URL + "/old", Headers: map[string]string{"Authorization": "Bearer t0k"}}}, Options{})
	require.NotEmpty(t, r.Tools())
	assert.Equal(t, "OK", tagOf(t, mustCall(t, r, "demo__divide", `{"a":1,"b":1}`)))
	rc.mu.Lock()
	defer rc.mu.Unlock()
	assert.Positive(t, rc.auth["Bearer t0k"])
	assert.Zero(t, rc.auth[""], "every request carries the header")
}

func TestOriginOf(t *testing.T) {
	assert.Equal(t, "http://example.com:80", originOf("http://EXAMPLE.com/mcp"))
	assert.Equal(t, "https://example.com:443", originOf("https://example.com:443/x"))
	assert.Equal(t, "http://[::1]:8080", originOf("http://[::1]:8080/"))
	assert.NotEqual(t, originOf("http://a.example:80/"), originOf("https://a.example/"))
	assert.NotEqual(t, originOf("http://a.example/"), originOf("http://a.example:8080/"))
	assert.Equal(t, "", originOf("::"))
}
