package signin

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"golang.org/x/oauth2"
)

const (
	redirect = "https://baton.example/oauth/callback"
	cimdURL  = "https://baton.example/oauth/client-metadata.json"
)

// testRS publishes protected resource metadata for an MCP endpoint at /mcp.
type testRS struct {
	srv      *httptest.Server
	as       *testAS
	where    string // "header", "path", "root" or "none"
	resource string // overrides the published resource
	scopes   []string
}

func newTestRS(t *testing.T, as *testAS, where string) *testRS {
	rs := &testRS{as: as, where: where}
	rs.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		prm := func(resource string) {
			if rs.resource != "" {
				resource = rs.resource
			}
			m := map[string]any{"resource": resource, "authorization_servers": []string{as.issuer()}}
			if rs.scopes != nil {
				m["scopes_supported"] = rs.scopes
			}
			writeJSON(w, 200, m)
		}
		switch {
		case rs.where == "header" && r.URL.Path == "/meta/custom":
			prm(rs.url())
		case rs.where == "path" && r.URL.Path == "/.well-known/oauth-protected-resource/mcp":
			prm(rs.url())
		case rs.where == "root" && r.URL.Path == "/.well-known/oauth-protected-resource":
			prm(rs.srv.URL)
		default:
			http.NotFound(w, r)
		}
	}))
	t.Cleanup(rs.srv.Close)
	return rs
}

func (rs *testRS) url() string { return rs.srv.URL + "/mcp" }

// challenge builds the 401 (or 403) response the MCP endpoint would send.
func (rs *testRS) challenge(code int, params string) *http.Response {
	h := http.Header{}
	v := "Bearer"
	if rs.where == "header" {
		v += fmt.Sprintf(` resource_metadata="%s/meta/custom"`, rs.srv.URL)
		if params != "" {
			v += ","
		}
	}
	if params != "" {
		v += " " + params
	}
	h.Set("WWW-Authenticate", v)
	return &http.Response{StatusCode: code, Header: h, Body: io.NopCloser(strings.NewReader(""))}
}

func (rs *testRS) request() *http.Request {
	r, _ := http.NewRequest(http.MethodPost, rs.url(), nil)
	return r
}

type fixture struct {
	as    *testAS
	rs    *testRS
	store *Memory
	h     *Handler
	cfg   HandlerConfig
}

func newFixture(t *testing.T, where string, asCfg func(*testAS), hcfg func(*HandlerConfig)) *fixture {
	t.Helper()
	f := &fixture{as: newTestAS(t, asCfg), store: NewMemory()}
	if where == "none" {
		f.rs = &testRS{srv: f.as.srv, as: f.as, where: "none"}
	} else {
		f.rs = newTestRS(t, f.as, where)
	}
	f.cfg = HandlerConfig{Store: f.store, Principal: "alice", Server: "docs", ServerURL: f.rs.url(),
		RedirectURL: redirect, ClientName: "baton-test", ThreadID: "th1", InterruptID: "int1"}
	if hcfg != nil {
		hcfg(&f.cfg)
	}
	f.h = NewHandler(f.cfg)
	return f
}

// signIn answers a 401 and plays the browser and the callback; it returns the grant.
func (f *fixture) signIn(t *testing.T, resp *http.Response) *Grant {
	t.Helper()
	ns := f.needs(t, resp)
	code, state, iss := f.browse(t, ns.URL)
	p, err := Complete(context.Background(), f.store, nil, state, code, iss, "alice")
	if err != nil {
		t.Fatalf("Complete: %v", err)
	}
	if p.Server != "docs" || p.ThreadID != "th1" || p.InterruptID != "int1" {
		t.Fatalf("Complete returned %+v; want the server, thread and interrupt of the sign-in", p)
	}
	g, err := f.store.Grant(context.Background(), "alice", "docs")
	if err != nil {
		t.Fatalf("no grant after Complete: %v", err)
	}
	return g
}

func (f *fixture) needs(t *testing.T, resp *http.Response) *NeedsSignIn {
	t.Helper()
	err := f.h.Authorize(context.Background(), f.rs.request(), resp)
	var ns *NeedsSignIn
	if !errors.As(err, &ns) {
		t.Fatalf("Authorize = %v; want *NeedsSignIn", err)
	}
	if ns.Server != "docs" || ns.URL == "" || ns.State == "" || ns.Expires.IsZero() {
		t.Fatalf("NeedsSignIn incomplete: %+v", ns)
	}
	return ns
}

// browse opens the authorization URL with redirects off, as the conformance client does.
func (f *fixture) browse(t *testing.T, authURL string) (code, state, iss string) {
	t.Helper()
	c := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := c.Get(authURL)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusFound {
		t.Fatalf("authorization server answered %d: %s", resp.StatusCode, body)
	}
	loc, err := resp.Location()
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(loc.String(), redirect) {
		t.Fatalf("redirected to %s, want %s", loc, redirect)
	}
	return loc.Query().Get("code"), loc.Query().Get("state"), loc.Query().Get("iss")
}

func TestDiscoveryVariants(t *testing.T) {
	cases := []struct {
		name      string
		where     string
		as        func(*testAS)
		wantAuth  string // path of the authorization endpoint
		wantMeta  string // metadata request the AS must have seen
		wantRes   func(f *fixture) string
		challenge string
	}{
		{name: "resource_metadata from WWW-Authenticate", where: "header", wantAuth: "/authorize",
			wantMeta: "GET /.well-known/oauth-authorization-server", wantRes: func(f *fixture) string { return f.rs.url() }},
		{name: "path-inserted protected resource metadata", where: "path", wantAuth: "/authorize",
			wantMeta: "GET /.well-known/oauth-authorization-server", wantRes: func(f *fixture) string { return f.rs.url() }},
		{name: "root protected resource metadata", where: "root", wantAuth: "/authorize",
			wantMeta: "GET /.well-known/oauth-authorization-server", wantRes: func(f *fixture) string { return f.rs.srv.URL }},
		{name: "issuer with a path: path-inserted RFC 8414", where: "path", as: func(a *testAS) { a.issuerPath = "/tenant1" },
			wantAuth: "/tenant1/authorize", wantMeta: "GET /.well-known/oauth-authorization-server/tenant1",
			wantRes: func(f *fixture) string { return f.rs.url() }},
		{name: "OpenID discovery only", where: "path", as: func(a *testAS) { a.openIDOnly = true; a.issuerPath = "/tenant1" },
			wantAuth: "/tenant1/authorize", wantMeta: "GET /.well-known/openid-configuration/tenant1",
			wantRes: func(f *fixture) string { return f.rs.url() }},
		{name: "2025-03-26: no resource metadata, MCP origin is the AS", where: "none", wantAuth: "/authorize",
			wantMeta: "GET /.well-known/oauth-authorization-server", wantRes: func(f *fixture) string { return f.rs.url() }},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			f := newFixture(t, c.where, c.as, nil)
			ns := f.needs(t, f.rs.challenge(401, c.challenge))
			u, _ := url.Parse(ns.URL)
			if u.Path != c.wantAuth {
				t.Fatalf("authorization URL %s; want path %s", ns.URL, c.wantAuth)
			}
			if f.as.count(c.wantMeta) == 0 {
				t.Fatalf("the AS never saw %q; it saw %v", c.wantMeta, f.as.requests)
			}
			if got, want := u.Query().Get("resource"), c.wantRes(f); got != want {
				t.Fatalf("resource = %q, want %q", got, want)
			}
			code, state, iss := f.browse(t, ns.URL)
			if _, err := Complete(context.Background(), f.store, nil, state, code, iss, "alice"); err != nil {
				t.Fatalf("Complete: %v", err)
			}
			ts, err := f.h.TokenSource(context.Background())
			if err != nil || ts == nil {
				t.Fatalf("TokenSource after sign-in = %v, %v", ts, err)
			}
			tok, err := ts.Token()
			if err != nil || !strings.HasPrefix(tok.AccessToken, "at-") {
				t.Fatalf("token = %v, %v", tok, err)
			}
		})
	}
}

func TestResourceMismatchRefused(t *testing.T) {
	f := newFixture(t, "path", nil, nil)
	f.rs.resource = "https://elsewhere.example/mcp"
	err := f.h.Authorize(context.Background(), f.rs.request(), f.rs.challenge(401, ""))
	if !errors.Is(err, ErrResourceMismatch) {
		t.Fatalf("Authorize = %v; want ErrResourceMismatch", err)
	}
	if p, _ := f.store.PendingFor(context.Background(), "alice", "docs"); p != nil {
		t.Fatal("a refused discovery left a pending sign-in")
	}
	if n := f.as.count("GET /authorize") + f.as.count("POST /register"); n != 0 {
		t.Fatalf("the AS was contacted %d times after a resource mismatch", n)
	}
}

func TestClientIdentification(t *testing.T) {
	t.Run("client ID metadata document", func(t *testing.T) {
		f := newFixture(t, "path", func(a *testAS) { a.cimd = true }, func(c *HandlerConfig) {
			c.ClientMetadataURL = cimdURL
			c.ClientID, c.ClientSecret = "pre", "pre-secret" // CIMD wins when advertised
		})
		ns := f.needs(t, f.rs.challenge(401, ""))
		if got := mustQuery(t, ns.URL).Get("client_id"); got != cimdURL {
			t.Fatalf("client_id = %q, want the CIMD URL", got)
		}
		g := f.signIn2(t, ns)
		if g.ClientID != cimdURL || g.ClientSecret != "" || f.as.count("POST /register") != 0 {
			t.Fatalf("grant client %q secret %q, registrations %d", g.ClientID, g.ClientSecret, f.as.count("POST /register"))
		}
	})
	t.Run("CIMD not advertised: pre-registered with Basic", func(t *testing.T) {
		f := newFixture(t, "path", nil, func(c *HandlerConfig) {
			c.ClientMetadataURL = cimdURL
			c.ClientID, c.ClientSecret = "pre", "pre-secret"
		})
		f.as.preRegister("pre", "pre-secret", "client_secret_basic")
		g := f.signIn(t, f.rs.challenge(401, ""))
		if g.ClientID != "pre" || g.AuthStyle != oauth2.AuthStyleInHeader || f.as.count("POST /register") != 0 {
			t.Fatalf("grant %+v, registrations %d", g, f.as.count("POST /register"))
		}
	})
	for _, method := range []string{"client_secret_basic", "client_secret_post", "none"} {
		t.Run("dynamic registration "+method, func(t *testing.T) {
			f := newFixture(t, "path", func(a *testAS) {
				a.authMethods = []string{method}
				a.scopesSupport = []string{"read", "offline_access"}
			}, nil)
			g := f.signIn(t, f.rs.challenge(401, ""))
			if len(f.as.registered) != 1 {
				t.Fatalf("%d registrations, want 1", len(f.as.registered))
			}
			reg := f.as.registered[0]
			if reg["token_endpoint_auth_method"] != method || reg["application_type"] != "web" {
				t.Fatalf("registration %v", reg)
			}
			if gt := fmt.Sprint(reg["grant_types"]); !strings.Contains(gt, "refresh_token") {
				t.Fatalf("grant_types %s lack refresh_token although offline_access is requested", gt)
			}
			if !slices.Contains(g.Scopes, "offline_access") || g.Token.RefreshToken == "" {
				t.Fatalf("grant scopes %v refresh %q", g.Scopes, g.Token.RefreshToken)
			}
			// A second sign-in (step-up) reuses the registration.
			f.signIn(t, f.rs.challenge(403, `error="insufficient_scope", scope="write"`))
			if len(f.as.registered) != 1 {
				t.Fatalf("%d registrations after a second sign-in, want 1", len(f.as.registered))
			}
		})
	}
	t.Run("no way to register", func(t *testing.T) {
		f := newFixture(t, "path", func(a *testAS) { a.noRegistration = true }, nil)
		err := f.h.Authorize(context.Background(), f.rs.request(), f.rs.challenge(401, ""))
		if !errors.Is(err, ErrNoClientIdentity) {
			t.Fatalf("Authorize = %v; want ErrNoClientIdentity", err)
		}
	})
}

func (f *fixture) signIn2(t *testing.T, ns *NeedsSignIn) *Grant {
	t.Helper()
	code, state, iss := f.browse(t, ns.URL)
	if _, err := Complete(context.Background(), f.store, nil, state, code, iss, "alice"); err != nil {
		t.Fatalf("Complete: %v", err)
	}
	g, err := f.store.Grant(context.Background(), "alice", "docs")
	if err != nil {
		t.Fatal(err)
	}
	return g
}

func mustQuery(t *testing.T, raw string) url.Values {
	t.Helper()
	u, err := url.Parse(raw)
	if err != nil {
		t.Fatal(err)
	}
	return u.Query()
}

func TestScopes(t *testing.T) {
	cases := []struct {
		name      string
		challenge string
		prm       []string
		config    []string
		asScopes  []string
		want      string
	}{
		{"from WWW-Authenticate", `scope="mcp:basic"`, []string{"a", "b"}, []string{"c"}, nil, "mcp:basic"},
		{"from scopes_supported", "", []string{"a", "b"}, []string{"c"}, nil, "a b"},
		{"from config", "", nil, []string{"c"}, nil, "c"},
		{"omitted when undefined", "", nil, nil, nil, ""},
		{"offline_access only if the AS lists it", "", []string{"a"}, nil, []string{"a", "offline_access"}, "a offline_access"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			f := newFixture(t, "path", func(a *testAS) { a.scopesSupport = c.asScopes },
				func(h *HandlerConfig) { h.Scopes = c.config })
			f.rs.scopes = c.prm
			q := mustQuery(t, f.needs(t, f.rs.challenge(401, c.challenge)).URL)
			if got := q.Get("scope"); got != c.want {
				t.Fatalf("scope = %q, want %q", got, c.want)
			}
			if _, present := q["scope"]; c.want == "" && present {
				t.Fatal("scope parameter sent although no scope is defined")
			}
		})
	}
}

func TestStepUpAndRetryLimit(t *testing.T) {
	f := newFixture(t, "path", nil, nil)
	g := f.signIn(t, f.rs.challenge(401, `scope="mcp:basic"`))
	if !slices.Equal(g.Scopes, []string{"mcp:basic"}) {
		t.Fatalf("granted %v", g.Scopes)
	}
	// Another 403 is not a sign-in.
	if err := f.h.Authorize(context.Background(), f.rs.request(), f.rs.challenge(403, "")); !errors.Is(err, ErrForbidden) {
		t.Fatalf("plain 403: %v; want ErrForbidden", err)
	}
	ns := f.needs(t, f.rs.challenge(403, `error="insufficient_scope", scope="mcp:write"`))
	if got := mustQuery(t, ns.URL).Get("scope"); got != "mcp:basic mcp:write" {
		t.Fatalf("step-up scope = %q; want the union with the granted scopes", got)
	}
	// Concurrent 401s (go-sdk's discover then initialize) share one pending sign-in.
	again := f.needs(t, f.rs.challenge(403, `error="insufficient_scope", scope="mcp:write"`))
	if again.State != ns.State || again.URL != ns.URL {
		t.Fatal("a second Authorize while a sign-in is pending started another one")
	}
	g = f.signIn2(t, ns)
	if !slices.Equal(g.Scopes, []string{"mcp:basic", "mcp:write"}) {
		t.Fatalf("granted after step-up %v", g.Scopes)
	}
	// Third authorization is allowed, the fourth within the TTL is refused.
	f.signIn(t, f.rs.challenge(403, `error="insufficient_scope", scope="mcp:admin"`))
	err := f.h.Authorize(context.Background(), f.rs.request(), f.rs.challenge(403, `error="insufficient_scope", scope="mcp:root"`))
	if !errors.Is(err, ErrTooManySignIns) {
		t.Fatalf("fourth authorization: %v; want ErrTooManySignIns", err)
	}
}

func TestPKCEAndResourceCheckedByAS(t *testing.T) {
	f := newFixture(t, "path", nil, nil)
	ns := f.needs(t, f.rs.challenge(401, ""))
	q := mustQuery(t, ns.URL)
	if q.Get("code_challenge_method") != "S256" || q.Get("resource") != f.rs.url() || q.Get("redirect_uri") != redirect {
		t.Fatalf("authorization request %v", q)
	}
	code, state, iss := f.browse(t, ns.URL)
	// A pending record whose verifier was changed fails at the AS: the verifier is checked.
	p, err := f.store.TakePending(context.Background(), state, "alice")
	if err != nil {
		t.Fatal(err)
	}
	p.Verifier = oauth2.GenerateVerifier()
	if err := f.store.PutPending(context.Background(), p); err != nil {
		t.Fatal(err)
	}
	if _, err := Complete(context.Background(), f.store, nil, state, code, iss, "alice"); !errors.Is(err, ErrExchange) {
		t.Fatalf("Complete with a wrong verifier = %v; want ErrExchange", err)
	}
	if _, err := f.store.Grant(context.Background(), "alice", "docs"); !errors.Is(err, ErrNoGrant) {
		t.Fatal("a refused exchange stored a grant")
	}
	last := f.as.tokenForms[len(f.as.tokenForms)-1]
	if last.Get("resource") != f.rs.url() {
		t.Fatalf("token request resource = %q", last.Get("resource"))
	}
}

func TestCompleteRefusals(t *testing.T) {
	ctx := context.Background()
	t.Run("wrong principal", func(t *testing.T) {
		f := newFixture(t, "path", nil, nil)
		code, state, iss := f.browse(t, f.needs(t, f.rs.challenge(401, "")).URL)
		if _, err := Complete(ctx, f.store, nil, state, code, iss, "mallory"); !errors.Is(err, ErrWrongPrincipal) {
			t.Fatalf("Complete as another principal = %v; want ErrWrongPrincipal", err)
		}
		if _, err := f.store.Grant(ctx, "mallory", "docs"); !errors.Is(err, ErrNoGrant) {
			t.Fatal("grant stored for the wrong principal")
		}
		if _, err := f.store.Grant(ctx, "alice", "docs"); !errors.Is(err, ErrNoGrant) {
			t.Fatal("grant stored from another principal's callback")
		}
	})
	t.Run("reused state", func(t *testing.T) {
		f := newFixture(t, "path", nil, nil)
		code, state, iss := f.browse(t, f.needs(t, f.rs.challenge(401, "")).URL)
		if _, err := Complete(ctx, f.store, nil, state, code, iss, "alice"); err != nil {
			t.Fatal(err)
		}
		if _, err := Complete(ctx, f.store, nil, state, code, iss, "alice"); !errors.Is(err, ErrUnknownState) {
			t.Fatalf("second Complete = %v; want ErrUnknownState", err)
		}
		if _, err := Complete(ctx, f.store, nil, "", code, iss, "alice"); !errors.Is(err, ErrUnknownState) {
			t.Fatalf("empty state = %v; want ErrUnknownState", err)
		}
	})
	t.Run("expired pending", func(t *testing.T) {
		now := time.Now()
		clock := func() time.Time { return now }
		f := newFixture(t, "path", nil, func(c *HandlerConfig) { c.Now = clock; c.PendingTTL = time.Minute })
		f.store.Now = clock
		ns := f.needs(t, f.rs.challenge(401, ""))
		if !ns.Expires.Equal(now.Add(time.Minute)) {
			t.Fatalf("Expires = %v", ns.Expires)
		}
		code, state, iss := f.browse(t, ns.URL)
		now = now.Add(time.Minute + time.Second)
		if p, _ := f.store.PendingFor(ctx, "alice", "docs"); p != nil {
			t.Fatal("PendingFor returned an expired sign-in")
		}
		if _, err := Complete(ctx, f.store, nil, state, code, iss, "alice"); !errors.Is(err, ErrUnknownState) {
			t.Fatalf("Complete after expiry = %v; want ErrUnknownState", err)
		}
	})
	t.Run("issuer mix-up", func(t *testing.T) {
		f := newFixture(t, "path", func(a *testAS) { a.issParam = true }, nil)
		code, state, _ := f.browse(t, f.needs(t, f.rs.challenge(401, "")).URL)
		if _, err := Complete(ctx, f.store, nil, state, code, f.as.issuer()+"/", "alice"); !errors.Is(err, ErrIssuerMismatch) {
			t.Fatalf("iss with a trailing slash = %v; want ErrIssuerMismatch (no normalization)", err)
		}
		code, state, _ = f.browse(t, f.needs(t, f.rs.challenge(401, "")).URL)
		if _, err := Complete(ctx, f.store, nil, state, code, "", "alice"); !errors.Is(err, ErrIssuerMismatch) {
			t.Fatalf("missing iss although advertised = %v; want ErrIssuerMismatch", err)
		}
		code, state, iss := f.browse(t, f.needs(t, f.rs.challenge(401, "")).URL)
		if _, err := Complete(ctx, f.store, nil, state, code, iss, "alice"); err != nil {
			t.Fatalf("matching iss: %v", err)
		}
	})
}

func TestRefreshPersisted(t *testing.T) {
	ctx := context.Background()
	now := time.Now()
	f := newFixture(t, "path", nil, func(c *HandlerConfig) { c.Now = func() time.Time { return now } })
	g := f.signIn(t, f.rs.challenge(401, ""))
	first := g.Token

	// Still valid: no token request.
	before := len(f.as.tokenForms)
	ts, err := f.h.TokenSource(ctx)
	if err != nil || ts == nil {
		t.Fatal(err)
	}
	if tok, _ := ts.Token(); tok.AccessToken != first.AccessToken || len(f.as.tokenForms) != before {
		t.Fatal("a valid token was refreshed")
	}

	// Close to expiry: refreshed, and the rotated refresh token is stored.
	now = first.Expiry.Add(-10 * time.Second)
	ts, err = f.h.TokenSource(ctx)
	if err != nil || ts == nil {
		t.Fatalf("TokenSource near expiry: %v", err)
	}
	tok, _ := ts.Token()
	stored, _ := f.store.Grant(ctx, "alice", "docs")
	if tok.AccessToken == first.AccessToken || stored.Token.AccessToken != tok.AccessToken ||
		stored.Token.RefreshToken == first.RefreshToken || stored.Token.RefreshToken == "" {
		t.Fatalf("refresh not persisted: first %+v now %+v stored %+v", first, tok, stored.Token)
	}
	if last := f.as.tokenForms[len(f.as.tokenForms)-1]; last.Get("grant_type") != "refresh_token" {
		t.Fatalf("last token request %v", last)
	}

	// A refused refresh forgets the grant: the next 401 signs in again.
	stored.Token.Expiry = now.Add(-time.Hour)
	stored.Token.RefreshToken = "revoked"
	if err := f.store.PutGrant(ctx, "alice", "docs", stored); err != nil {
		t.Fatal(err)
	}
	ts, err = f.h.TokenSource(ctx)
	if err != nil || ts != nil {
		t.Fatalf("TokenSource after a refused refresh = %v, %v; want nil, nil", ts, err)
	}
	if _, err := f.store.Grant(ctx, "alice", "docs"); !errors.Is(err, ErrNoGrant) {
		t.Fatal("a refused grant was kept")
	}
}

func TestPrincipalsAreSeparate(t *testing.T) {
	ctx := context.Background()
	f := newFixture(t, "path", nil, nil)
	f.signIn(t, f.rs.challenge(401, ""))
	bobCfg := f.cfg
	bobCfg.Principal = "bob"
	bob := NewHandler(bobCfg)
	if ts, err := bob.TokenSource(ctx); err != nil || ts != nil {
		t.Fatalf("bob's TokenSource = %v, %v; want none", ts, err)
	}
	err := bob.Authorize(ctx, f.rs.request(), f.rs.challenge(401, ""))
	var ns *NeedsSignIn
	if !errors.As(err, &ns) {
		t.Fatalf("bob: %v", err)
	}
	alicePending, _ := f.store.PendingFor(ctx, "alice", "docs")
	if alicePending != nil {
		t.Fatal("bob's sign-in shows up as alice's")
	}
}

func TestMemoryExpiryAndCopies(t *testing.T) {
	ctx := context.Background()
	now := time.Now()
	m := &Memory{Now: func() time.Time { return now }}
	p := &Pending{State: "s1", Principal: "a", Server: "x", Scopes: []string{"r"}, Expires: now.Add(time.Minute)}
	if err := m.PutPending(ctx, p); err != nil {
		t.Fatal(err)
	}
	p.Scopes[0] = "changed"
	got, _ := m.PendingFor(ctx, "a", "x")
	if got == nil || got.Scopes[0] != "r" {
		t.Fatalf("PendingFor = %+v; want a copy of what was put", got)
	}
	if other, _ := m.PendingFor(ctx, "b", "x"); other != nil {
		t.Fatal("PendingFor found another principal's sign-in")
	}
	now = now.Add(2 * time.Minute)
	if got, _ := m.PendingFor(ctx, "a", "x"); got != nil {
		t.Fatal("expired pending returned")
	}
	if _, err := m.TakePending(ctx, "s1", "a"); !errors.Is(err, ErrUnknownState) {
		t.Fatalf("TakePending expired = %v", err)
	}
	if _, err := m.Grant(ctx, "a", "x"); !errors.Is(err, ErrNoGrant) {
		t.Fatal(err)
	}
	if err := m.PutGrant(ctx, "a", "x", &Grant{Token: &oauth2.Token{AccessToken: "t"}}); err != nil {
		t.Fatal(err)
	}
	if err := m.DeleteGrant(ctx, "a", "x"); err != nil {
		t.Fatal(err)
	}
	if err := m.DeleteGrant(ctx, "a", "x"); err != nil {
		t.Fatal("deleting an absent grant failed")
	}
	if _, err := m.Grant(ctx, "a", "x"); !errors.Is(err, ErrNoGrant) {
		t.Fatal("grant survived DeleteGrant")
	}
}

func TestServiceHandler(t *testing.T) {
	ctx := context.Background()
	t.Run("client_secret_basic", func(t *testing.T) {
		as := newTestAS(t, func(a *testAS) { a.authMethods = []string{"client_secret_basic"} })
		as.preRegister("svc", "svc-secret", "client_secret_basic")
		rs := newTestRS(t, as, "path")
		h := NewServiceHandler(ServiceConfig{Server: "docs", ServerURL: rs.url(), ClientID: "svc", ClientSecret: "svc-secret"})
		if ts, _ := h.TokenSource(ctx); ts != nil {
			t.Fatal("a token before any 401")
		}
		if err := h.Authorize(ctx, rs.request(), rs.challenge(401, `scope="svc:read"`)); err != nil {
			t.Fatalf("Authorize: %v", err)
		}
		ts, _ := h.TokenSource(ctx)
		tok, err := ts.Token()
		if err != nil || !strings.HasPrefix(tok.AccessToken, "cc-") {
			t.Fatalf("token %v, %v", tok, err)
		}
		last := as.tokenForms[len(as.tokenForms)-1]
		if last.Get("grant_type") != "client_credentials" || last.Get("resource") != rs.url() || last.Get("scope") != "svc:read" {
			t.Fatalf("token request %v", last)
		}
	})
	t.Run("wrong secret", func(t *testing.T) {
		as := newTestAS(t, nil)
		as.preRegister("svc", "svc-secret", "client_secret_basic")
		rs := newTestRS(t, as, "path")
		h := NewServiceHandler(ServiceConfig{ServerURL: rs.url(), ClientID: "svc", ClientSecret: "nope"})
		err := h.Authorize(ctx, rs.request(), rs.challenge(401, ""))
		if !errors.Is(err, ErrExchange) || strings.Contains(err.Error(), "nope") {
			t.Fatalf("Authorize = %v; want ErrExchange naming no secret", err)
		}
	})
	t.Run("private_key_jwt", func(t *testing.T) {
		key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		if err != nil {
			t.Fatal(err)
		}
		der, _ := x509.MarshalPKCS8PrivateKey(key)
		pemText := string(pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der}))
		as := newTestAS(t, func(a *testAS) { a.ecKey, a.ecClient = &key.PublicKey, "jwt-client" })
		rs := newTestRS(t, as, "path")
		h := NewServiceHandler(ServiceConfig{ServerURL: rs.url(), ClientID: "jwt-client", PrivateKeyPEM: pemText, SigningAlgorithm: "ES256"})
		if err := h.Authorize(ctx, rs.request(), rs.challenge(401, "")); err != nil {
			t.Fatalf("Authorize: %v", err)
		}
		bad := NewServiceHandler(ServiceConfig{ServerURL: rs.url(), ClientID: "jwt-client", PrivateKeyPEM: "not a key"})
		if err := bad.Authorize(ctx, rs.request(), rs.challenge(401, "")); !errors.Is(err, ErrBadServiceConfig) {
			t.Fatalf("bad key: %v; want ErrBadServiceConfig", err)
		}
	})
}

func TestServiceWorkloadAndEnterprise(t *testing.T) {
	ctx := context.Background()
	t.Run("workload identity jwt-bearer", func(t *testing.T) {
		as := newTestAS(t, nil)
		as.preRegister("workload", "", "none")
		rs := newTestRS(t, as, "path")
		h := NewServiceHandler(ServiceConfig{ServerURL: rs.url(), ClientID: "workload", Assertion: wifOK})
		if err := h.Authorize(ctx, rs.request(), rs.challenge(401, "")); err != nil {
			t.Fatalf("Authorize: %v", err)
		}
		last := as.tokenForms[len(as.tokenForms)-1]
		if last.Get("grant_type") != grantJWTBearer || last.Get("assertion") != wifOK || last.Get("client_id") != "workload" {
			t.Fatalf("token request %v", last)
		}
		bad := NewServiceHandler(ServiceConfig{ServerURL: rs.url(), ClientID: "workload", Assertion: "expired.jwt"})
		if err := bad.Authorize(ctx, rs.request(), rs.challenge(401, "")); !errors.Is(err, ErrExchange) {
			t.Fatalf("refused assertion: %v; want ErrExchange", err)
		}
	})
	t.Run("enterprise-managed (ID-JAG)", func(t *testing.T) {
		as := newTestAS(t, nil)
		as.preRegister("svc", "svc-secret", "client_secret_basic")
		rs := newTestRS(t, as, "path")
		var exchanged url.Values
		idp := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			_ = r.ParseForm()
			exchanged = r.PostForm
			if r.PostForm.Get("grant_type") != "urn:ietf:params:oauth:grant-type:token-exchange" ||
				r.PostForm.Get("subject_token") != "user-id-token" || r.PostForm.Get("audience") != as.issuer() ||
				r.PostForm.Get("resource") != rs.url() || r.PostForm.Get("requested_token_type") != "urn:ietf:params:oauth:token-type:id-jag" {
				writeJSON(w, 400, map[string]string{"error": "invalid_request"})
				return
			}
			writeJSON(w, 200, map[string]string{"access_token": "jag-1", "token_type": "N_A",
				"issued_token_type": "urn:ietf:params:oauth:token-type:id-jag"})
		}))
		defer idp.Close()
		h := NewServiceHandler(ServiceConfig{ServerURL: rs.url(), ClientID: "svc", ClientSecret: "svc-secret",
			Enterprise: &EnterpriseIDP{TokenURL: idp.URL + "/token", ClientID: "idp-client", IDToken: "user-id-token"}})
		if err := h.Authorize(ctx, rs.request(), rs.challenge(401, "")); err != nil {
			t.Fatalf("Authorize: %v (IdP saw %v)", err, exchanged)
		}
		last := as.tokenForms[len(as.tokenForms)-1]
		if last.Get("grant_type") != grantJWTBearer || last.Get("assertion") != "jag-1" {
			t.Fatalf("AS token request %v", last)
		}
		incomplete := NewServiceHandler(ServiceConfig{ServerURL: rs.url(), ClientID: "svc",
			Enterprise: &EnterpriseIDP{TokenURL: idp.URL + "/token"}})
		if err := incomplete.Authorize(ctx, rs.request(), rs.challenge(401, "")); !errors.Is(err, ErrBadServiceConfig) {
			t.Fatalf("incomplete enterprise config: %v; want ErrBadServiceConfig", err)
		}
	})
}

// TestConcurrentRefreshKeepsGrant: calls racing on an expired token refresh once; the
// rotated refresh token is not spent twice (which the AS would refuse, losing the grant).
func TestConcurrentRefreshKeepsGrant(t *testing.T) {
	ctx := context.Background()
	f := newFixture(t, "path", nil, nil)
	g := f.signIn(t, f.rs.challenge(401, ""))
	g.Token.Expiry = time.Now().Add(-time.Minute)
	if err := f.store.PutGrant(ctx, "alice", "docs", g); err != nil {
		t.Fatal(err)
	}
	refreshesBefore := 0
	for _, form := range f.as.tokenForms {
		if form.Get("grant_type") == "refresh_token" {
			refreshesBefore++
		}
	}
	errs := make(chan error, 8)
	for range 8 {
		go func() {
			ts, err := f.h.TokenSource(ctx)
			if err == nil && ts == nil {
				err = errors.New("no token source: the grant was lost")
			}
			errs <- err
		}()
	}
	for range 8 {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	refreshes := -refreshesBefore
	f.as.mu.Lock()
	for _, form := range f.as.tokenForms {
		if form.Get("grant_type") == "refresh_token" {
			refreshes++
		}
	}
	f.as.mu.Unlock()
	if refreshes != 1 {
		t.Fatalf("%d refreshes, want 1", refreshes)
	}
	if _, err := f.store.Grant(ctx, "alice", "docs"); err != nil {
		t.Fatalf("grant lost: %v", err)
	}
}

// TestErrorsNameNoSecrets: what an authorization server says in a refusal, and the
// code, verifier and client secret, never reach an error message.
func TestErrorsNameNoSecrets(t *testing.T) {
	ctx := context.Background()
	f := newFixture(t, "path", func(a *testAS) {
		a.tokenHook = func(w http.ResponseWriter, r *http.Request) bool {
			writeJSON(w, 400, map[string]string{"error": "invalid_grant\n<script>" + strings.Repeat("x", 100),
				"error_description": "leaked " + r.PostForm.Get("code_verifier") + " " + r.PostForm.Get("code")})
			return true
		}
	}, func(c *HandlerConfig) { c.ClientID, c.ClientSecret = "pre", "client-secret-canary" })
	f.as.preRegister("pre", "client-secret-canary", "client_secret_post")
	code, state, iss := f.browse(t, f.needs(t, f.rs.challenge(401, "")).URL)
	p, _ := f.store.PendingFor(ctx, "alice", "docs")
	_, err := Complete(ctx, f.store, nil, state, code, iss, "alice")
	if !errors.Is(err, ErrExchange) {
		t.Fatalf("Complete = %v; want ErrExchange", err)
	}
	for _, secret := range []string{code, p.Verifier, "client-secret-canary", "leaked", "<script>", "\n"} {
		if strings.Contains(err.Error(), secret) {
			t.Fatalf("error %q contains %q", err, secret)
		}
	}
}

func TestWithInterrupt(t *testing.T) {
	ctx := context.Background()
	f := newFixture(t, "path", nil, nil)
	err := f.h.Authorize(WithInterrupt(ctx, "thread-9", "int-9"), f.rs.request(), f.rs.challenge(401, ""))
	var ns *NeedsSignIn
	if !errors.As(err, &ns) {
		t.Fatal(err)
	}
	p, _ := f.store.PendingFor(ctx, "alice", "docs")
	if p == nil || p.ThreadID != "thread-9" || p.InterruptID != "int-9" {
		t.Fatalf("pending %+v; want the context's thread and interrupt", p)
	}
}
