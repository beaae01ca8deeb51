package config

import (
	"net/url"
	"slices"
	"time"
)

// OIDC defaults (server.oidc), in one place.
const (
	// DefaultPrincipalClaim is the claim that names the user.
	DefaultPrincipalClaim = "sub"
	// DefaultOIDCClockSkew is the leeway on exp and nbf.
	DefaultOIDCClockSkew = Duration(30 * time.Second)
	// MaxOIDCClockSkew bounds clock_skew: more would keep expired tokens alive.
	MaxOIDCClockSkew = Duration(5 * time.Minute)
)

// DefaultAllowedAlgs are the signature algorithms accepted when allowed_algs is empty.
var DefaultAllowedAlgs = []string{"RS256", "ES256"}

// asymmetricAlgs are the JWS algorithms allowed_algs may name (RFC 8725 §3.1: never an
// HMAC keyed with a public key, never none).
var asymmetricAlgs = []string{"RS256", "RS384", "RS512", "PS256", "PS384", "PS512", "ES256", "ES384", "ES512", "EdDSA"}

// OIDC configures users signed in with an OpenID provider: bearer JWTs verified against
// the issuer's discovery document and JWKS (DESIGN §4).
type OIDC struct {
	// Issuer is the provider's issuer URL (https, or http to loopback for tests).
	Issuer string `yaml:"issuer"`
	// Audience must be among the token's aud values.
	Audience string `yaml:"audience"`
	// PrincipalClaim names the user's claim (default DefaultPrincipalClaim); the principal
	// is the issuer plus this claim.
	PrincipalClaim string `yaml:"principal_claim"`
	// JWKSURL, when set, replaces discovery's jwks_uri.
	JWKSURL string `yaml:"jwks_url"`
	// AllowedAlgs are the accepted signature algorithms (default DefaultAllowedAlgs).
	AllowedAlgs []string `yaml:"allowed_algs"`
	// ClockSkew is the leeway on exp and nbf (default DefaultOIDCClockSkew).
	ClockSkew Duration `yaml:"clock_skew"`
	// ClientID is the public client the chat page signs in with (authorization code with
	// PKCE); empty: the page does not sign in by itself.
	ClientID string `yaml:"client_id"`
	// MaxTokenLifetime refuses tokens that live longer (exp - iat, or exp - now without
	// iat); default DefaultOIDCMaxTokenLifetime.
	MaxTokenLifetime Duration `yaml:"max_token_lifetime"`
}

// WithDefaults returns o with its defaults filled in.
func (o OIDC) WithDefaults() OIDC {
	if o.PrincipalClaim == "" {
		o.PrincipalClaim = DefaultPrincipalClaim
	}
	if len(o.AllowedAlgs) == 0 {
		o.AllowedAlgs = slices.Clone(DefaultAllowedAlgs)
	}
	if o.ClockSkew == 0 {
		o.ClockSkew = DefaultOIDCClockSkew
	}
	if o.MaxTokenLifetime == 0 {
		o.MaxTokenLifetime = DefaultOIDCMaxTokenLifetime
	}
	return o
}

// isIssuerURL: https, or http to a loopback host.
func isIssuerURL(s string) bool {
	u, err := url.Parse(s)
	if err != nil || u.Host == "" || u.RawQuery != "" || u.Fragment != "" {
		return false
	}
	switch u.Scheme {
	case "https":
		return true
	case "http":
		h := u.Hostname()
		return h == "localhost" || h == "127.0.0.1" || h == "::1"
	}
	return false
}
