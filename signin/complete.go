package signin

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"

	"golang.org/x/oauth2"
)

// ErrIssuerMismatch is returned by Complete when the callback's iss names another
// authorization server than the one the sign-in was started with (RFC 9207: a mix-up
// attack), or lacks the iss the server promised.
var ErrIssuerMismatch = errors.New("signin: the authorization response comes from another issuer")

// ErrExchange is returned when the authorization server refuses a token request (the
// code at the callback, or a service account's grant).
var ErrExchange = errors.New("signin: the authorization server refused the token request")

// Cancel ends the principal's pending sign-in of state after the authorization server
// answered with an error: ErrWrongPrincipal (and nothing changed) when another principal
// started it, ErrUnknownState when there is none.
func Cancel(ctx context.Context, st Store, state, principal string) (*Pending, error) {
	if state == "" {
		return nil, ErrUnknownState
	}
	p, err := st.TakePending(ctx, state, principal)
	if err != nil {
		if errors.Is(err, ErrUnknownState) || errors.Is(err, ErrWrongPrincipal) {
			return nil, err
		}
		return nil, fmt.Errorf("signin: reading the sign-in: %w", err)
	}
	return p, nil
}

// Complete finishes a sign-in when the browser comes back to the callback: it takes the
// pending sign-in for state (single use, so a replayed callback fails with
// ErrUnknownState), checks that it belongs to principal and that iss matches the issuer,
// exchanges code with the PKCE verifier and the resource, and stores the grant. It returns
// the pending record so that the caller can find the thread and interrupt to resume.
// hc carries the token request (nil: a clone of http.DefaultTransport).
func Complete(ctx context.Context, st Store, hc *http.Client, state, code, iss, principal string) (*Pending, error) {
	return complete(ctx, st, func(string) *http.Client { return hc }, state, code, iss, principal, time.Now)
}

// CompleteFor is Complete with the HTTP client chosen by the sign-in's server: the token
// request goes through the egress policy of the peer it belongs to.
func CompleteFor(ctx context.Context, st Store, clientFor func(server string) *http.Client, state, code, iss, principal string) (*Pending, error) {
	return complete(ctx, st, clientFor, state, code, iss, principal, time.Now)
}

func complete(ctx context.Context, st Store, clientFor func(server string) *http.Client, state, code, iss, principal string, now func() time.Time) (*Pending, error) {
	if state == "" {
		return nil, ErrUnknownState
	}
	p, err := st.TakePending(ctx, state, principal)
	if err != nil {
		if errors.Is(err, ErrUnknownState) || errors.Is(err, ErrWrongPrincipal) {
			return nil, err
		}
		return nil, fmt.Errorf("signin: reading the sign-in: %w", err)
	}
	if p == nil || !now().Before(p.Expires) {
		return nil, ErrUnknownState
	}
	if p.Principal != principal {
		return nil, ErrWrongPrincipal
	}
	if iss == "" && p.IssParameterSupported {
		return nil, ErrIssuerMismatch
	}
	// RFC 9207 §2.4: simple string comparison, no normalization.
	if iss != "" && iss != p.Issuer {
		return nil, ErrIssuerMismatch
	}
	if code == "" {
		return nil, fmt.Errorf("%w: no code in the callback", ErrExchange)
	}
	hc := clientFor(p.Server)
	if hc == nil {
		hc = defaultHTTPClient()
	}
	g := p.Grant
	if len(g.DPoPKey) > 0 {
		key, err := parseDPoPKey(g.DPoPKey)
		if err != nil {
			return nil, err
		}
		hc = dpopClient(hc, key, now)
	}
	oc := &oauth2.Config{ClientID: g.ClientID, ClientSecret: g.ClientSecret, RedirectURL: p.RedirectURL,
		Endpoint: oauth2.Endpoint{TokenURL: g.TokenURL, AuthStyle: g.AuthStyle}}
	opts := []oauth2.AuthCodeOption{oauth2.VerifierOption(p.Verifier)}
	if p.Resource != "" {
		opts = append(opts, oauth2.SetAuthURLParam("resource", p.Resource))
	}
	tok, err := oc.Exchange(context.WithValue(ctx, oauth2.HTTPClient, hc), code, opts...)
	if err != nil {
		var re *oauth2.RetrieveError
		if errors.As(err, &re) && re.ErrorCode != "" {
			return nil, fmt.Errorf("%w (%s)", ErrExchange, safeCode(re.ErrorCode))
		}
		return nil, fmt.Errorf("%w: token request failed", ErrExchange)
	}
	if tok.AccessToken == "" {
		return nil, fmt.Errorf("%w: no access token", ErrExchange)
	}
	g.Token = tok
	g.Scopes = tokenScopes(tok)
	if g.Scopes == nil {
		g.Scopes = p.Scopes
	}
	if err := st.PutGrant(ctx, p.Principal, p.Server, &g); err != nil {
		return nil, fmt.Errorf("signin: storing the grant: %w", err)
	}
	return p, nil
}
