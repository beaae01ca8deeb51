package signin

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/baton-dev/baton/internal/egress"
)

// A public MCP server's authorization metadata that names a loopback registration endpoint
// gets no request there: the sign-in client of a public peer dials public addresses only.
// example.com stands in for the public server (httptest's certificate is valid for it); a
// resolver hook sends it to the local TLS server, as DNS would to a public address.
func TestNoRegistrationToLoopbackNamedByPublicServer(t *testing.T) {
	t.Parallel()
	var hits atomic.Int32
	internal := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"client_id":"stolen"}`)
	}))
	defer internal.Close()
	public := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		switch r.URL.Path {
		case "/.well-known/oauth-protected-resource/mcp", "/.well-known/oauth-protected-resource":
			_ = json.NewEncoder(w).Encode(map[string]any{"resource": "https://example.com/mcp",
				"authorization_servers": []string{"https://example.com"}})
		case "/.well-known/oauth-authorization-server":
			_ = json.NewEncoder(w).Encode(map[string]any{"issuer": "https://example.com",
				"authorization_endpoint": "https://example.com/authorize", "token_endpoint": "https://example.com/token",
				"registration_endpoint": internal.URL + "/register", "code_challenge_methods_supported": []string{"S256"},
				"response_types_supported": []string{"code"}})
		default:
			http.NotFound(w, r)
		}
	}))
	defer public.Close()
	authorize := func(p egress.Policy) error {
		hc := egress.NewClient(p, egress.ClientOptions{
			Dial: func(guarded egress.DialFunc) egress.DialFunc {
				return func(ctx context.Context, network, addr string) (net.Conn, error) {
					if addr == "example.com:443" {
						var d net.Dialer
						return d.DialContext(ctx, network, public.Listener.Addr().String())
					}
					return guarded(ctx, network, addr)
				}
			}})
		hc.Transport.(*http.Transport).TLSClientConfig = &tls.Config{RootCAs: public.Client().Transport.(*http.Transport).TLSClientConfig.RootCAs}
		h := NewHandler(HandlerConfig{Store: NewMemory(), Principal: "alice", Server: "docs", ServerURL: "https://example.com/mcp",
			RedirectURL: "https://baton.example.com/oauth/callback", HTTPClient: hc})
		req, _ := http.NewRequest(http.MethodPost, "https://example.com/mcp", nil)
		resp := &http.Response{StatusCode: http.StatusUnauthorized, Header: http.Header{"Www-Authenticate": {`Bearer resource_metadata="https://example.com/.well-known/oauth-protected-resource/mcp"`}},
			Body: io.NopCloser(strings.NewReader(""))}
		return h.Authorize(context.Background(), req, resp)
	}
	if err := authorize(egress.ForPeer("https://example.com/mcp")); err == nil {
		t.Fatal("Authorize succeeded with a loopback registration endpoint")
	}
	if n := hits.Load(); n != 0 {
		t.Fatalf("the loopback registration endpoint got %d requests", n)
	}
	// The same discovery with private addresses allowed (the old, global policy) does reach
	// it: the refusal above is the policy's, not an earlier failure.
	_ = authorize(egress.Policy{AllowPrivate: true})
	if hits.Load() == 0 {
		t.Fatal("with private addresses allowed the registration was not sent: the test proves nothing")
	}
}
