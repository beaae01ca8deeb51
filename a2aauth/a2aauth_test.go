package a2aauth

import (
	"context"
	"net/http"
	"net/url"
	"testing"

	sdk "github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/baton-dev/baton/internal/testutil/oauthmcp"
	"github.com/baton-dev/baton/signin"
)

func cardWith(schemes sdk.NamedSecuritySchemes) *sdk.AgentCard {
	return &sdk.AgentCard{Name: "vault", SecuritySchemes: schemes}
}

func TestFlowOf(t *testing.T) {
	ac := sdk.AuthorizationCodeOAuthFlow{AuthorizationURL: "https://as.example/authorize", TokenURL: "https://as.example/token",
		Scopes: map[string]string{"b": "", "a": ""}}
	fl := FlowOf(cardWith(sdk.NamedSecuritySchemes{"o": sdk.OAuth2SecurityScheme{Flows: ac, Oauth2MetadataURL: "https://as.example/.well-known/oauth-authorization-server"}}))
	require.NotNil(t, fl)
	assert.Equal(t, "https://as.example/authorize", fl.AuthorizationURL)
	assert.Equal(t, []string{"a", "b"}, fl.Scopes)
	assert.NotEmpty(t, fl.MetadataURL)

	assert.Nil(t, FlowOf(nil))
	assert.Nil(t, FlowOf(cardWith(nil)), "no scheme: today's 'tell me when done'")
	assert.Nil(t, FlowOf(cardWith(sdk.NamedSecuritySchemes{"o": sdk.OAuth2SecurityScheme{
		Flows: sdk.ClientCredentialsOAuthFlow{TokenURL: "https://as.example/token"}}})), "not an authorization-code flow")
	plain := ac
	plain.AuthorizationURL = "http://as.example/authorize"
	assert.Nil(t, FlowOf(cardWith(sdk.NamedSecuritySchemes{"o": sdk.OAuth2SecurityScheme{Flows: plain}})), "plain http off loopback carries no tokens")
	loop := ac
	loop.AuthorizationURL, loop.TokenURL = "http://127.0.0.1:9/authorize", "http://localhost:9/token"
	assert.NotNil(t, FlowOf(cardWith(sdk.NamedSecuritySchemes{"o": &sdk.OAuth2SecurityScheme{Flows: &loop}})))
}

func TestStartCompleteToken(t *testing.T) {
	as := oauthmcp.New(oauthmcp.Config{})
	defer as.Close()
	st := signin.NewMemory()
	ctx := context.Background()
	const callback = "http://127.0.0.1:1/oauth/callback"
	s := New(Config{Store: st, RedirectURL: func() string { return callback }})
	fl := &Flow{AuthorizationURL: as.Issuer() + "/authorize", TokenURL: as.Issuer() + "/token", Scopes: []string{"vault:read"}}

	_, _, err := s.Start(ctx, "alice", "vault", fl, "th", "int-1")
	require.ErrorIs(t, err, ErrNoClient, "no metadata to register with, no https client metadata document")
	_, _, err = s.Start(ctx, "alice", "vault", nil, "th", "int-1")
	require.ErrorIs(t, err, ErrNoFlow)

	fl.MetadataURL = as.Issuer() + "/.well-known/oauth-authorization-server"
	u, exp, err := s.Start(ctx, "alice", "vault", fl, "th", "int-1")
	require.NoError(t, err)
	assert.False(t, exp.IsZero())
	again, _, err := s.Start(ctx, "alice", "vault", fl, "th", "int-2")
	require.NoError(t, err)
	assert.Equal(t, u, again, "a pending sign-in is reused")
	assert.Equal(t, 1, as.Stats().Registrations)
	pu, err := url.Parse(u)
	require.NoError(t, err)
	assert.Equal(t, "S256", pu.Query().Get("code_challenge_method"))
	assert.Equal(t, callback, pu.Query().Get("redirect_uri"))

	_, ok := s.Token(ctx, "alice", "vault")
	assert.False(t, ok, "not signed in yet")

	hc := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	req, _ := http.NewRequest(http.MethodGet, u, nil)
	req.Header.Set("X-Test-User", "alice-vault")
	resp, err := hc.Do(req)
	require.NoError(t, err)
	resp.Body.Close()
	loc, err := resp.Location()
	require.NoError(t, err)
	p, err := signin.Complete(ctx, st, nil, loc.Query().Get("state"), loc.Query().Get("code"), "", "alice")
	require.NoError(t, err)
	assert.Equal(t, "a2a:vault", p.Server)
	assert.Equal(t, "int-1", p.InterruptID)

	tok, ok := s.Token(ctx, "alice", "vault")
	require.True(t, ok)
	user, valid := as.Verify(tok)
	assert.True(t, valid)
	assert.Equal(t, "alice-vault", user)
	_, ok = s.Token(ctx, "bob", "vault")
	assert.False(t, ok, "grants are per principal")
	_, _, err = s.Start(ctx, "bob", "vault", fl, "th2", "int-3")
	require.NoError(t, err)
	assert.Equal(t, 1, as.Stats().Registrations, "the registration is reused")
}
