package signin

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/auth"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/modelcontextprotocol/go-sdk/oauthex"
)

// TestThroughGoSDKTransport signs in through go-sdk's streamable transport against a go-sdk
// server guarded by auth.RequireBearerToken: the first call parks with *NeedsSignIn, the
// callback completes, and the retried call (on the same session after a revocation) runs.
func TestThroughGoSDKTransport(t *testing.T) {
	ctx := context.Background()
	as := newTestAS(t, nil)

	var mu sync.Mutex
	revoked := map[string]bool{}
	verifier := func(_ context.Context, token string, _ *http.Request) (*auth.TokenInfo, error) {
		mu.Lock()
		defer mu.Unlock()
		if !strings.HasPrefix(token, "at-") || revoked[token] {
			return nil, auth.ErrInvalidToken
		}
		return &auth.TokenInfo{UserID: "alice", Expiration: time.Now().Add(time.Hour)}, nil
	}
	server := mcp.NewServer(&mcp.Implementation{Name: "protected", Version: "1"}, nil)
	mcp.AddTool(server, &mcp.Tool{Name: "whoami"}, func(_ context.Context, req *mcp.CallToolRequest, _ struct{}) (*mcp.CallToolResult, any, error) {
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: req.Extra.TokenInfo.UserID}}}, nil, nil
	})
	mux := http.NewServeMux()
	srv := httptest.NewServer(mux)
	defer srv.Close()
	mux.Handle("/.well-known/oauth-protected-resource/mcp", auth.ProtectedResourceMetadataHandler(
		&oauthex.ProtectedResourceMetadata{Resource: srv.URL + "/mcp", AuthorizationServers: []string{as.issuer()}}))
	mux.Handle("/mcp", auth.RequireBearerToken(verifier, &auth.RequireBearerTokenOptions{
		ResourceMetadataURL: srv.URL + "/.well-known/oauth-protected-resource/mcp"})(
		mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return server }, nil)))

	store := NewMemory()
	f := &fixture{as: as, store: store}
	h := NewHandler(HandlerConfig{Store: store, Principal: "alice", Server: "docs", ServerURL: srv.URL + "/mcp",
		RedirectURL: redirect, ClientName: "baton-test"})
	transport := &mcp.StreamableClientTransport{Endpoint: srv.URL + "/mcp", OAuthHandler: h, MaxRetries: -1}
	client := mcp.NewClient(&mcp.Implementation{Name: "baton", Version: "test"}, nil)

	// signInPending plays the browser for the pending sign-in and completes it.
	signInPending := func() {
		t.Helper()
		p, err := store.PendingFor(ctx, "alice", "docs")
		if err != nil || p == nil {
			t.Fatalf("no pending sign-in: %v", err)
		}
		code, state, iss := f.browse(t, p.AuthURL)
		if _, err := Complete(ctx, store, nil, state, code, iss, "alice"); err != nil {
			t.Fatalf("Complete: %v", err)
		}
	}

	_, err := client.Connect(ctx, transport, nil)
	if err == nil {
		t.Fatal("Connect without a grant succeeded")
	}
	// go-sdk's Connect tries server/discover and then initialize; both 401s share one
	// pending sign-in, and the *NeedsSignIn survives go-sdk's wrapping.
	var ns *NeedsSignIn
	if !errors.As(err, &ns) {
		t.Fatalf("Connect error %v does not unwrap to *NeedsSignIn", err)
	}
	if as.count("GET /authorize") != 0 {
		t.Fatal("Authorize contacted the authorization endpoint: the browser must")
	}
	signInPending()

	session, err := client.Connect(ctx, transport, nil)
	if err != nil {
		t.Fatalf("Connect after sign-in: %v", err)
	}
	defer session.Close()
	res, err := session.CallTool(ctx, &mcp.CallToolParams{Name: "whoami"})
	if err != nil || res.Content[0].(*mcp.TextContent).Text != "alice" {
		t.Fatalf("whoami = %v, %v", res, err)
	}

	// The server revokes the token: the next call parks, and after a new sign-in the same
	// session carries on.
	g, _ := store.Grant(ctx, "alice", "docs")
	mu.Lock()
	revoked[g.Token.AccessToken] = true
	mu.Unlock()
	_, err = session.CallTool(ctx, &mcp.CallToolParams{Name: "whoami"})
	if !errors.As(err, &ns) {
		t.Fatalf("call with a revoked token: %v; want *NeedsSignIn", err)
	}
	signInPending()
	res, err = session.CallTool(ctx, &mcp.CallToolParams{Name: "whoami"})
	if err != nil || res.Content[0].(*mcp.TextContent).Text != "alice" {
		t.Fatalf("whoami after signing in again = %v, %v", res, err)
	}
}
