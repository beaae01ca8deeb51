// Package oauthmcp is an OAuth-protected MCP server for tests, on loopback: a go-sdk
// streamable HTTP server behind auth.RequireBearerToken with protected resource metadata
// (RFC 9728), and a small authorization server of its own (RFC 8414 metadata, dynamic
// registration, authorization code with PKCE S256 and the resource parameter, refresh
// tokens, short-lived access tokens). /authorize approves at once the user named by the
// X-Test-User header, else the user set with SetUser, and redirects to the client's
// redirect_uri. Its one tool, whoami, answers the token's user. The shape follows go-sdk's
// internal oauthtest.
package oauthmcp

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/auth"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/modelcontextprotocol/go-sdk/oauthex"
)

// Scope is the scope the server asks for.
const Scope = "mcp:tools"

// Config configures a Server.
type Config struct {
	// TokenTTL is the lifetime of an access token (default 1 h).
	TokenTTL time.Duration
}

// Server is the MCP server and its authorization server, on one loopback listener.
type Server struct {
	ts  *httptest.Server
	ms  *mcp.Server
	ttl time.Duration

	mu       sync.Mutex
	user     string
	codes    map[string]*grant
	access   map[string]*grant
	refresh  map[string]*grant
	clients  map[string]bool
	issued   []string // every token and code handed out, for secrets canaries
	stats    Stats
	lastAuth url.Values
}

// Stats counts what the authorization server did.
type Stats struct {
	Authorizations, CodeExchanges, Refreshes, Registrations, Unauthorized, ClientCredentials int
}

// ServiceSecret is the client secret the token endpoint accepts for client_credentials.
const ServiceSecret = "service-secret-canary-5d1e"

type grant struct {
	user, clientID, redirect, challenge, resource, scope string
	expires                                              time.Time
}

// New starts a Server; Close stops it.
func New(cfg Config) *Server {
	if cfg.TokenTTL <= 0 {
		cfg.TokenTTL = time.Hour
	}
	s := &Server{ttl: cfg.TokenTTL, codes: map[string]*grant{}, access: map[string]*grant{},
		refresh: map[string]*grant{}, clients: map[string]bool{}}
	mux := http.NewServeMux()
	s.ts = httptest.NewServer(mux)
	base := s.ts.URL

	ms := mcp.NewServer(&mcp.Implementation{Name: "oauth-test", Version: "1"}, nil)
	s.ms = ms
	mcp.AddTool(ms, &mcp.Tool{Name: "whoami", Description: "the signed-in user",
		Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true}},
		func(ctx context.Context, req *mcp.CallToolRequest, _ struct{}) (*mcp.CallToolResult, any, error) {
			who := ""
			if req.Extra != nil && req.Extra.TokenInfo != nil {
				who = req.Extra.TokenInfo.UserID
			}
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "user=" + who}}}, nil, nil
		})
	h := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return ms }, nil)
	prmURL := base + "/.well-known/oauth-protected-resource/mcp"
	protected := auth.RequireBearerToken(s.verify, &auth.RequireBearerTokenOptions{ResourceMetadataURL: prmURL})(h)
	mux.Handle("/mcp", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !strings.HasPrefix(r.Header.Get("Authorization"), "Bearer ") {
			s.mu.Lock()
			s.stats.Unauthorized++
			s.mu.Unlock()
		}
		protected.ServeHTTP(w, r)
	}))
	mux.Handle("/.well-known/oauth-protected-resource/mcp", auth.ProtectedResourceMetadataHandler(&oauthex.ProtectedResourceMetadata{
		Resource: base + "/mcp", AuthorizationServers: []string{base}, ScopesSupported: []string{Scope},
	}))
	mux.HandleFunc("/.well-known/oauth-authorization-server", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, http.StatusOK, map[string]any{
			"issuer":                                base,
			"authorization_endpoint":                base + "/authorize",
			"token_endpoint":                        base + "/token",
			"registration_endpoint":                 base + "/register",
			"response_types_supported":              []string{"code"},
			"grant_types_supported":                 []string{"authorization_code", "refresh_token", "client_credentials"},
			"code_challenge_methods_supported":      []string{"S256"},
			"token_endpoint_auth_methods_supported": []string{"none", "client_secret_basic", "client_secret_post"},
			"scopes_supported":                      []string{Scope, "offline_access"},
		})
	})
	mux.HandleFunc("/register", s.register)
	mux.HandleFunc("/authorize", s.authorize)
	mux.HandleFunc("/token", s.token)
	return s
}

// URL is the MCP endpoint.
func (s *Server) URL() string { return s.ts.URL + "/mcp" }

// Close stops the server and ends the MCP sessions its clients left open.
func (s *Server) Close() {
	s.ts.CloseClientConnections()
	s.ts.Close()
	for ss := range s.ms.Sessions() {
		_ = ss.Close()
	}
}

// SetUser sets the user /authorize approves when the request names none.
func (s *Server) SetUser(u string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.user = u
}

// Stats returns the counters so far.
func (s *Server) Stats() Stats {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.stats
}

// Issued returns every access token, refresh token, code and PKCE verifier seen so far.
func (s *Server) Issued() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.issued...)
}

// LastAuthorization returns the query of the last /authorize request.
func (s *Server) LastAuthorization() url.Values {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.lastAuth
}

func (s *Server) verify(_ context.Context, token string, _ *http.Request) (*auth.TokenInfo, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	g, ok := s.access[token]
	if !ok || time.Now().After(g.expires) {
		return nil, fmt.Errorf("%w: unknown or expired", auth.ErrInvalidToken)
	}
	return &auth.TokenInfo{UserID: g.user, Scopes: strings.Fields(g.scope), Expiration: g.expires}, nil
}

// Issuer is the authorization server's issuer (its base URL): /authorize, /token,
// /register and /.well-known/oauth-authorization-server live under it.
func (s *Server) Issuer() string { return s.ts.URL }

// Verify reports the user of an access token, as a resource server of this authorization
// server checks it (an A2A agent in tests).
func (s *Server) Verify(token string) (user string, ok bool) {
	info, err := s.verify(context.Background(), token, nil)
	if err != nil {
		return "", false
	}
	return info.UserID, true
}

func (s *Server) register(w http.ResponseWriter, r *http.Request) {
	var md map[string]any
	if err := json.NewDecoder(http.MaxBytesReader(w, r.Body, 64<<10)).Decode(&md); err != nil {
		writeJSON(w, http.StatusBadRequest, map[string]any{"error": "invalid_client_metadata"})
		return
	}
	id := "dyn-" + rand.Text()
	s.mu.Lock()
	s.clients[id] = true
	s.stats.Registrations++
	s.mu.Unlock()
	md["client_id"] = id
	md["token_endpoint_auth_method"] = "none"
	writeJSON(w, http.StatusCreated, md)
}

func (s *Server) authorize(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	s.mu.Lock()
	s.lastAuth = q
	user := s.user
	s.mu.Unlock()
	if u := r.Header.Get("X-Test-User"); u != "" {
		user = u
	}
	redirect, err := url.Parse(q.Get("redirect_uri"))
	switch {
	case err != nil || redirect.Scheme == "" || redirect.Host == "":
		http.Error(w, "bad redirect_uri", http.StatusBadRequest)
		return
	case q.Get("response_type") != "code" || q.Get("code_challenge_method") != "S256" || q.Get("code_challenge") == "":
		http.Error(w, "PKCE S256 and response_type=code required", http.StatusBadRequest)
		return
	case q.Get("resource") != "" && q.Get("resource") != s.URL():
		// A2A flows (from an agent card) send no resource; MCP sign-ins must name this one.
		http.Error(w, "bad resource", http.StatusBadRequest)
		return
	case user == "":
		http.Error(w, "no user", http.StatusForbidden)
		return
	}
	code := "code-" + rand.Text()
	s.mu.Lock()
	s.codes[code] = &grant{user: user, clientID: q.Get("client_id"), redirect: q.Get("redirect_uri"),
		challenge: q.Get("code_challenge"), resource: q.Get("resource"), scope: q.Get("scope"), expires: time.Now().Add(time.Minute)}
	s.issued = append(s.issued, code)
	s.stats.Authorizations++
	s.mu.Unlock()
	rq := redirect.Query()
	rq.Set("code", code)
	rq.Set("state", q.Get("state"))
	redirect.RawQuery = rq.Encode()
	http.Redirect(w, r, redirect.String(), http.StatusFound)
}

func (s *Server) token(w http.ResponseWriter, r *http.Request) {
	if err := r.ParseForm(); err != nil {
		writeJSON(w, http.StatusBadRequest, map[string]any{"error": "invalid_request"})
		return
	}
	f := r.PostForm
	s.mu.Lock()
	defer s.mu.Unlock()
	if v := f.Get("code_verifier"); v != "" {
		s.issued = append(s.issued, v)
	}
	var g *grant
	switch f.Get("grant_type") {
	case "authorization_code":
		c, ok := s.codes[f.Get("code")]
		delete(s.codes, f.Get("code"))
		sum := sha256.Sum256([]byte(f.Get("code_verifier")))
		switch {
		case !ok || time.Now().After(c.expires):
			writeJSON(w, http.StatusBadRequest, map[string]any{"error": "invalid_grant"})
			return
		case base64.RawURLEncoding.EncodeToString(sum[:]) != c.challenge:
			writeJSON(w, http.StatusBadRequest, map[string]any{"error": "invalid_grant", "error_description": "PKCE"})
			return
		case f.Get("redirect_uri") != c.redirect || f.Get("resource") != c.resource || f.Get("client_id") != c.clientID:
			writeJSON(w, http.StatusBadRequest, map[string]any{"error": "invalid_grant", "error_description": "mismatch"})
			return
		}
		g = c
		s.stats.CodeExchanges++
	case "client_credentials":
		// A service account: the client authenticates itself (Basic or in the body).
		id, secret, ok := r.BasicAuth()
		if !ok {
			id, secret = f.Get("client_id"), f.Get("client_secret")
		}
		if id == "" || secret != ServiceSecret {
			writeJSON(w, http.StatusUnauthorized, map[string]any{"error": "invalid_client"})
			return
		}
		g = &grant{user: "service:" + id, clientID: id, scope: f.Get("scope")}
		s.stats.ClientCredentials++
	case "refresh_token":
		old, ok := s.refresh[f.Get("refresh_token")]
		if !ok {
			writeJSON(w, http.StatusBadRequest, map[string]any{"error": "invalid_grant"})
			return
		}
		delete(s.refresh, f.Get("refresh_token")) // rotated
		g = old
		s.stats.Refreshes++
	default:
		writeJSON(w, http.StatusBadRequest, map[string]any{"error": "unsupported_grant_type"})
		return
	}
	at, rt := "at-"+rand.Text(), "rt-"+rand.Text()
	ng := *g
	ng.expires = time.Now().Add(s.ttl)
	s.access[at] = &ng
	s.refresh[rt] = &ng
	s.issued = append(s.issued, at, rt)
	writeJSON(w, http.StatusOK, map[string]any{"access_token": at, "token_type": "Bearer",
		"expires_in": int(s.ttl.Seconds()), "refresh_token": rt, "scope": g.scope})
}

// Revoke forgets every token of user, as an authorization server does when access is
// withdrawn.
func (s *Server) Revoke(user string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for k, g := range s.access {
		if g.user == user {
			delete(s.access, k)
		}
	}
	for k, g := range s.refresh {
		if g.user == user {
			delete(s.refresh, k)
		}
	}
}

// ErrNoRedirect is returned by FollowAuthorization when the authorization server did not
// redirect.
var ErrNoRedirect = errors.New("oauthmcp: no redirect from /authorize")

// FollowAuthorization plays the browser: it opens authURL as user (X-Test-User), and
// follows the redirect to the client's callback with hc (which carries any cookie or
// bearer the callback needs). It returns the callback's response status and body.
func FollowAuthorization(ctx context.Context, hc *http.Client, authURL, user string, callbackHeader http.Header) (int, string, error) {
	noRedirect := &http.Client{Transport: hc.Transport, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, authURL, nil)
	if err != nil {
		return 0, "", err
	}
	req.Header.Set("X-Test-User", user)
	resp, err := noRedirect.Do(req)
	if err != nil {
		return 0, "", err
	}
	resp.Body.Close()
	loc := resp.Header.Get("Location")
	if resp.StatusCode != http.StatusFound || loc == "" {
		return resp.StatusCode, "", ErrNoRedirect
	}
	creq, err := http.NewRequestWithContext(ctx, http.MethodGet, loc, nil)
	if err != nil {
		return 0, "", err
	}
	for k, vs := range callbackHeader {
		for _, v := range vs {
			creq.Header.Add(k, v)
		}
	}
	cresp, err := noRedirect.Do(creq)
	if err != nil {
		return 0, "", err
	}
	defer cresp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(cresp.Body, 64<<10))
	return cresp.StatusCode, string(b), err
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(v)
}
