package config

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestServerOIDC(t *testing.T) {
	c, err := loadYAML(t, "server:\n  oidc:\n    issuer: https://idp.example.com\n    audience: baton\n", env{})
	require.NoError(t, err)
	require.NotNil(t, c.Server.OIDC)
	o := c.Server.OIDC.WithDefaults()
	assert.Equal(t, "sub", o.PrincipalClaim)
	assert.Equal(t, []string{"RS256", "ES256"}, o.AllowedAlgs)
	assert.Equal(t, Duration(30*time.Second), o.ClockSkew)

	c, err = loadYAML(t, "server:\n  oidc:\n    issuer: http://127.0.0.1:9400\n    audience: baton\n    allowed_algs: [ES256]\n    clock_skew: 5s\n    client_id: chat\n    principal_claim: email\n", env{})
	require.NoError(t, err)
	assert.Equal(t, OIDC{Issuer: "http://127.0.0.1:9400", Audience: "baton", AllowedAlgs: []string{"ES256"},
		ClockSkew: Duration(5 * time.Second), ClientID: "chat", PrincipalClaim: "email"}, *c.Server.OIDC)

	for _, bad := range []struct{ yaml, field string }{
		{"issuer: http://idp.example.com\n    audience: baton", "server.oidc.issuer"},
		{"issuer: https://idp.example.com", "server.oidc.audience"},
		{"issuer: https://idp.example.com\n    audience: baton\n    allowed_algs: [HS256]", "server.oidc.allowed_algs"},
		{"issuer: https://idp.example.com\n    audience: baton\n    clock_skew: 1h", "server.oidc.clock_skew"},
		{"issuer: https://idp.example.com\n    audience: baton\n    jwks_url: http://10.0.0.1/jwks", "server.oidc.jwks_url"},
	} {
		_, err := loadYAML(t, "server:\n  oidc:\n    "+bad.yaml+"\n", env{})
		require.Error(t, err, bad.field)
		assert.Contains(t, err.Error(), bad.field)
	}
}
