package main

import (
	"context"
	"time"

	"github.com/baton-dev/baton/internal/config"
	"github.com/baton-dev/baton/internal/egress"
	"github.com/baton-dev/baton/oidcauth"
)

// oidcDiscoveryTimeout bounds the discovery request at start.
const oidcDiscoveryTimeout = 20 * time.Second

// newOIDC builds the verifier of server.oidc. Discovery runs at start: a provider that
// cannot be reached stops the start rather than leaving every signed-in user refused.
// Its requests go through the egress policy of the issuer (private addresses only when
// the issuer or JWKS URL is on one) and never follow a redirect to http.
func newOIDC(ctx context.Context, o config.OIDC) (*oidcauth.Verifier, error) {
	o = o.WithDefaults()
	ctx, cancel := context.WithTimeout(ctx, oidcDiscoveryTimeout)
	defer cancel()
	return oidcauth.New(ctx, oidcauth.Config{
		Issuer: o.Issuer, Audience: o.Audience, PrincipalClaim: o.PrincipalClaim, JWKSURL: o.JWKSURL,
		AllowedAlgs: o.AllowedAlgs, ClockSkew: time.Duration(o.ClockSkew), MaxTokenLifetime: time.Duration(o.MaxTokenLifetime),
		HTTPClient: egress.NewClient(egress.ForPeer(o.Issuer, o.JWKSURL), egress.ClientOptions{Timeout: 15 * time.Second}),
	})
}
