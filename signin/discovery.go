package signin

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net"
	"net/http"
	"net/url"
	"slices"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/oauthex"
)

// ErrResourceMismatch is returned when the server's protected resource metadata names a
// resource other than the MCP endpoint: a token for it could be replayed elsewhere, so no
// authorization is requested.
var ErrResourceMismatch = errors.New("signin: protected resource metadata names another resource")

// ErrDiscovery is returned when the server's authorization metadata cannot be used.
var ErrDiscovery = errors.New("signin: authorization discovery failed")

// maxMetadataBytes bounds every metadata document read from a peer.
const maxMetadataBytes = 1 << 20

// discovered is what discovery yields: where to authorize and for which resource.
type discovered struct {
	resource string // RFC 8707 resource parameter
	scopes   []string
	asm      *oauthex.AuthServerMeta
	legacy   bool // 2025-03-26: no protected resource metadata, the MCP origin is the AS
	dpop     bool // the AS issues DPoP-bound tokens with ES256 proofs
}

// asMeta is RFC 8414 metadata with the DPoP field oauthex.AuthServerMeta lacks.
type asMeta struct {
	oauthex.AuthServerMeta
	DPoPSigningAlgValuesSupported []string `json:"dpop_signing_alg_values_supported,omitempty"`
}

// authServerMeta fetches authorization server metadata the way go-sdk's
// auth.GetAuthServerMetadata does (RFC 8414 then OpenID discovery, path-inserted for an
// issuer with a path), with the same checks (issuer match, PKCE advertised, endpoints https
// or loopback), and also returns the DPoP algorithms. nil metadata: none published.
func authServerMeta(ctx context.Context, hc *http.Client, issuer string) (*oauthex.AuthServerMeta, []string, error) {
	iu, err := url.Parse(issuer)
	if err != nil {
		return nil, nil, fmt.Errorf("%w: bad issuer", ErrDiscovery)
	}
	origin := iu.Scheme + "://" + iu.Host
	var urls []string
	if p := strings.Trim(iu.Path, "/"); p == "" {
		urls = []string{origin + "/.well-known/oauth-authorization-server", origin + "/.well-known/openid-configuration"}
	} else {
		urls = []string{origin + "/.well-known/oauth-authorization-server/" + p,
			origin + "/.well-known/openid-configuration/" + p, origin + "/" + p + "/.well-known/openid-configuration"}
	}
	for _, u := range urls {
		var m asMeta
		found, err := getJSON(ctx, hc, u, &m)
		if err != nil {
			return nil, nil, err
		}
		if !found {
			continue
		}
		if !issuersEqual(m.Issuer, issuer) {
			return nil, nil, fmt.Errorf("%w: metadata issuer does not match the authorization server", ErrDiscovery)
		}
		if len(m.CodeChallengeMethodsSupported) == 0 {
			return nil, nil, fmt.Errorf("%w: the authorization server does not implement PKCE", ErrDiscovery)
		}
		if m.AuthorizationEndpoint == "" || m.TokenEndpoint == "" {
			return nil, nil, fmt.Errorf("%w: authorization server metadata lacks endpoints", ErrDiscovery)
		}
		for _, e := range []string{m.AuthorizationEndpoint, m.TokenEndpoint, m.RegistrationEndpoint} {
			if e == "" {
				continue
			}
			if err := checkEndpoint(e); err != nil {
				return nil, nil, fmt.Errorf("%w: authorization server endpoint: %v", ErrDiscovery, err)
			}
		}
		return &m.AuthServerMeta, m.DPoPSigningAlgValuesSupported, nil
	}
	return nil, nil, nil
}

// discover runs protected resource metadata discovery (RFC 9728: the header's URL, then
// path-inserted, then root), then authorization server metadata discovery (RFC 8414 and
// OpenID, path-inserted for issuers with a path). Without protected resource metadata it
// falls back to 2025-03-26: the MCP origin is the authorization server, with default
// endpoints when it publishes no metadata either.
func discover(ctx context.Context, hc *http.Client, serverURL string, challenges []oauthex.Challenge) (*discovered, error) {
	su, err := url.Parse(serverURL)
	if err != nil || (su.Scheme != "http" && su.Scheme != "https") || su.Host == "" {
		return nil, fmt.Errorf("%w: bad server URL", ErrDiscovery)
	}
	var candidates []string
	if u := resourceMetadataFromChallenges(challenges); u != "" {
		candidates = append(candidates, u)
	}
	origin := &url.URL{Scheme: su.Scheme, Host: su.Host}
	if p := strings.Trim(su.Path, "/"); p != "" {
		candidates = append(candidates, origin.String()+"/.well-known/oauth-protected-resource/"+p)
	}
	candidates = append(candidates, origin.String()+"/.well-known/oauth-protected-resource")

	var prm *oauthex.ProtectedResourceMetadata
	for _, c := range candidates {
		var m oauthex.ProtectedResourceMetadata
		// An unusable document counts as absent, as in go-sdk: the next location is tried,
		// and with none the 2025-03-26 fallback applies.
		if found, err := getJSON(ctx, hc, c, &m); err == nil && found {
			prm = &m
			break
		}
	}
	d := &discovered{}
	if prm == nil {
		// 2025-03-26 fallback: the MCP server's origin is the authorization server.
		d.legacy = true
		d.resource = canonicalResource(su)
		asm, err := legacyAuthServerMeta(ctx, hc, origin)
		if err != nil {
			return nil, err
		}
		d.asm = asm
		return d, nil
	}
	if !resourceCovers(prm.Resource, su) {
		return nil, ErrResourceMismatch
	}
	if len(prm.AuthorizationServers) == 0 {
		return nil, fmt.Errorf("%w: protected resource metadata lists no authorization server", ErrDiscovery)
	}
	d.resource = prm.Resource
	d.scopes = prm.ScopesSupported
	issuer := prm.AuthorizationServers[0]
	if err := checkEndpoint(issuer); err != nil {
		return nil, fmt.Errorf("%w: authorization server: %v", ErrDiscovery, err)
	}
	asm, dpopAlgs, err := authServerMeta(ctx, hc, issuer)
	if err != nil {
		return nil, err
	}
	d.dpop = slices.Contains(dpopAlgs, "ES256") || (prm.DPOPBoundAccessTokensRequired && slices.Contains(prm.DPOPSigningAlgValuesSupported, "ES256"))
	if asm == nil {
		iu, _ := url.Parse(issuer)
		base := strings.TrimSuffix(iu.String(), "/")
		asm = &oauthex.AuthServerMeta{Issuer: issuer, AuthorizationEndpoint: base + "/authorize",
			TokenEndpoint: base + "/token", RegistrationEndpoint: base + "/register"}
	}
	d.asm = asm
	return d, nil
}

// legacyAuthServerMeta reads RFC 8414 metadata at the MCP origin, or uses the default
// endpoints /authorize, /token and /register there (2025-03-26). The issuer is not compared
// with the origin: 2025-03-26 servers published issuers with a path on the same origin, and
// every endpoint must still be on that origin, so nothing is sent anywhere else.
func legacyAuthServerMeta(ctx context.Context, hc *http.Client, origin *url.URL) (*oauthex.AuthServerMeta, error) {
	o := origin.String()
	for _, u := range []string{o + "/.well-known/oauth-authorization-server", o + "/.well-known/openid-configuration"} {
		var m oauthex.AuthServerMeta
		found, err := getJSON(ctx, hc, u, &m)
		if err != nil {
			return nil, err
		}
		if !found {
			continue
		}
		for _, e := range []string{m.AuthorizationEndpoint, m.TokenEndpoint, m.RegistrationEndpoint} {
			if e == "" {
				continue
			}
			eu, err := url.Parse(e)
			if err != nil || eu.Scheme != origin.Scheme || eu.Host != origin.Host {
				return nil, fmt.Errorf("%w: authorization endpoint on another origin", ErrDiscovery)
			}
		}
		if m.AuthorizationEndpoint == "" || m.TokenEndpoint == "" {
			return nil, fmt.Errorf("%w: authorization server metadata lacks endpoints", ErrDiscovery)
		}
		return &m, nil
	}
	return &oauthex.AuthServerMeta{Issuer: o, AuthorizationEndpoint: o + "/authorize",
		TokenEndpoint: o + "/token", RegistrationEndpoint: o + "/register"}, nil
}

// canonicalResource is the MCP endpoint as RFC 8707 resource: no fragment, no query.
func canonicalResource(u *url.URL) string {
	c := *u
	c.Fragment, c.RawQuery, c.RawFragment = "", "", ""
	c.Scheme = strings.ToLower(c.Scheme)
	c.Host = strings.ToLower(c.Host)
	return c.String()
}

// resourceCovers reports whether the metadata's resource identifies the MCP endpoint: same
// origin, and its path equal to or a parent of the endpoint's path (RFC 9728 §3.3 as MCP
// clients apply it to root metadata).
func resourceCovers(resource string, server *url.URL) bool {
	ru, err := url.Parse(resource)
	if err != nil || ru.Fragment != "" {
		return false
	}
	if !strings.EqualFold(ru.Scheme, server.Scheme) || !strings.EqualFold(ru.Host, server.Host) {
		return false
	}
	rp := strings.TrimSuffix(ru.Path, "/")
	sp := strings.TrimSuffix(server.Path, "/")
	return rp == "" || rp == sp || strings.HasPrefix(sp, rp+"/")
}

// checkEndpoint refuses URLs that are neither https nor http to loopback.
func checkEndpoint(raw string) error {
	u, err := url.Parse(raw)
	if err != nil {
		return errors.New("bad URL")
	}
	switch u.Scheme {
	case "https":
		return nil
	case "http":
		if isLoopbackHost(u.Hostname()) {
			return nil
		}
	}
	return errors.New("URL is neither https nor http to loopback")
}

func isLoopbackHost(h string) bool {
	if h == "localhost" {
		return true
	}
	ip := net.ParseIP(h)
	return ip != nil && ip.IsLoopback()
}

// getJSON reads one metadata document. found is false for a 4xx answer (not published);
// anything else unusable is an error.
func getJSON(ctx context.Context, hc *http.Client, raw string, v any) (found bool, err error) {
	if err := checkEndpoint(raw); err != nil {
		return false, fmt.Errorf("%w: metadata %v", ErrDiscovery, err)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, raw, nil)
	if err != nil {
		return false, fmt.Errorf("%w: %v", ErrDiscovery, err)
	}
	req.Header.Set("Accept", "application/json")
	resp, err := hc.Do(req)
	if err != nil {
		return false, fmt.Errorf("%w: metadata request failed", ErrDiscovery)
	}
	defer resp.Body.Close()
	defer io.Copy(io.Discard, io.LimitReader(resp.Body, maxMetadataBytes))
	if resp.StatusCode >= 400 && resp.StatusCode < 500 {
		return false, nil
	}
	if resp.StatusCode != http.StatusOK {
		return false, fmt.Errorf("%w: metadata answered HTTP %d", ErrDiscovery, resp.StatusCode)
	}
	if mt, _, err := mime.ParseMediaType(resp.Header.Get("Content-Type")); err != nil || mt != "application/json" {
		return false, fmt.Errorf("%w: metadata is not JSON", ErrDiscovery)
	}
	if err := json.NewDecoder(io.LimitReader(resp.Body, maxMetadataBytes)).Decode(v); err != nil {
		return false, fmt.Errorf("%w: metadata is not valid JSON", ErrDiscovery)
	}
	return true, nil
}

func resourceMetadataFromChallenges(cs []oauthex.Challenge) string {
	for _, c := range cs {
		if u := c.Params["resource_metadata"]; u != "" {
			return u
		}
	}
	return ""
}

func challengeParam(cs []oauthex.Challenge, name string) string {
	for _, c := range cs {
		if c.Scheme == "bearer" && c.Params[name] != "" {
			return c.Params[name]
		}
	}
	return ""
}

// union returns a followed by the members of b not in a.
func union(a, b []string) []string {
	out := slices.Clone(a)
	for _, s := range b {
		if !slices.Contains(out, s) {
			out = append(out, s)
		}
	}
	return out
}
