package signin

import (
	"context"
	"crypto"
	"crypto/ecdsa"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/auth"
	"github.com/modelcontextprotocol/go-sdk/oauthex"
	"golang.org/x/oauth2"
	"golang.org/x/oauth2/clientcredentials"
)

// ErrBadServiceConfig is returned by NewServiceHandler's Authorize when the service
// account's credentials cannot be used (no client id, unreadable private key).
var ErrBadServiceConfig = errors.New("signin: bad service account configuration")

// ServiceConfig configures client_credentials sign-in for a server configured as a service
// account (auth.mode: service): one token for every principal, kept in memory.
type ServiceConfig struct {
	// Server is the configured server name (for errors).
	Server string
	// ServerURL is the MCP endpoint (the protected resource).
	ServerURL string
	// ClientID identifies Baton at the authorization server.
	ClientID string
	// ClientSecret authenticates with client_secret_basic or client_secret_post.
	ClientSecret string
	// PrivateKeyPEM, when set, authenticates with private_key_jwt (RFC 7523) instead: a
	// PKCS#8, PKCS#1 or SEC 1 RSA or ECDSA P-256 key.
	PrivateKeyPEM string
	// SigningAlgorithm is the JWS algorithm for private_key_jwt: ES256 or RS256 (from the
	// key when empty).
	SigningAlgorithm string
	// Assertion, when set, is a JWT the platform issued to this workload (workload identity
	// federation): it is presented with the RFC 7523 jwt-bearer grant instead of a secret.
	Assertion string
	// Enterprise, when set, obtains the authorization grant from the enterprise identity
	// provider (enterprise-managed authorization, ID-JAG): an RFC 8693 token exchange of the
	// user's ID token at the IdP, then the jwt-bearer grant at the authorization server,
	// authenticated with ClientID and ClientSecret.
	Enterprise *EnterpriseIDP
	// Scopes are requested when neither the challenge nor the resource metadata names any.
	Scopes []string
	// HTTPClient carries discovery and token requests (see HandlerConfig.HTTPClient).
	HTTPClient *http.Client
	// Now is the clock (time.Now when nil).
	Now func() time.Time
}

// EnterpriseIDP is the enterprise identity provider of enterprise-managed authorization.
type EnterpriseIDP struct {
	// TokenURL is the IdP's token endpoint (RFC 8693 token exchange).
	TokenURL string
	// ClientID and ClientSecret identify Baton at the IdP.
	ClientID, ClientSecret string
	// IDToken is the user's ID token from the IdP (the subject token).
	IDToken string
}

// grantJWTBearer is RFC 7523's authorization grant type.
const grantJWTBearer = "urn:ietf:params:oauth:grant-type:jwt-bearer"

// tokenFunc adapts a function to oauth2.TokenSource.
type tokenFunc func() (*oauth2.Token, error)

func (f tokenFunc) Token() (*oauth2.Token, error) { return f() }

// serviceHandler implements auth.OAuthHandler with the client_credentials grant.
type serviceHandler struct {
	cfg ServiceConfig

	mu       sync.Mutex
	ts       oauth2.TokenSource // nil until the first 401
	scopes   []string
	attempts []time.Time
}

// NewServiceHandler returns a go-sdk auth.OAuthHandler that answers a 401 (or a 403
// insufficient_scope) by discovering the authorization server and requesting a token with
// the client_credentials grant. Unlike go-sdk's extauth handler it is safe for concurrent
// use, refreshes with a context of its own (not the call that first needed it) and supports
// private_key_jwt.
func NewServiceHandler(cfg ServiceConfig) auth.OAuthHandler {
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.HTTPClient == nil {
		cfg.HTTPClient = defaultHTTPClient()
	}
	return &serviceHandler{cfg: cfg}
}

// TokenSource implements auth.OAuthHandler.
func (h *serviceHandler) TokenSource(context.Context) (oauth2.TokenSource, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.ts, nil
}

// Authorize implements auth.OAuthHandler.
func (h *serviceHandler) Authorize(ctx context.Context, req *http.Request, resp *http.Response) error {
	defer resp.Body.Close()
	defer io.Copy(io.Discard, io.LimitReader(resp.Body, maxMetadataBytes))
	if h.cfg.ClientID == "" || (h.cfg.ClientSecret == "" && h.cfg.PrivateKeyPEM == "" && h.cfg.Assertion == "") {
		return fmt.Errorf("%w: client id and a secret, private key or assertion are required", ErrBadServiceConfig)
	}
	if e := h.cfg.Enterprise; e != nil && (e.TokenURL == "" || e.ClientID == "" || e.IDToken == "" || h.cfg.ClientSecret == "") {
		return fmt.Errorf("%w: enterprise authorization needs the IdP token URL, client id, ID token and a client secret", ErrBadServiceConfig)
	}
	challenges, err := oauthex.ParseWWWAuthenticate(resp.Header.Values("WWW-Authenticate"))
	if err != nil {
		return fmt.Errorf("%w: unreadable WWW-Authenticate header", ErrDiscovery)
	}
	if resp.StatusCode == http.StatusForbidden && challengeParam(challenges, "error") != "insufficient_scope" {
		return ErrForbidden
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
	scopes := strings.Fields(challengeParam(challenges, "scope"))
	if len(scopes) == 0 {
		scopes = d.scopes
	}
	if len(scopes) == 0 {
		scopes = h.cfg.Scopes
	}
	h.mu.Lock()
	scopes = union(h.scopes, scopes)
	h.mu.Unlock()

	params := url.Values{}
	if d.resource != "" {
		params.Set("resource", d.resource)
	}
	cc := clientcredentials.Config{ClientID: h.cfg.ClientID, TokenURL: d.asm.TokenEndpoint,
		Scopes: scopes, EndpointParams: params}
	// The source outlives this call: it asks for new tokens with a context of its own.
	bg := context.WithValue(context.WithoutCancel(ctx), oauth2.HTTPClient, h.cfg.HTTPClient)
	var src oauth2.TokenSource
	switch {
	case h.cfg.Enterprise != nil:
		e := h.cfg.Enterprise
		cc.ClientSecret = h.cfg.ClientSecret
		cc.AuthStyle = preferredAuthStyle(d.asm.TokenEndpointAuthMethodsSupported, true)
		cc.EndpointParams.Set("grant_type", grantJWTBearer)
		issuer, resource := d.asm.Issuer, d.resource
		src = tokenFunc(func() (*oauth2.Token, error) {
			// Each access token needs a fresh ID-JAG: it is short-lived and single use.
			jag, err := oauthex.ExchangeToken(bg, e.TokenURL, &oauthex.TokenExchangeRequest{
				RequestedTokenType: oauthex.TokenTypeIDJAG, Audience: issuer, Resource: resource,
				Scope: scopes, SubjectToken: e.IDToken, SubjectTokenType: oauthex.TokenTypeIDToken,
			}, &oauthex.ClientCredentials{ClientID: e.ClientID, ClientSecretAuth: secretAuth(e.ClientSecret)}, h.cfg.HTTPClient)
			if err != nil {
				return nil, err
			}
			c := cc
			c.EndpointParams = url.Values{}
			for k, v := range cc.EndpointParams {
				c.EndpointParams[k] = v
			}
			c.EndpointParams.Set("assertion", jag.AccessToken)
			return c.Token(bg)
		})
	case h.cfg.Assertion != "":
		cc.AuthStyle = oauth2.AuthStyleInParams
		cc.EndpointParams.Set("grant_type", grantJWTBearer)
		cc.EndpointParams.Set("assertion", h.cfg.Assertion)
		src = cc.TokenSource(bg)
	case h.cfg.PrivateKeyPEM != "":
		signer, alg, err := parseSigningKey(h.cfg.PrivateKeyPEM, h.cfg.SigningAlgorithm)
		if err != nil {
			return err
		}
		cc.AuthStyle = oauth2.AuthStyleInParams
		cc.EndpointParams.Set("client_assertion_type", "urn:ietf:params:oauth:client-assertion-type:jwt-bearer")
		aud := d.asm.Issuer
		if aud == "" {
			aud = d.asm.TokenEndpoint
		}
		src = &assertionSource{ctx: bg, cfg: cc, signer: signer, alg: alg, aud: aud, now: h.cfg.Now}
	default:
		cc.ClientSecret = h.cfg.ClientSecret
		cc.AuthStyle = preferredAuthStyle(d.asm.TokenEndpointAuthMethodsSupported, true)
		src = cc.TokenSource(bg)
	}
	ts := oauth2.ReuseTokenSource(nil, src)
	if _, err := ts.Token(); err != nil {
		var re *oauth2.RetrieveError
		if errors.As(err, &re) && re.ErrorCode != "" {
			return fmt.Errorf("%w (%s)", ErrExchange, safeCode(re.ErrorCode))
		}
		return fmt.Errorf("%w: token request failed", ErrExchange)
	}
	h.mu.Lock()
	h.ts, h.scopes = ts, scopes
	h.mu.Unlock()
	return nil
}

func (h *serviceHandler) allowAttempt() bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	now := h.cfg.Now()
	kept := h.attempts[:0]
	for _, t := range h.attempts {
		if now.Sub(t) < DefaultPendingTTL {
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

func secretAuth(secret string) *oauthex.ClientSecretAuth {
	if secret == "" {
		return nil
	}
	return &oauthex.ClientSecretAuth{ClientSecret: secret}
}

// parseSigningKey reads an RSA or ECDSA P-256 private key from PEM.
func parseSigningKey(pemText, alg string) (crypto.Signer, string, error) {
	block, _ := pem.Decode([]byte(pemText))
	if block == nil {
		return nil, "", fmt.Errorf("%w: the private key is not PEM", ErrBadServiceConfig)
	}
	var key any
	var err error
	switch block.Type {
	case "RSA PRIVATE KEY":
		key, err = x509.ParsePKCS1PrivateKey(block.Bytes)
	case "EC PRIVATE KEY":
		key, err = x509.ParseECPrivateKey(block.Bytes)
	default:
		key, err = x509.ParsePKCS8PrivateKey(block.Bytes)
	}
	if err != nil {
		return nil, "", fmt.Errorf("%w: unreadable private key", ErrBadServiceConfig)
	}
	switch k := key.(type) {
	case *ecdsa.PrivateKey:
		if k.Curve.Params().BitSize != 256 || (alg != "" && alg != "ES256") {
			return nil, "", fmt.Errorf("%w: ECDSA keys must be P-256 with ES256", ErrBadServiceConfig)
		}
		return k, "ES256", nil
	case *rsa.PrivateKey:
		if alg != "" && alg != "RS256" {
			return nil, "", fmt.Errorf("%w: RSA keys sign with RS256", ErrBadServiceConfig)
		}
		return k, "RS256", nil
	}
	return nil, "", fmt.Errorf("%w: unsupported private key type", ErrBadServiceConfig)
}

// clientAssertion builds an RFC 7523 client authentication JWT.
func clientAssertion(signer crypto.Signer, alg, clientID, aud string, now time.Time) (string, error) {
	enc := base64.RawURLEncoding
	header, _ := json.Marshal(map[string]string{"alg": alg, "typ": "JWT"})
	claims, _ := json.Marshal(map[string]any{
		"iss": clientID, "sub": clientID, "aud": aud, "jti": rand.Text(),
		"iat": now.Unix(), "exp": now.Add(5 * time.Minute).Unix(),
	})
	input := enc.EncodeToString(header) + "." + enc.EncodeToString(claims)
	sum := sha256.Sum256([]byte(input))
	var sig []byte
	switch k := signer.(type) {
	case *ecdsa.PrivateKey:
		r, s, err := ecdsa.Sign(rand.Reader, k, sum[:])
		if err != nil {
			return "", fmt.Errorf("%w: signing failed", ErrBadServiceConfig)
		}
		sig = make([]byte, 64)
		r.FillBytes(sig[:32])
		s.FillBytes(sig[32:])
	case *rsa.PrivateKey:
		var err error
		sig, err = rsa.SignPKCS1v15(rand.Reader, k, crypto.SHA256, sum[:])
		if err != nil {
			return "", fmt.Errorf("%w: signing failed", ErrBadServiceConfig)
		}
	default:
		return "", fmt.Errorf("%w: unsupported private key type", ErrBadServiceConfig)
	}
	return input + "." + enc.EncodeToString(sig), nil
}

// safeCode keeps an OAuth error code from a peer short and printable before it reaches a
// message.
func safeCode(code string) string {
	if len(code) > 40 {
		code = code[:40]
	}
	return strings.Map(func(r rune) rune {
		if r == '_' || r == '-' || (r >= 'a' && r <= 'z') || (r >= 'A' && r <= 'Z') || (r >= '0' && r <= '9') {
			return r
		}
		return -1
	}, code)
}

// assertionSource requests a client_credentials token with a fresh private_key_jwt
// assertion each time: an assertion is single use and short-lived.
type assertionSource struct {
	ctx    context.Context
	cfg    clientcredentials.Config
	signer crypto.Signer
	alg    string
	aud    string
	now    func() time.Time
}

func (s *assertionSource) Token() (*oauth2.Token, error) {
	a, err := clientAssertion(s.signer, s.alg, s.cfg.ClientID, s.aud, s.now())
	if err != nil {
		return nil, err
	}
	c := s.cfg
	c.EndpointParams = url.Values{}
	for k, v := range s.cfg.EndpointParams {
		c.EndpointParams[k] = v
	}
	c.EndpointParams.Set("client_assertion", a)
	return c.Token(s.ctx)
}
