// Package oidcauth verifies the bearer JWTs of users signed in with an OpenID provider
// (server.oidc): signature against the issuer's JWKS (found by discovery, cached, fetched
// again on an unknown key at most once per MinRefetch), iss, aud, exp and nbf with a
// bounded clock skew, an allowed asymmetric algorithm, and typ at+jwt (RFC 9068: an ID
// token is not an access token). The JOSE work is go-oidc's and go-jose's.
package oidcauth

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/coreos/go-oidc/v3/oidc"
	jose "github.com/go-jose/go-jose/v4"
)

// ErrInvalidToken is wrapped by every refusal of Verify. Its text after the prefix is a
// short reason fit for error_description: it names no claim value of the token.
var ErrInvalidToken = errors.New("invalid token")

// ErrConfig is returned by New for an unusable configuration.
var ErrConfig = errors.New("oidcauth: bad configuration")

// asymmetric are the algorithms a verifier may allow: an HMAC key would be the issuer's
// public key, which anyone has (RFC 8725 §3.1), and "none" is never allowed.
var asymmetric = []string{"RS256", "RS384", "RS512", "PS256", "PS384", "PS512", "ES256", "ES384", "ES512", "EdDSA"}

// Defaults.
const (
	DefaultPrincipalClaim = "sub"
	DefaultClockSkew      = 30 * time.Second
	// MaxClockSkew bounds clock_skew: more would keep expired tokens alive.
	MaxClockSkew = 5 * time.Minute
	// DefaultMinRefetch is how often at most an unknown key id makes the JWKS be fetched
	// again (go-oidc fetches on every unknown kid: forged tokens would each cost a fetch).
	DefaultMinRefetch = 10 * time.Second
	// DefaultMaxTokenLifetime bounds how long a token may live (exp - iat): a token
	// that lives for years is kept as the user's exchange subject and cannot be
	// taken back.
	DefaultMaxTokenLifetime = 24 * time.Hour
)

// Config configures a Verifier.
type Config struct {
	// Issuer is the provider's issuer URL; discovery reads <Issuer>/.well-known/openid-configuration.
	Issuer string
	// Audience must be one of the token's aud values.
	Audience string
	// PrincipalClaim names the claim that identifies the user (default "sub").
	PrincipalClaim string
	// JWKSURL, when set, is used instead of discovery's jwks_uri (no discovery request).
	JWKSURL string
	// AllowedAlgs are the accepted signature algorithms (default RS256 and ES256); only
	// asymmetric ones are allowed.
	AllowedAlgs []string
	// ClockSkew is the leeway on exp and nbf (default 30 s, at most 5 min).
	ClockSkew time.Duration
	// MaxTokenLifetime refuses a token that lives longer: exp - iat, and exp - now (the
	// latter with ClockSkew's leeway, and the only check for a token without iat).
	// Default DefaultMaxTokenLifetime.
	MaxTokenLifetime time.Duration
	// MinRefetch is the least time between two JWKS fetches (default DefaultMinRefetch).
	MinRefetch time.Duration
	// HTTPClient carries discovery and JWKS requests (default: a client with a timeout).
	HTTPClient *http.Client
	// Now is the clock (time.Now when nil).
	Now func() time.Time
}

// Identity is a verified token's user.
type Identity struct {
	// Principal is Baton's name for the user: a hash of issuer and claim, so that two
	// issuers never share a principal and no personal data sits in keys or logs.
	Principal string
	Issuer    string
	Subject   string
	Expiry    time.Time
}

// Verifier verifies access tokens. It is safe for concurrent use.
type Verifier struct {
	cfg  Config
	v    *oidc.IDTokenVerifier
	algs []jose.SignatureAlgorithm
	hc   *http.Client
}

// New discovers the provider (unless JWKSURL is set) and returns a Verifier. ctx bounds
// discovery only.
func New(ctx context.Context, cfg Config) (*Verifier, error) {
	if cfg.Issuer == "" || cfg.Audience == "" {
		return nil, fmt.Errorf("%w: issuer and audience are required", ErrConfig)
	}
	if cfg.PrincipalClaim == "" {
		cfg.PrincipalClaim = DefaultPrincipalClaim
	}
	if len(cfg.AllowedAlgs) == 0 {
		cfg.AllowedAlgs = []string{"RS256", "ES256"}
	}
	for _, a := range cfg.AllowedAlgs {
		if !slices.Contains(asymmetric, a) {
			return nil, fmt.Errorf("%w: algorithm %q is not an asymmetric JWS algorithm", ErrConfig, a)
		}
	}
	if cfg.ClockSkew < 0 || cfg.ClockSkew > MaxClockSkew {
		return nil, fmt.Errorf("%w: clock skew must be between 0 and %s", ErrConfig, MaxClockSkew)
	}
	if cfg.MinRefetch <= 0 {
		cfg.MinRefetch = DefaultMinRefetch
	}
	if cfg.MaxTokenLifetime < 0 {
		return nil, fmt.Errorf("%w: the maximum token lifetime must not be negative", ErrConfig)
	}
	if cfg.MaxTokenLifetime == 0 {
		cfg.MaxTokenLifetime = DefaultMaxTokenLifetime
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.HTTPClient == nil {
		cfg.HTTPClient = &http.Client{Timeout: 15 * time.Second}
	}
	jwksURL := cfg.JWKSURL
	if jwksURL == "" {
		p, err := oidc.NewProvider(oidc.ClientContext(ctx, cfg.HTTPClient), cfg.Issuer)
		if err != nil {
			return nil, fmt.Errorf("oidcauth: discovery at %s: %w", cfg.Issuer, err)
		}
		var d struct {
			JWKSURL string `json:"jwks_uri"`
		}
		if err := p.Claims(&d); err != nil || d.JWKSURL == "" {
			return nil, fmt.Errorf("oidcauth: discovery at %s names no jwks_uri", cfg.Issuer)
		}
		jwksURL = d.JWKSURL
	}
	lim := &limiter{next: cfg.HTTPClient.Transport, url: jwksURL, every: cfg.MinRefetch, now: cfg.Now}
	if lim.next == nil {
		lim.next = http.DefaultTransport
	}
	hc := &http.Client{Transport: lim, Timeout: cfg.HTTPClient.Timeout, CheckRedirect: cfg.HTTPClient.CheckRedirect}
	// The key set lives as long as the verifier: its context must not be ctx.
	keys := oidc.NewRemoteKeySet(oidc.ClientContext(context.Background(), hc), jwksURL)
	v := oidc.NewVerifier(cfg.Issuer, keys, &oidc.Config{
		ClientID: cfg.Audience, SupportedSigningAlgs: cfg.AllowedAlgs,
		// exp and nbf are checked here with the configured skew: go-oidc has none on exp.
		SkipExpiryCheck: true,
	})
	algs := make([]jose.SignatureAlgorithm, len(cfg.AllowedAlgs))
	for i, a := range cfg.AllowedAlgs {
		algs[i] = jose.SignatureAlgorithm(a)
	}
	return &Verifier{cfg: cfg, v: v, algs: algs, hc: hc}, nil
}

// Close releases idle connections.
func (v *Verifier) Close() { v.hc.CloseIdleConnections() }

// Issuer is the configured issuer.
func (v *Verifier) Issuer() string { return v.cfg.Issuer }

// LooksLikeJWT reports whether tok has the shape of a compact JWS (three dot-separated
// parts), so that a static token is never sent through JWT verification.
func LooksLikeJWT(tok string) bool { return strings.Count(tok, ".") == 2 }

func invalid(reason string) error { return fmt.Errorf("%w: %s", ErrInvalidToken, reason) }

// Verify checks raw and returns its user. Every refusal wraps ErrInvalidToken with a
// reason that carries nothing of the token.
func (v *Verifier) Verify(ctx context.Context, raw string) (*Identity, error) {
	jws, err := jose.ParseSigned(raw, v.algs)
	if err != nil {
		if strings.Contains(err.Error(), "algorithm") {
			return nil, invalid("the signature algorithm is not allowed")
		}
		return nil, invalid("the token is not a signed JWT")
	}
	if len(jws.Signatures) != 1 {
		return nil, invalid("the token is not a signed JWT")
	}
	// RFC 9068 §4: an access token says typ at+jwt; an ID token for the same audience
	// must not pass as one.
	typ, _ := jws.Signatures[0].Header.ExtraHeaders[jose.HeaderType].(string)
	if t := strings.ToLower(typ); t != "at+jwt" && t != "application/at+jwt" {
		return nil, invalid("the token is not an access token (typ)")
	}
	// A token of another issuer is refused before its signature is checked: its unknown
	// key would otherwise cost a JWKS fetch. (The claim is unverified here; it only
	// decides a refusal.)
	var unverified struct {
		Iss string `json:"iss"`
	}
	if err := json.Unmarshal(jws.UnsafePayloadWithoutVerification(), &unverified); err != nil {
		return nil, invalid("the token's claims are unreadable")
	}
	if unverified.Iss != v.cfg.Issuer {
		return nil, invalid("the token was issued by another issuer")
	}
	tok, err := v.v.Verify(ctx, raw)
	if err != nil {
		var ie *oidc.TokenExpiredError
		switch msg := err.Error(); {
		case errors.As(err, &ie):
			return nil, invalid("the token has expired")
		case strings.Contains(msg, "different provider"):
			return nil, invalid("the token was issued by another issuer")
		case strings.Contains(msg, "audience"):
			return nil, invalid("the token is meant for another audience")
		case strings.Contains(msg, "signature"), strings.Contains(msg, "key"):
			return nil, invalid("the signature could not be verified")
		default:
			return nil, invalid("the token could not be verified")
		}
	}
	var c map[string]any
	if err := tok.Claims(&c); err != nil {
		return nil, invalid("the token's claims are unreadable")
	}
	now := v.cfg.Now()
	exp, ok := numeric(c["exp"])
	if !ok {
		return nil, invalid("the token has no expiry")
	}
	if !now.Before(exp.Add(v.cfg.ClockSkew)) {
		return nil, invalid("the token has expired")
	}
	if nbf, ok := numeric(c["nbf"]); ok && now.Add(v.cfg.ClockSkew).Before(nbf) {
		return nil, invalid("the token is not valid yet")
	}
	if v.tooLong(c, exp, now) {
		return nil, invalid("the token lives longer than this server accepts")
	}
	who, _ := c[v.cfg.PrincipalClaim].(string)
	if who == "" {
		return nil, invalid("the token lacks the " + v.cfg.PrincipalClaim + " claim")
	}
	return &Identity{Principal: Principal(tok.Issuer, who), Issuer: tok.Issuer, Subject: tok.Subject, Expiry: exp}, nil
}

// tooLong reports whether a token expiring at exp lives longer than MaxTokenLifetime: as
// issued (exp - iat), or from now on (exp - now, which also catches an iat set in the
// future to shorten the first difference).
func (v *Verifier) tooLong(c map[string]any, exp, now time.Time) bool {
	if exp.Sub(now) > v.cfg.MaxTokenLifetime+v.cfg.ClockSkew {
		return true
	}
	iat, ok := numeric(c["iat"])
	return ok && exp.Sub(iat) > v.cfg.MaxTokenLifetime
}

// Principal is the principal of (issuer, claim value): length-prefixed before hashing so
// that no two pairs meet, prefixed so that it never equals a static token's principal
// (16 hex digits).
func Principal(issuer, claim string) string {
	h := sha256.New()
	var n [8]byte
	binary.BigEndian.PutUint64(n[:], uint64(len(issuer)))
	h.Write(n[:])
	h.Write([]byte(issuer))
	h.Write([]byte(claim))
	return "oidc-" + hex.EncodeToString(h.Sum(nil)[:16])
}

func numeric(v any) (time.Time, bool) {
	f, ok := v.(float64)
	if !ok {
		return time.Time{}, false
	}
	return time.Unix(int64(f), 0), true
}

// limiter lets the JWKS be fetched at most once per every: go-oidc's key set fetches again
// for every token with an unknown kid, so forged tokens would each cost a request to the
// provider. A fetch refused here fails that token's verification; the next one after the
// interval fetches.
type limiter struct {
	next  http.RoundTripper
	url   string
	every time.Duration
	now   func() time.Time

	mu   sync.Mutex
	last time.Time
}

// errRefetchLimited refuses a JWKS fetch that comes too soon after the last one.
var errRefetchLimited = errors.New("oidcauth: JWKS fetched too recently")

func (l *limiter) RoundTrip(r *http.Request) (*http.Response, error) {
	if r.URL.String() == l.url {
		l.mu.Lock()
		now := l.now()
		if !l.last.IsZero() && now.Sub(l.last) < l.every {
			l.mu.Unlock()
			return nil, errRefetchLimited
		}
		l.last = now
		l.mu.Unlock()
	}
	return l.next.RoundTrip(r)
}
