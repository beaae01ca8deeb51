package signin

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/auth"
	"github.com/modelcontextprotocol/go-sdk/oauthex"
	"golang.org/x/oauth2"
)

// ErrForbidden is returned by Handler.Authorize for a 403 that asks for no more scope: the
// server refuses the principal, and signing in again would not change that.
var ErrForbidden = errors.New("signin: the server refused access (403)")

// ErrTooManySignIns is returned when a server keeps asking for authorization: more than
// MaxAuthorizations within one PendingTTL for the same principal and server.
var ErrTooManySignIns = errors.New("signin: the server keeps asking for authorization")

// ErrNoClientIdentity is returned when Baton has no way to identify itself to the
// authorization server: no Client ID Metadata Document support, no pre-registered client and
// no dynamic registration.
var ErrNoClientIdentity = errors.New("signin: no way to register with the authorization server")

// MaxAuthorizations is how many authorizations one (principal, server) may start within one
// PendingTTL before Authorize refuses (the scope-retry limit).
const MaxAuthorizations = 3

// DefaultPendingTTL is how long a started sign-in is accepted by the callback.
const DefaultPendingTTL = 10 * time.Minute

// HandlerConfig configures a Handler for one principal and one MCP server.
type HandlerConfig struct {
	Store     Store
	Principal string
	// Server is the configured server name; it keys grants and pending sign-ins.
	Server string
	// ServerURL is the MCP endpoint (the protected resource).
	ServerURL string
	// RedirectURL is Baton's /oauth/callback absolute URL.
	RedirectURL string
	// ClientMetadataURL is Baton's Client ID Metadata Document URL (https with a path), or ""
	// when Baton does not serve one.
	ClientMetadataURL string
	// ClientID and ClientSecret are a pre-registration from config ("" when none).
	ClientID, ClientSecret string
	// Scopes are requested when neither the challenge nor the resource metadata names any.
	Scopes []string
	// ClientName is sent with dynamic client registration.
	ClientName string
	// HTTPClient carries discovery, registration, code exchange and refresh. The caller
	// guards it against SSRF. Its Transport must set DialContext to reach loopback or
	// private addresses: go-sdk's discovery otherwise dials public addresses only. When nil,
	// a clone of http.DefaultTransport is used.
	HTTPClient *http.Client
	// PendingTTL is how long a started sign-in stays valid (DefaultPendingTTL when zero).
	PendingTTL time.Duration
	// ThreadID and InterruptID are copied into Pending (may be empty).
	ThreadID, InterruptID string
	// Now is the clock (time.Now when nil).
	Now func() time.Time
}

// Handler is go-sdk's auth.OAuthHandler for one (principal, server): TokenSource reads the
// stored grant (refreshing and persisting it), Authorize starts a sign-in and returns
// *NeedsSignIn instead of waiting for the browser.
type Handler struct {
	cfg HandlerConfig

	mu        sync.Mutex
	attempts  []time.Time               // authorizations started, for MaxAuthorizations
	clients   map[string]clientIdentity // dynamic registrations by issuer
	refreshMu sync.Mutex                // serializes refreshes
	dpopDER   []byte                    // the current grant\'s DPoP key, as last read
	dpopKey   *ecdsa.PrivateKey
}

var _ auth.OAuthHandler = (*Handler)(nil)

// clientIdentity is how Baton authenticates at one authorization server.
type clientIdentity struct {
	id, secret string
	style      oauth2.AuthStyle
}

// NewHandler returns a Handler; the config is copied.
func NewHandler(cfg HandlerConfig) *Handler {
	if cfg.PendingTTL <= 0 {
		cfg.PendingTTL = DefaultPendingTTL
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.HTTPClient == nil {
		cfg.HTTPClient = defaultHTTPClient()
	}
	cfg.Scopes = slices.Clone(cfg.Scopes)
	return &Handler{cfg: cfg, clients: map[string]clientIdentity{}}
}

func defaultHTTPClient() *http.Client {
	return &http.Client{Transport: http.DefaultTransport.(*http.Transport).Clone(), Timeout: 30 * time.Second}
}

// TokenSource implements auth.OAuthHandler. It returns nil (no Authorization header) when
// the principal has no grant. A grant whose access token is about to expire is refreshed
// here and the new token stored, so a rotated refresh token is never lost; a grant the
// authorization server no longer honours is forgotten, so the next 401 starts a sign-in.
func (h *Handler) TokenSource(ctx context.Context) (oauth2.TokenSource, error) {
	g, err := h.grant(ctx)
	if err != nil || g == nil {
		return nil, err
	}
	if fresh(g.Token, h.cfg.Now) {
		return oauth2.StaticTokenSource(g.Token), nil
	}
	// One refresh at a time per handler; a refresh token is often single use (rotation),
	// so a second, concurrent refresh with it would be refused.
	h.refreshMu.Lock()
	defer h.refreshMu.Unlock()
	if g, err = h.grant(ctx); err != nil || g == nil {
		return nil, err
	}
	if fresh(g.Token, h.cfg.Now) || g.Token.RefreshToken == "" {
		// Refreshed meanwhile, or nothing to refresh with: the server's 401 starts a sign-in.
		return oauth2.StaticTokenSource(g.Token), nil
	}
	tok, err := refreshed(ctx, h.cfg.HTTPClient, g, h.cfg.Now)
	if err != nil {
		var re *oauth2.RetrieveError
		if !errors.As(err, &re) {
			return nil, fmt.Errorf("signin: refreshing the token for %s failed", h.cfg.Server)
		}
		// Refused. Another replica may have refreshed (and rotated) the same grant: use
		// its token. Otherwise forget the grant; the 401 that follows signs in.
		if now, err := h.grant(ctx); err == nil && now != nil && now.Token.RefreshToken != g.Token.RefreshToken {
			return oauth2.StaticTokenSource(now.Token), nil
		}
		if derr := h.cfg.Store.DeleteGrant(ctx, h.cfg.Principal, h.cfg.Server); derr != nil {
			return nil, fmt.Errorf("signin: forgetting a refused grant for %s: %w", h.cfg.Server, derr)
		}
		_ = h.setDPoPKey(nil)
		return nil, nil
	}
	ng := *g
	ng.Token = tok
	if s := tokenScopes(tok); s != nil {
		ng.Scopes = s
	}
	if err := h.cfg.Store.PutGrant(ctx, h.cfg.Principal, h.cfg.Server, &ng); err != nil {
		return nil, fmt.Errorf("signin: storing the refreshed token for %s: %w", h.cfg.Server, err)
	}
	return oauth2.StaticTokenSource(tok), nil
}

// grant reads the principal's grant and records its DPoP key for Transport; nil when there
// is none.
func (h *Handler) grant(ctx context.Context) (*Grant, error) {
	g, err := h.cfg.Store.Grant(ctx, h.cfg.Principal, h.cfg.Server)
	if errors.Is(err, ErrNoGrant) || (err == nil && g.Token == nil) {
		_ = h.setDPoPKey(nil)
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("signin: reading the grant for %s: %w", h.cfg.Server, err)
	}
	if err := h.setDPoPKey(g.DPoPKey); err != nil {
		return nil, err
	}
	return g, nil
}

// fresh reports whether the access token is usable for a while yet.
func fresh(t *oauth2.Token, now func() time.Time) bool {
	return t.AccessToken != "" && (t.Expiry.IsZero() || now().Add(expiryDelta).Before(t.Expiry))
}

// expiryDelta refreshes this long before the access token expires.
const expiryDelta = 30 * time.Second

// refreshed returns a refreshed token for g (whose refresh token is set).
func refreshed(ctx context.Context, hc *http.Client, g *Grant, now func() time.Time) (*oauth2.Token, error) {
	t := g.Token
	cfg := &oauth2.Config{ClientID: g.ClientID, ClientSecret: g.ClientSecret,
		Endpoint: oauth2.Endpoint{TokenURL: g.TokenURL, AuthStyle: g.AuthStyle}}
	if len(g.DPoPKey) > 0 {
		key, err := parseDPoPKey(g.DPoPKey)
		if err != nil {
			return nil, err
		}
		hc = dpopClient(hc, key, now)
	}
	ctx = context.WithValue(ctx, oauth2.HTTPClient, hc)
	old := *t
	old.Expiry = time.Unix(1, 0) // force the refresh (oauth2 uses the real clock)
	nt, err := cfg.TokenSource(ctx, &old).Token()
	if err != nil {
		return nil, err
	}
	if nt.RefreshToken == "" {
		nt.RefreshToken = t.RefreshToken
	}
	return nt, nil
}

// tokenScopes returns the token response's scope, or nil when it has none.
func tokenScopes(t *oauth2.Token) []string {
	if s, ok := t.Extra("scope").(string); ok && s != "" {
		return strings.Fields(s)
	}
	return nil
}

// Authorize implements auth.OAuthHandler. For a 401, or a 403 with insufficient_scope, it
// starts a sign-in (or finds the one already started) and returns *NeedsSignIn. Any other
// 403 is ErrForbidden. Discovery and registration failures are errors that name no secret.
func (h *Handler) Authorize(ctx context.Context, req *http.Request, resp *http.Response) error {
	defer resp.Body.Close()
	defer io.Copy(io.Discard, io.LimitReader(resp.Body, maxMetadataBytes))

	challenges, err := oauthex.ParseWWWAuthenticate(resp.Header.Values("WWW-Authenticate"))
	if err != nil {
		return fmt.Errorf("%w: unreadable WWW-Authenticate header", ErrDiscovery)
	}
	stepUp := false
	switch resp.StatusCode {
	case http.StatusUnauthorized:
	case http.StatusForbidden:
		if challengeParam(challenges, "error") != "insufficient_scope" {
			return ErrForbidden
		}
		stepUp = true
	default:
		return fmt.Errorf("signin: unexpected HTTP %d", resp.StatusCode)
	}
	if p, err := h.cfg.Store.PendingFor(ctx, h.cfg.Principal, h.cfg.Server); err != nil {
		return fmt.Errorf("signin: reading pending sign-ins: %w", err)
	} else if p != nil {
		return h.needs(p)
	}
	if !h.allowAttempt() {
		return ErrTooManySignIns
	}

	serverURL := h.cfg.ServerURL
	if serverURL == "" && req != nil && req.URL != nil {
		serverURL = req.URL.String()
	}
	d, err := discover(ctx, h.cfg.HTTPClient, serverURL, challenges)
	if err != nil {
		return err
	}
	asm := d.asm
	if !d.legacy && len(asm.CodeChallengeMethodsSupported) > 0 && !slices.Contains(asm.CodeChallengeMethodsSupported, "S256") {
		return fmt.Errorf("%w: the authorization server does not support PKCE S256", ErrDiscovery)
	}

	var granted []string
	g, err := h.cfg.Store.Grant(ctx, h.cfg.Principal, h.cfg.Server)
	if err != nil && !errors.Is(err, ErrNoGrant) {
		return fmt.Errorf("signin: reading the grant: %w", err)
	}
	if g != nil && (g.Issuer == "" || issuersEqual(g.Issuer, asm.Issuer)) {
		granted = g.Scopes
	}

	scopes := strings.Fields(challengeParam(challenges, "scope"))
	if len(scopes) == 0 {
		scopes = slices.Clone(d.scopes)
	}
	if len(scopes) == 0 {
		scopes = slices.Clone(h.cfg.Scopes)
	}
	offline := slices.Contains(asm.ScopesSupported, "offline_access")
	if offline && !slices.Contains(scopes, "offline_access") {
		scopes = append(scopes, "offline_access")
	}
	if stepUp || len(granted) > 0 {
		scopes = union(granted, scopes)
	}

	client, err := h.identify(ctx, asm, g, offline)
	if err != nil {
		return err
	}

	var dpopKey []byte
	if d.dpop {
		if g != nil && len(g.DPoPKey) > 0 {
			dpopKey = g.DPoPKey
		} else if dpopKey, err = newDPoPKey(); err != nil {
			return fmt.Errorf("signin: creating a DPoP key: %w", err)
		}
	}

	state := rand.Text()
	verifier := oauth2.GenerateVerifier()
	oc := &oauth2.Config{ClientID: client.id, RedirectURL: h.cfg.RedirectURL, Scopes: scopes,
		Endpoint: oauth2.Endpoint{AuthURL: asm.AuthorizationEndpoint, TokenURL: asm.TokenEndpoint}}
	authURL := oc.AuthCodeURL(state, oauth2.S256ChallengeOption(verifier),
		oauth2.SetAuthURLParam("resource", d.resource))
	threadID, interruptID := h.cfg.ThreadID, h.cfg.InterruptID
	if b, ok := ctx.Value(interruptKey{}).(interruptBinding); ok {
		threadID, interruptID = b.thread, b.interrupt
	}
	p := &Pending{
		State: state, Principal: h.cfg.Principal, Server: h.cfg.Server,
		ThreadID: threadID, InterruptID: interruptID,
		Verifier: verifier, Resource: d.resource, Issuer: asm.Issuer,
		IssParameterSupported: asm.AuthorizationResponseIssParameterSupported,
		AuthURL:               authURL, RedirectURL: h.cfg.RedirectURL, Scopes: scopes,
		Grant: Grant{Issuer: asm.Issuer, Resource: d.resource, ClientID: client.id,
			ClientSecret: client.secret, AuthStyle: client.style, TokenURL: asm.TokenEndpoint, DPoPKey: dpopKey},
		Expires: h.cfg.Now().Add(h.cfg.PendingTTL),
	}
	if err := h.cfg.Store.PutPending(ctx, p); err != nil {
		return fmt.Errorf("signin: recording the sign-in: %w", err)
	}
	return h.needs(p)
}

// setDPoPKey records the current grant's DPoP key for Transport.
func (h *Handler) setDPoPKey(der []byte) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	if bytes.Equal(der, h.dpopDER) {
		return nil
	}
	if len(der) == 0 {
		h.dpopDER, h.dpopKey = nil, nil
		return nil
	}
	key, err := parseDPoPKey(der)
	if err != nil {
		return err
	}
	h.dpopDER, h.dpopKey = bytes.Clone(der), key
	return nil
}

// Transport wraps the MCP transport's round tripper so that a DPoP-bound grant is presented
// as RFC 9449 requires: the DPoP Authorization scheme (go-sdk always writes Bearer) and a
// fresh proof on every request, with the server's nonce when it asks for one. Requests pass
// through untouched while the grant is a Bearer token. Use it in the HTTPClient of the
// StreamableClientTransport whose OAuthHandler is h.
func (h *Handler) Transport(base http.RoundTripper) http.RoundTripper {
	return newDPoPTransport(base, func() *ecdsa.PrivateKey {
		h.mu.Lock()
		defer h.mu.Unlock()
		return h.dpopKey
	}, h.cfg.Now)
}

type interruptKey struct{}

type interruptBinding struct{ thread, interrupt string }

// WithInterrupt returns a context under which Authorize records threadID and interruptID in
// the Pending it starts, instead of HandlerConfig's: one Handler serves a (principal, server)
// across threads, and go-sdk hands Authorize the context of the call that got the 401.
func WithInterrupt(ctx context.Context, threadID, interruptID string) context.Context {
	return context.WithValue(ctx, interruptKey{}, interruptBinding{threadID, interruptID})
}

func (h *Handler) needs(p *Pending) *NeedsSignIn {
	return &NeedsSignIn{Server: h.cfg.Server, URL: p.AuthURL, State: p.State, Expires: p.Expires}
}

// allowAttempt records an authorization unless MaxAuthorizations were started within the
// last PendingTTL.
func (h *Handler) allowAttempt() bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	now := h.cfg.Now()
	kept := h.attempts[:0]
	for _, t := range h.attempts {
		if now.Sub(t) < h.cfg.PendingTTL {
			kept = append(kept, t)
		}
	}
	h.attempts = kept
	if len(h.attempts) >= MaxAuthorizations {
		return false
	}
	h.attempts = append(h.attempts, now)
	return true
}

// identify chooses how Baton identifies itself: a Client ID Metadata Document when the
// authorization server supports it and Baton serves one, else the pre-registered client,
// else the registration kept from an earlier sign-in with the same server, else dynamic
// client registration.
func (h *Handler) identify(ctx context.Context, asm *oauthex.AuthServerMeta, g *Grant, offline bool) (clientIdentity, error) {
	if asm.ClientIDMetadataDocumentSupported && h.cfg.ClientMetadataURL != "" {
		return clientIdentity{id: h.cfg.ClientMetadataURL, style: oauth2.AuthStyleInParams}, nil
	}
	if h.cfg.ClientID != "" {
		return clientIdentity{id: h.cfg.ClientID, secret: h.cfg.ClientSecret,
			style: preferredAuthStyle(asm.TokenEndpointAuthMethodsSupported, h.cfg.ClientSecret != "")}, nil
	}
	if g != nil && g.ClientID != "" && issuersEqual(g.Issuer, asm.Issuer) && g.TokenURL == asm.TokenEndpoint {
		return clientIdentity{id: g.ClientID, secret: g.ClientSecret, style: g.AuthStyle}, nil
	}
	h.mu.Lock()
	c, ok := h.clients[asm.Issuer]
	h.mu.Unlock()
	if ok {
		return c, nil
	}
	if asm.RegistrationEndpoint == "" {
		return clientIdentity{}, ErrNoClientIdentity
	}
	grants := []string{"authorization_code"}
	if offline {
		grants = append(grants, "refresh_token")
	}
	meta := &oauthex.ClientRegistrationMetadata{
		RedirectURIs:            []string{h.cfg.RedirectURL},
		TokenEndpointAuthMethod: registrationAuthMethod(asm.TokenEndpointAuthMethodsSupported),
		GrantTypes:              grants,
		ResponseTypes:           []string{"code"},
		ClientName:              h.cfg.ClientName,
		ApplicationType:         applicationType(h.cfg.RedirectURL),
	}
	reg, err := oauthex.RegisterClient(ctx, asm.RegistrationEndpoint, meta, h.cfg.HTTPClient)
	if err != nil {
		var re *oauthex.ClientRegistrationError
		if errors.As(err, &re) {
			return clientIdentity{}, fmt.Errorf("%w: dynamic registration refused (%s)", ErrNoClientIdentity, re.ErrorCode)
		}
		return clientIdentity{}, fmt.Errorf("%w: dynamic registration failed", ErrNoClientIdentity)
	}
	method := reg.TokenEndpointAuthMethod
	if method == "" {
		method = meta.TokenEndpointAuthMethod
	}
	c = clientIdentity{id: reg.ClientID, secret: reg.ClientSecret, style: authStyle(method, reg.ClientSecret != "")}
	h.mu.Lock()
	h.clients[asm.Issuer] = c
	h.mu.Unlock()
	return c, nil
}

// applicationType is the registration's application_type (OpenID Dynamic Client
// Registration, SEP-837): "native" for a loopback or custom-scheme redirect, else "web".
func applicationType(redirect string) string {
	u, err := url.Parse(redirect)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || isLoopbackHost(u.Hostname()) {
		return "native"
	}
	return "web"
}

// registrationAuthMethod picks the token endpoint authentication method asked for at
// dynamic registration: client_secret_basic (RFC 7591's default), else client_secret_post,
// else none, among those the server lists.
func registrationAuthMethod(supported []string) string {
	for _, m := range []string{"client_secret_basic", "client_secret_post", "none"} {
		if slices.Contains(supported, m) {
			return m
		}
	}
	return ""
}

// preferredAuthStyle is the token endpoint authentication of a pre-registered client.
func preferredAuthStyle(supported []string, hasSecret bool) oauth2.AuthStyle {
	if !hasSecret {
		return oauth2.AuthStyleInParams
	}
	m := registrationAuthMethod(supported)
	if m == "" || m == "none" {
		m = "client_secret_basic"
	}
	return authStyle(m, true)
}

func authStyle(method string, hasSecret bool) oauth2.AuthStyle {
	switch {
	case method == "client_secret_post", method == "none", !hasSecret:
		return oauth2.AuthStyleInParams
	default:
		return oauth2.AuthStyleInHeader
	}
}

// issuersEqual compares issuer identifiers, ignoring one trailing slash.
func issuersEqual(a, b string) bool {
	return strings.TrimSuffix(a, "/") == strings.TrimSuffix(b, "/")
}
