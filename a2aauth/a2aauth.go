// Package a2aauth signs users in to A2A agents whose card declares an OAuth 2
// authorization-code flow (A2A §7.3: credentials are obtained out of band and sent with
// every request). It starts a sign-in the way signin.Handler does for MCP servers (PKCE S256,
// a pending record in the signin.Store, nothing held in memory), so that Baton's one
// callback completes both; the grant is kept under the server name "a2a:<agent>", and
// Token reads it (refreshing it) for the agent's calls. See design/signin-engine.md.
//
// Agents in auth mode exchange are authorised by Exchange instead (exchange.go): the
// caller's OIDC token exchanged per call (RFC 8693); see design/token-exchange.md.
package a2aauth

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync"
	"time"

	sdk "github.com/a2aproject/a2a-go/v2/a2a"
	"golang.org/x/oauth2"

	"github.com/baton-dev/baton/signin"
)

// ErrNoFlow is returned by Start when the card declares no usable authorization-code flow.
var ErrNoFlow = errors.New("a2aauth: the agent's card declares no OAuth authorization-code flow")

// ErrNoClient is returned by Start when Baton has no way to identify itself to the
// authorization server: no https Client ID Metadata Document and no dynamic registration.
var ErrNoClient = errors.New("a2aauth: no way to register with the agent's authorization server")

// maxMetadataBytes bounds a metadata or registration response.
const maxMetadataBytes = 64 << 10

// Flow is the authorization-code flow an agent's card declares.
type Flow struct {
	AuthorizationURL, TokenURL string
	Scopes                     []string
	// MetadataURL is the authorization server's RFC 8414 metadata (for dynamic
	// registration), when the card gives it.
	MetadataURL string
}

// FlowOf returns the first OAuth 2 security scheme of card with an authorization-code flow
// whose URLs may carry tokens (https, or http on loopback), or nil.
func FlowOf(card *sdk.AgentCard) *Flow {
	if card == nil {
		return nil
	}
	names := make([]string, 0, len(card.SecuritySchemes))
	for n := range card.SecuritySchemes {
		names = append(names, string(n))
	}
	slices.Sort(names)
	for _, n := range names {
		var o *sdk.OAuth2SecurityScheme
		switch s := card.SecuritySchemes[sdk.SecuritySchemeName(n)].(type) {
		case sdk.OAuth2SecurityScheme:
			o = &s
		case *sdk.OAuth2SecurityScheme:
			o = s
		}
		if o == nil {
			continue
		}
		var ac *sdk.AuthorizationCodeOAuthFlow
		switch f := o.Flows.(type) {
		case sdk.AuthorizationCodeOAuthFlow:
			ac = &f
		case *sdk.AuthorizationCodeOAuthFlow:
			ac = f
		}
		if ac == nil || !tokenURL(ac.AuthorizationURL) || !tokenURL(ac.TokenURL) {
			continue
		}
		fl := &Flow{AuthorizationURL: ac.AuthorizationURL, TokenURL: ac.TokenURL}
		for sc := range ac.Scopes {
			fl.Scopes = append(fl.Scopes, sc)
		}
		slices.Sort(fl.Scopes)
		if tokenURL(o.Oauth2MetadataURL) {
			fl.MetadataURL = o.Oauth2MetadataURL
		}
		return fl
	}
	return nil
}

// tokenURL: https, or http to a loopback host (the rule of go-sdk's discovery).
func tokenURL(raw string) bool {
	u, err := url.Parse(raw)
	if err != nil || u.Host == "" {
		return false
	}
	switch u.Scheme {
	case "https":
		return true
	case "http":
		h := u.Hostname()
		if strings.EqualFold(h, "localhost") {
			return true
		}
		ip := net.ParseIP(h)
		return ip != nil && ip.IsLoopback()
	}
	return false
}

// ServerName is the name grants and pending sign-ins of an agent are kept under.
func ServerName(agent string) string { return "a2a:" + agent }

// Config configures a Starter.
type Config struct {
	Store signin.Store
	// RedirectURL returns Baton's callback URL.
	RedirectURL func() string
	// ClientMetadataURL returns Baton's Client ID Metadata Document URL, "" when it is not
	// https (then dynamic registration is used).
	ClientMetadataURL func() string
	// HTTPClient carries registration and refresh (default: a client with a 30 s timeout).
	HTTPClient *http.Client
	// ClientFor, when set, chooses the client by agent, so that each agent's sign-in
	// requests go through that agent's egress policy; HTTPClient when it returns nil.
	ClientFor func(agent string) *http.Client
	// PendingTTL is how long a started sign-in is accepted (signin.DefaultPendingTTL).
	PendingTTL time.Duration
	Now        func() time.Time
}

// Starter starts sign-ins and hands out tokens. It is safe for concurrent use.
type Starter struct {
	cfg Config

	mu sync.Mutex
	// clients are dynamic registrations by metadata URL and redirect URL, reused by later
	// sign-ins of this process (bounded by the configured agents).
	clients map[string]string
}

// New returns a Starter.
func New(cfg Config) *Starter {
	if cfg.HTTPClient == nil {
		cfg.HTTPClient = &http.Client{Transport: http.DefaultTransport.(*http.Transport).Clone(), Timeout: 30 * time.Second}
	}
	if cfg.PendingTTL <= 0 {
		cfg.PendingTTL = signin.DefaultPendingTTL
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	return &Starter{cfg: cfg, clients: map[string]string{}}
}

// Start begins (or finds the already pending) sign-in of principal to agent and returns the
// authorization URL and until when the callback accepts it. threadID and interruptID bind
// it to the interrupt that shows it.
func (s *Starter) Start(ctx context.Context, principal, agent string, fl *Flow, threadID, interruptID string) (string, time.Time, error) {
	if fl == nil {
		return "", time.Time{}, ErrNoFlow
	}
	server := ServerName(agent)
	if p, err := s.cfg.Store.PendingFor(ctx, principal, server); err != nil {
		return "", time.Time{}, fmt.Errorf("a2aauth: reading pending sign-ins: %w", err)
	} else if p != nil {
		return p.AuthURL, p.Expires, nil
	}
	redirect := s.cfg.RedirectURL()
	clientID := ""
	if s.cfg.ClientMetadataURL != nil {
		clientID = s.cfg.ClientMetadataURL()
	}
	if clientID == "" {
		key := fl.MetadataURL + " " + redirect
		s.mu.Lock()
		clientID = s.clients[key]
		s.mu.Unlock()
		if clientID == "" {
			id, err := s.register(ctx, s.client(agent), fl, redirect)
			if err != nil {
				return "", time.Time{}, err
			}
			clientID = id
			s.mu.Lock()
			s.clients[key] = id
			s.mu.Unlock()
		}
	}
	state, verifier := rand.Text(), oauth2.GenerateVerifier()
	oc := &oauth2.Config{ClientID: clientID, RedirectURL: redirect, Scopes: fl.Scopes,
		Endpoint: oauth2.Endpoint{AuthURL: fl.AuthorizationURL, TokenURL: fl.TokenURL}}
	p := &signin.Pending{
		State: state, Principal: principal, Server: server, ThreadID: threadID, InterruptID: interruptID,
		Verifier: verifier, AuthURL: oc.AuthCodeURL(state, oauth2.S256ChallengeOption(verifier)),
		RedirectURL: redirect, Scopes: fl.Scopes,
		Grant:   signin.Grant{ClientID: clientID, TokenURL: fl.TokenURL, AuthStyle: oauth2.AuthStyleInParams},
		Expires: s.cfg.Now().Add(s.cfg.PendingTTL),
	}
	if err := s.cfg.Store.PutPending(ctx, p); err != nil {
		return "", time.Time{}, fmt.Errorf("a2aauth: recording the sign-in: %w", err)
	}
	return p.AuthURL, p.Expires, nil
}

// register registers Baton dynamically (RFC 7591) at the registration endpoint of the
// authorization server metadata the card names, as a public client.
func (s *Starter) register(ctx context.Context, hc *http.Client, fl *Flow, redirect string) (string, error) {
	if fl.MetadataURL == "" {
		return "", ErrNoClient
	}
	var md struct {
		RegistrationEndpoint string `json:"registration_endpoint"`
	}
	if err := s.getJSON(ctx, hc, http.MethodGet, fl.MetadataURL, nil, &md); err != nil {
		return "", err
	}
	if !tokenURL(md.RegistrationEndpoint) {
		return "", ErrNoClient
	}
	body, _ := json.Marshal(map[string]any{
		"client_name": "Baton", "redirect_uris": []string{redirect},
		"grant_types": []string{"authorization_code", "refresh_token"}, "response_types": []string{"code"},
		"token_endpoint_auth_method": "none",
	})
	var reg struct {
		ClientID string `json:"client_id"`
	}
	if err := s.getJSON(ctx, hc, http.MethodPost, md.RegistrationEndpoint, body, &reg); err != nil {
		return "", err
	}
	if reg.ClientID == "" {
		return "", fmt.Errorf("%w: the registration returned no client_id", ErrNoClient)
	}
	return reg.ClientID, nil
}

// client is the HTTP client of agent's sign-in requests.
func (s *Starter) client(agent string) *http.Client {
	if s.cfg.ClientFor != nil {
		if c := s.cfg.ClientFor(agent); c != nil {
			return c
		}
	}
	return s.cfg.HTTPClient
}

func (s *Starter) getJSON(ctx context.Context, hc *http.Client, method, raw string, body []byte, v any) error {
	req, err := http.NewRequestWithContext(ctx, method, raw, bytes.NewReader(body))
	if err != nil {
		return fmt.Errorf("a2aauth: %w", err)
	}
	req.Header.Set("Accept", "application/json")
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := hc.Do(req)
	if err != nil {
		return fmt.Errorf("a2aauth: authorization server unreachable")
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, maxMetadataBytes))
	if err != nil || resp.StatusCode/100 != 2 {
		return fmt.Errorf("a2aauth: authorization server answered HTTP %d", resp.StatusCode)
	}
	if err := json.Unmarshal(b, v); err != nil {
		return fmt.Errorf("a2aauth: authorization server answered something that is not JSON")
	}
	return nil
}

// Token returns principal's access token for agent, refreshed when it is about to expire
// (through signin.Handler, which also persists a rotated refresh token); ok is false when
// the principal has not signed in.
func (s *Starter) Token(ctx context.Context, principal, agent string) (string, bool) {
	h := signin.NewHandler(signin.HandlerConfig{Store: s.cfg.Store, Principal: principal, Server: ServerName(agent),
		HTTPClient: s.client(agent), Now: s.cfg.Now})
	ts, err := h.TokenSource(ctx)
	if err != nil || ts == nil {
		return "", false
	}
	t, err := ts.Token()
	if err != nil || t == nil || t.AccessToken == "" {
		return "", false
	}
	return t.AccessToken, true
}
