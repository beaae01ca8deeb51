package server

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/baton-dev/baton/oidcauth"
)

// stubVerifier accepts "a.good.jwt" as alice and refuses other JWTs as expired.
type stubVerifier struct{}

func (stubVerifier) Verify(_ context.Context, raw string) (*oidcauth.Identity, error) {
	if raw == "a.good.jwt" {
		return &oidcauth.Identity{Principal: oidcauth.Principal("https://idp", "alice")}, nil
	}
	return nil, fmt.Errorf("%w: the token has expired", oidcauth.ErrInvalidToken)
}

func TestBearerChallenges(t *testing.T) {
	t.Parallel()
	h := New(Config{AuthTokens: []string{"static-1"}, OIDC: stubVerifier{}, ListenAddr: "127.0.0.1:0"})
	get := func(auth ...string) *httptest.ResponseRecorder {
		rec := httptest.NewRecorder()
		req := httptest.NewRequest(http.MethodGet, "http://127.0.0.1/agui/threads", nil)
		for _, a := range auth {
			req.Header.Add("Authorization", a)
		}
		h.ServeHTTP(rec, req)
		return rec
	}
	s := &authn{oidc: stubVerifier{}, tokens: [][32]byte{sha256Sum("static-1")}}
	who := func(auth string) string {
		req := httptest.NewRequest(http.MethodGet, "http://127.0.0.1/agui/threads", nil)
		req.Header.Set("Authorization", auth)
		p, err := s.authenticate(req)
		assert.NoError(t, err, auth)
		return p
	}
	assert.Equal(t, principalOf("static-1"), who("Bearer static-1"), "static tokens keep working beside OIDC")
	assert.Equal(t, oidcauth.Principal("https://idp", "alice"), who("Bearer a.good.jwt"))

	rec := get()
	assert.Equal(t, http.StatusUnauthorized, rec.Code)
	assert.Equal(t, `Bearer realm="baton"`, rec.Header().Get("WWW-Authenticate"))

	rec = get("Bearer a.bad.jwt")
	assert.Equal(t, http.StatusUnauthorized, rec.Code)
	assert.Equal(t, `Bearer realm="baton", error="invalid_token", error_description="the token has expired"`, rec.Header().Get("WWW-Authenticate"))
	assert.NotContains(t, rec.Body.String(), "a.bad.jwt")

	rec = get("Bearer not-a-jwt")
	assert.Equal(t, http.StatusUnauthorized, rec.Code)
	assert.Contains(t, rec.Header().Get("WWW-Authenticate"), `error="invalid_token"`)

	rec = get("Bearer static-1", "Bearer a.good.jwt")
	assert.Equal(t, http.StatusBadRequest, rec.Code)
	assert.Contains(t, rec.Header().Get("WWW-Authenticate"), `error="invalid_request"`)
}
