package tokenexchange

import (
	"container/list"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync"
	"time"

	"golang.org/x/oauth2"
	"golang.org/x/oauth2/clientcredentials"
)

// RFC 8693 identifiers.
const (
	GrantType            = "urn:ietf:params:oauth:grant-type:token-exchange"
	TokenTypeAccessToken = "urn:ietf:params:oauth:token-type:access_token"
	// TokenTypeJWT (RFC 8693 §3) is the subject token's type: the inbound token Baton
	// verified is a JWT, and that is the claim the authorization server can check.
	TokenTypeJWT = "urn:ietf:params:oauth:token-type:jwt"
)

// Defaults.
const (
	// DefaultMaxEntries bounds the cache.
	DefaultMaxEntries = 10000
	// DefaultMargin is how long before its expiry a cached token is no longer handed out
	// (it must still be valid when the peer checks it).
	DefaultMargin = 30 * time.Second
	// DefaultTimeout bounds one exchange request.
	DefaultTimeout = 15 * time.Second
)

// ErrExchange is wrapped by every error of Token.
var ErrExchange = errors.New("token exchange failed")

// ErrNoSubject: Baton holds no live token of the user to exchange (a static-token or
// anonymous principal, a token that expired, or a user who never signed in with OIDC).
var ErrNoSubject = fmt.Errorf("%w: no identity-provider token for this user", ErrExchange)

// ErrRefused: the authorization server answered with an OAuth error.
var ErrRefused = fmt.Errorf("%w: the authorization server refused the exchange", ErrExchange)

// ErrUnavailable: the authorization server could not be reached or answered nonsense, or
// the subject tokens could not be read.
var ErrUnavailable = fmt.Errorf("%w: the authorization server could not be reached", ErrExchange)

// ErrRedirected: the token endpoint answered with a redirect. It is never followed: the
// request carries the user's token (subject_token) and the client's secret, and a redirect
// would re-send both to wherever it points.
var ErrRedirected = fmt.Errorf("%w: the token endpoint redirected the request, which is never followed", ErrExchange)

// Subjects hands out the principal's stored inbound access token; its error wraps
// ErrNoSubject (any error of the same meaning: tokenstore.ErrNoSubject is mapped by the
// caller's adapter) when there is none.
type Subjects interface {
	Subject(ctx context.Context, principal string) (string, error)
}

// Target is one peer's exchange settings (config auth: {mode: exchange, ...}).
type Target struct {
	// Name names the peer in logs (never a token).
	Name         string
	TokenURL     string
	Audience     string
	Scopes       []string
	ClientID     string
	ClientSecret string
	// HTTPClient carries the request (the peer's egress policy); default http.DefaultClient.
	HTTPClient *http.Client
}

// Config configures an Exchanger.
type Config struct {
	Subjects   Subjects
	MaxEntries int
	Margin     time.Duration
	Timeout    time.Duration
	Now        func() time.Time
	Logger     *slog.Logger
}

// Exchanger exchanges users' tokens and caches the results. It is safe for concurrent use.
type Exchanger struct {
	cfg Config

	mu      sync.Mutex
	entries map[cacheKey]*list.Element
	lru     *list.List // of *entry, most recently used first
	// exchanges counts requests sent to authorization servers (tests and metrics).
	exchanges int64
}

type cacheKey struct{ principal, tokenURL, audience, clientID, scopes string }

type entry struct {
	key    cacheKey
	token  string
	usable time.Time // handed out until then
}

// New returns an Exchanger.
func New(cfg Config) *Exchanger {
	if cfg.MaxEntries <= 0 {
		cfg.MaxEntries = DefaultMaxEntries
	}
	if cfg.Margin <= 0 {
		cfg.Margin = DefaultMargin
	}
	if cfg.Timeout <= 0 {
		cfg.Timeout = DefaultTimeout
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	return &Exchanger{cfg: cfg, entries: map[cacheKey]*list.Element{}, lru: list.New()}
}

// Exchanges returns how many exchange requests were sent.
func (x *Exchanger) Exchanges() int64 {
	x.mu.Lock()
	defer x.mu.Unlock()
	return x.exchanges
}

// Token returns an access token for t that carries principal's identity: a cached one, or
// one obtained by exchanging principal's stored subject token. Errors wrap ErrNoSubject,
// ErrRefused or ErrUnavailable and hold no token material.
func (x *Exchanger) Token(ctx context.Context, principal string, t *Target) (string, error) {
	if principal == "" {
		return "", ErrNoSubject
	}
	k := cacheKey{principal: principal, tokenURL: t.TokenURL, audience: t.Audience, clientID: t.ClientID, scopes: strings.Join(sorted(t.Scopes), " ")}
	if tok, ok := x.cached(k); ok {
		return tok, nil
	}
	if x.cfg.Subjects == nil {
		return "", ErrNoSubject
	}
	subject, err := x.cfg.Subjects.Subject(ctx, principal)
	if err != nil {
		if errors.Is(err, ErrNoSubject) {
			return "", err
		}
		x.cfg.Logger.Warn("token exchange: the stored subject token could not be read", "peer", t.Name, "err", err)
		return "", fmt.Errorf("%w (store)", ErrUnavailable)
	}
	tok, err := x.exchange(ctx, subject, t)
	if err != nil {
		return "", err
	}
	if !tok.Expiry.IsZero() {
		x.put(k, tok.AccessToken, tok.Expiry)
	}
	return tok.AccessToken, nil
}

// exchange sends one RFC 8693 request.
func (x *Exchanger) exchange(ctx context.Context, subject string, t *Target) (*oauth2.Token, error) {
	x.mu.Lock()
	x.exchanges++
	x.mu.Unlock()
	params := url.Values{
		"grant_type":           {GrantType},
		"subject_token":        {subject},
		"subject_token_type":   {TokenTypeJWT},
		"requested_token_type": {TokenTypeAccessToken},
	}
	if t.Audience != "" {
		params.Set("audience", t.Audience)
	}
	cc := clientcredentials.Config{
		ClientID: t.ClientID, ClientSecret: t.ClientSecret, TokenURL: t.TokenURL, Scopes: t.Scopes,
		EndpointParams: params,
		// Basic authentication (RFC 6749 §2.3.1 MUST): auto-detection would send a refused
		// request twice.
		AuthStyle: oauth2.AuthStyleInHeader,
	}
	ctx, cancel := context.WithTimeout(context.WithValue(ctx, oauth2.HTTPClient, noRedirects(t.HTTPClient)), x.cfg.Timeout)
	defer cancel()
	tok, err := cc.Token(ctx)
	if err != nil {
		if errors.Is(err, errRedirect) {
			x.cfg.Logger.Warn("token exchange: the token endpoint answered with a redirect, not followed", "peer", t.Name)
			return nil, ErrRedirected
		}
		var re *oauth2.RetrieveError
		if errors.As(err, &re) && re.ErrorCode != "" {
			x.cfg.Logger.Info("token exchange refused", "peer", t.Name, "error", safeCode(re.ErrorCode))
			return nil, fmt.Errorf("%w (%s)", ErrRefused, safeCode(re.ErrorCode))
		}
		if ctx.Err() != nil && errors.Is(err, context.Canceled) {
			return nil, err
		}
		x.cfg.Logger.Warn("token exchange failed", "peer", t.Name, "status", status(re))
		return nil, ErrUnavailable
	}
	if tok.AccessToken == "" {
		return nil, fmt.Errorf("%w (no access token in the answer)", ErrUnavailable)
	}
	return tok, nil
}

// errRedirect is what the exchange's client answers a redirect with.
var errRedirect = errors.New("redirect not followed")

// noRedirects returns a copy of hc (default http.DefaultClient) that follows no redirect:
// the request's body holds the subject token and its header the client secret. The
// peer's client itself is left as it is (it may carry other requests).
func noRedirects(hc *http.Client) *http.Client {
	if hc == nil {
		hc = http.DefaultClient
	}
	c := *hc
	c.CheckRedirect = func(*http.Request, []*http.Request) error { return errRedirect }
	return &c
}

func status(re *oauth2.RetrieveError) int {
	if re == nil || re.Response == nil {
		return 0
	}
	return re.Response.StatusCode
}

// cached returns a usable cached token and marks it recently used.
func (x *Exchanger) cached(k cacheKey) (string, bool) {
	x.mu.Lock()
	defer x.mu.Unlock()
	el, ok := x.entries[k]
	if !ok {
		return "", false
	}
	e := el.Value.(*entry)
	if !x.cfg.Now().Before(e.usable) {
		x.lru.Remove(el)
		delete(x.entries, k)
		return "", false
	}
	x.lru.MoveToFront(el)
	return e.token, true
}

// put caches a token until margin before expiry (or half its remaining life, when that is
// shorter than the margin), evicting the least recently used entry beyond MaxEntries.
func (x *Exchanger) put(k cacheKey, token string, expiry time.Time) {
	now := x.cfg.Now()
	margin := x.cfg.Margin
	if life := expiry.Sub(now); life < 2*margin {
		margin = life / 2
	}
	usable := expiry.Add(-margin)
	if !now.Before(usable) {
		return
	}
	x.mu.Lock()
	defer x.mu.Unlock()
	if el, ok := x.entries[k]; ok {
		e := el.Value.(*entry)
		e.token, e.usable = token, usable
		x.lru.MoveToFront(el)
		return
	}
	x.entries[k] = x.lru.PushFront(&entry{key: k, token: token, usable: usable})
	for x.lru.Len() > x.cfg.MaxEntries {
		old := x.lru.Back()
		x.lru.Remove(old)
		delete(x.entries, old.Value.(*entry).key)
	}
}

// Forget drops principal's cached tokens (the user signed out or their token was refused
// downstream).
func (x *Exchanger) Forget(principal string) {
	x.mu.Lock()
	defer x.mu.Unlock()
	for k, el := range x.entries {
		if k.principal == principal {
			x.lru.Remove(el)
			delete(x.entries, k)
		}
	}
}

// Len returns the number of cached tokens.
func (x *Exchanger) Len() int {
	x.mu.Lock()
	defer x.mu.Unlock()
	return x.lru.Len()
}

func sorted(s []string) []string {
	s = slices.Clone(s)
	slices.Sort(s)
	return s
}

// safeCode keeps an OAuth error code to its defined alphabet (RFC 6749 §5.2: %x20-21 /
// %x23-5B / %x5D-7E), shortened: it is shown to the model and logged.
func safeCode(s string) string {
	var b strings.Builder
	for _, r := range s {
		if b.Len() >= 64 {
			break
		}
		if (r >= 'a' && r <= 'z') || (r >= 'A' && r <= 'Z') || (r >= '0' && r <= '9') || r == '_' || r == '-' || r == '.' {
			b.WriteRune(r)
		}
	}
	if b.Len() == 0 {
		return "error"
	}
	return b.String()
}
