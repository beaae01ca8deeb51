package signin

import (
	"context"
	"errors"
	"fmt"
	"time"

	"golang.org/x/oauth2"
)

// ErrNoGrant is returned by Store.Grant when the principal has no token for the server.
var ErrNoGrant = errors.New("signin: no grant")

// ErrUnknownState is returned by Store.TakePending and Complete when the state is unknown,
// already used or expired.
var ErrUnknownState = errors.New("signin: unknown or expired sign-in state")

// ErrWrongPrincipal is returned by Complete when the callback's principal is not the one the
// sign-in was started for.
var ErrWrongPrincipal = errors.New("signin: sign-in belongs to another principal")

// NeedsSignIn is the error a Handler returns when the principal must sign in in a browser.
// Test for it with errors.As before any retry logic: go-sdk wraps it in a -32005
// "rejected by transport" error, which otherwise reads as "not sent, safe to resend".
type NeedsSignIn struct {
	// Server is the configured name of the MCP server (or "a2a:<agent>").
	Server string
	// URL is the authorization URL the user opens.
	URL string
	// State identifies the pending sign-in (Pending.State).
	State string
	// Expires is when the pending sign-in stops being accepted by the callback.
	Expires time.Time
}

func (e *NeedsSignIn) Error() string {
	return fmt.Sprintf("sign-in to %s needed", e.Server)
}

// Grant is what a successful sign-in leaves: the token (refreshed in place) and the facts
// needed to refresh it without discovery.
type Grant struct {
	Token *oauth2.Token `json:"token"`
	// Scopes granted so far; oauth2.Token's JSON drops Extra, so they are kept here.
	Scopes   []string `json:"scopes,omitempty"`
	Issuer   string   `json:"issuer,omitempty"`
	Resource string   `json:"resource,omitempty"`
	// ClientID, ClientSecret and AuthStyle identify Baton at the token endpoint (as
	// registered: CIMD URL, pre-registered or dynamically registered).
	ClientID     string           `json:"client_id"`
	ClientSecret string           `json:"client_secret,omitempty"`
	AuthStyle    oauth2.AuthStyle `json:"auth_style,omitempty"`
	TokenURL     string           `json:"token_url"`
	// DPoPKey is the PKCS#8 P-256 key the token is bound to (RFC 9449), or empty for a
	// Bearer token. Secret: stores seal it with the token.
	DPoPKey []byte `json:"dpop_key,omitempty"`
}

// Pending is a started sign-in waiting for the browser to come back to the callback.
type Pending struct {
	State     string `json:"state"`
	Principal string `json:"principal"`
	Server    string `json:"server"`
	// ThreadID and InterruptID bind the sign-in to the interrupt that shows it (set by the
	// engine through Handler's config; empty for the conformance client).
	ThreadID    string `json:"thread_id,omitempty"`
	InterruptID string `json:"interrupt_id,omitempty"`
	Verifier    string `json:"verifier"`
	Resource    string `json:"resource,omitempty"`
	Issuer      string `json:"issuer,omitempty"`
	// IssParameterSupported records that the authorization server promised an iss
	// parameter in its redirect (RFC 9207); the callback then requires it.
	IssParameterSupported bool      `json:"iss_parameter_supported,omitempty"`
	AuthURL               string    `json:"auth_url"`
	RedirectURL           string    `json:"redirect_url"`
	Scopes                []string  `json:"scopes,omitempty"`
	Grant                 Grant     `json:"grant"` // client identity and token URL; Token empty
	Expires               time.Time `json:"expires"`
}

// Store keeps pending sign-ins and grants. Implementations seal secrets at rest (the
// server's adapter encrypts with server.secrets_key_env); Memory is for tests and the
// conformance client.
type Store interface {
	// PutPending records a started sign-in.
	PutPending(ctx context.Context, p *Pending) error
	// PendingFor returns the unexpired pending sign-in for (principal, server), or nil.
	PendingFor(ctx context.Context, principal, server string) (*Pending, error)
	// TakePending removes and returns the pending sign-in with this state, only when it
	// belongs to principal: single use. ErrUnknownState when absent or expired;
	// ErrWrongPrincipal, with the record left in place, when another principal started it
	// (whoever learns a state must not be able to use it up).
	TakePending(ctx context.Context, state, principal string) (*Pending, error)
	// Grant returns the principal's grant for the server, or ErrNoGrant.
	Grant(ctx context.Context, principal, server string) (*Grant, error)
	// PutGrant stores (or replaces) the principal's grant for the server.
	PutGrant(ctx context.Context, principal, server string, g *Grant) error
	// DeleteGrant forgets the principal's grant for the server (no error when absent).
	DeleteGrant(ctx context.Context, principal, server string) error
}
