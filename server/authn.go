package server

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"errors"
	"net/http"
	"strings"

	"github.com/baton-dev/baton/oidcauth"
)

// TokenVerifier verifies a bearer JWT (package oidcauth). Its errors wrap
// oidcauth.ErrInvalidToken with a reason that names nothing of the token.
type TokenVerifier interface {
	Verify(ctx context.Context, raw string) (*oidcauth.Identity, error)
}

// errNoCredentials: the request has no bearer token (RFC 6750 §3.1: no error code then).
var errNoCredentials = errors.New("no credentials")

// errMalformed: the Authorization header is not one bearer token.
var errMalformed = errors.New("the Authorization header is not a bearer token")

// errDuplicate: more than one Authorization header (RFC 6750 §3.1: 400 invalid_request).
var errDuplicate = errors.New("more than one Authorization header")

// authn authenticates requests: against the static bearer tokens (server.auth_tokens, kept
// as hashes) and, with OIDC, by verifying a JWT. Every route group holds the one authn that
// New builds.
type authn struct {
	tokens [][32]byte
	oidc   TokenVerifier
}

// newAuthn hashes the static tokens (blank ones are ignored); oidc may be nil.
func newAuthn(tokens []string, oidc TokenVerifier) *authn {
	a := &authn{oidc: oidc}
	for _, t := range tokens {
		if t = strings.TrimSpace(t); t != "" {
			a.tokens = append(a.tokens, sha256.Sum256([]byte(t)))
		}
	}
	return a
}

// on reports whether requests must authenticate.
func (a *authn) on() bool { return len(a.tokens) > 0 || a.oidc != nil }

// principal authenticates the request. Without auth everyone is "".
func (a *authn) principal(r *http.Request) (string, bool) {
	who, err := a.authenticate(r)
	return who, err == nil
}

// authenticate returns the request's principal or why there is none. A static token's
// principal is a hash of the token, so that tokens never sit in memory maps or logs; a
// JWT's is its issuer plus principal claim (oidcauth.Principal).
func (a *authn) authenticate(r *http.Request) (string, error) {
	if !a.on() {
		return "", nil
	}
	h := r.Header.Values("Authorization")
	if len(h) == 0 {
		return "", errNoCredentials
	}
	if len(h) > 1 {
		return "", errDuplicate
	}
	// The scheme is case-insensitive (RFC 9110 §11.1).
	scheme, tok, ok := strings.Cut(strings.TrimSpace(h[0]), " ")
	tok = strings.TrimSpace(tok)
	if !strings.EqualFold(scheme, "Bearer") {
		return "", errNoCredentials // another scheme: no bearer credentials
	}
	if !ok || tok == "" {
		return "", errMalformed
	}
	sum := sha256.Sum256([]byte(tok))
	for _, t := range a.tokens {
		if subtle.ConstantTimeCompare(sum[:], t[:]) == 1 {
			return hex.EncodeToString(sum[:8]), nil
		}
	}
	if a.oidc == nil || !oidcauth.LooksLikeJWT(tok) {
		return "", oidcauth.ErrInvalidToken
	}
	id, err := a.oidc.Verify(r.Context(), tok)
	if err != nil {
		return "", err
	}
	return id.Principal, nil
}

// unauthorized answers a request without a valid principal: 401 with an RFC 6750
// WWW-Authenticate header that says why (invalid_token with a reason, invalid_request for
// a broken header, no error code without credentials). The reason names nothing of the
// token, and nothing of it is logged.
func (a *authn) unauthorized(w http.ResponseWriter, r *http.Request) {
	a.unauthorizedWith(w, r, "")
}

// unauthorizedWith is unauthorized with extra auth-params in the challenge (such as the
// MCP endpoint's resource_metadata).
func (a *authn) unauthorizedWith(w http.ResponseWriter, r *http.Request, extra string) {
	_, err := a.authenticate(r)
	ch := `Bearer realm="baton"`
	if extra != "" {
		ch += ", " + extra
	}
	status, msg := http.StatusUnauthorized, "A valid bearer token is required."
	switch {
	case err == nil, errors.Is(err, errNoCredentials):
	case errors.Is(err, errDuplicate):
		status = http.StatusBadRequest
		ch += `, error="invalid_request", error_description="` + quoteSafe(err.Error()) + `"`
		msg = "The request must carry one Authorization header."
	case errors.Is(err, errMalformed):
		ch += `, error="invalid_request", error_description="` + quoteSafe(err.Error()) + `"`
		msg = "The Authorization header must carry a bearer token."
	case errors.Is(err, oidcauth.ErrInvalidToken):
		reason := strings.TrimPrefix(err.Error(), oidcauth.ErrInvalidToken.Error()+": ")
		if reason == err.Error() {
			reason = "the token is not valid"
		}
		ch += `, error="invalid_token", error_description="` + quoteSafe(reason) + `"`
		msg = "The bearer token was refused: " + reason + "."
	default:
		ch += `, error="invalid_token", error_description="the token could not be verified"`
	}
	w.Header().Set("WWW-Authenticate", ch)
	writeError(w, status, "UNAUTHORIZED", msg)
}

// quoteSafe keeps an error_description inside its quoted-string: RFC 6750 allows
// %x20-21 / %x23-5B / %x5D-7E.
func quoteSafe(s string) string {
	b := make([]byte, 0, len(s))
	for i := 0; i < len(s); i++ {
		if c := s[i]; c >= 0x20 && c <= 0x7e && c != '"' && c != '\\' {
			b = append(b, c)
		}
	}
	return string(b)
}
