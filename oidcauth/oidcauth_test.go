package oidcauth

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	jose "github.com/go-jose/go-jose/v4"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// issuerFixture publishes one P-256 key as a JWKS (no discovery: JWKSURL) and counts the
// fetches.
type issuerFixture struct {
	srv     *httptest.Server
	key     *ecdsa.PrivateKey
	kid     atomic.Pointer[string]
	fetches atomic.Int32
}

func newIssuer(t *testing.T) *issuerFixture {
	t.Helper()
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	require.NoError(t, err)
	f := &issuerFixture{key: k}
	f.rotate("k1")
	f.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		f.fetches.Add(1)
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(jose.JSONWebKeySet{Keys: []jose.JSONWebKey{{Key: &k.PublicKey, KeyID: *f.kid.Load(), Algorithm: "ES256", Use: "sig"}}})
	}))
	t.Cleanup(f.srv.Close)
	return f
}

// rotate publishes the key under another key id.
func (f *issuerFixture) rotate(kid string) { f.kid.Store(&kid) }

func (f *issuerFixture) sign(t *testing.T, kid, typ string, claims map[string]any) string {
	t.Helper()
	opts := (&jose.SignerOptions{}).WithHeader("kid", kid)
	if typ != "" {
		opts = opts.WithType(jose.ContentType(typ))
	}
	s, err := jose.NewSigner(jose.SigningKey{Algorithm: jose.ES256, Key: f.key}, opts)
	require.NoError(t, err)
	b, _ := json.Marshal(claims)
	jws, err := s.Sign(b)
	require.NoError(t, err)
	raw, err := jws.CompactSerialize()
	require.NoError(t, err)
	return raw
}

const iss = "https://idp.example.com"

func validClaims(now time.Time) map[string]any {
	return map[string]any{"iss": iss, "aud": "baton", "sub": "alice", "exp": now.Add(time.Minute).Unix(), "iat": now.Unix()}
}

func newVerifier(t *testing.T, f *issuerFixture, now func() time.Time) *Verifier {
	t.Helper()
	v, err := New(context.Background(), Config{Issuer: iss, Audience: "baton", JWKSURL: f.srv.URL,
		AllowedAlgs: []string{"ES256"}, ClockSkew: 10 * time.Second, MinRefetch: time.Hour, Now: now})
	require.NoError(t, err)
	t.Cleanup(v.Close)
	return v
}

func TestVerify(t *testing.T) {
	t.Parallel()
	f := newIssuer(t)
	now := time.Now()
	v := newVerifier(t, f, func() time.Time { return now })
	ctx := context.Background()

	id, err := v.Verify(ctx, f.sign(t, "k1", "at+jwt", validClaims(now)))
	require.NoError(t, err)
	assert.Equal(t, Principal(iss, "alice"), id.Principal)
	assert.NotEqual(t, Principal("https://other.example.com", "alice"), id.Principal, "two issuers never share a principal")

	refuse := func(name, tok, reason string) {
		t.Helper()
		_, err := v.Verify(ctx, tok)
		require.ErrorIs(t, err, ErrInvalidToken, name)
		assert.Contains(t, err.Error(), reason, name)
	}
	refuse("id token (no typ)", f.sign(t, "k1", "", validClaims(now)), "not an access token")
	refuse("typ JWT", f.sign(t, "k1", "JWT", validClaims(now)), "not an access token")
	c := validClaims(now)
	c["aud"] = "tools"
	refuse("audience", f.sign(t, "k1", "at+jwt", c), "another audience")
	c = validClaims(now)
	c["iss"] = "https://evil.example.com"
	refuse("issuer", f.sign(t, "k1", "at+jwt", c), "another issuer")
	c = validClaims(now)
	c["exp"] = now.Add(-11 * time.Second).Unix()
	refuse("expired beyond the skew", f.sign(t, "k1", "at+jwt", c), "expired")
	c["exp"] = now.Add(-5 * time.Second).Unix()
	_, err = v.Verify(ctx, f.sign(t, "k1", "at+jwt", c))
	assert.NoError(t, err, "expired within the skew")
	c = validClaims(now)
	c["nbf"] = now.Add(time.Minute).Unix()
	refuse("not yet valid", f.sign(t, "k1", "at+jwt", c), "not valid yet")
	c = validClaims(now)
	delete(c, "sub")
	refuse("no principal claim", f.sign(t, "k1", "at+jwt", c), "lacks the sub claim")
	refuse("garbage", "a.b.c", "not a signed JWT")
}

// Forged tokens with made-up key ids cost at most one JWKS fetch per MinRefetch: go-oidc
// alone fetches for each.
func TestUnknownKeysDoNotHammerTheProvider(t *testing.T) {
	t.Parallel()
	f := newIssuer(t)
	now := time.Now()
	v := newVerifier(t, f, func() time.Time { return now })
	ctx := context.Background()
	_, err := v.Verify(ctx, f.sign(t, "k1", "at+jwt", validClaims(now)))
	require.NoError(t, err)
	require.Equal(t, int32(1), f.fetches.Load())
	for i := 0; i < 20; i++ {
		_, err := v.Verify(ctx, f.sign(t, rand.Text(), "at+jwt", validClaims(now)))
		require.True(t, errors.Is(err, ErrInvalidToken))
	}
	assert.Equal(t, int32(1), f.fetches.Load(), "unknown kids fetched the JWKS again within MinRefetch")
	// A known key still verifies from the cache.
	_, err = v.Verify(ctx, f.sign(t, "k1", "at+jwt", validClaims(now)))
	require.NoError(t, err)
	// After MinRefetch an unknown kid may fetch again (a rotation is picked up).
	now = now.Add(2 * time.Hour)
	f.rotate("k2")
	k2 := f.sign(t, "k2", "at+jwt", validClaims(now))
	// go-oidc hands a caller that comes right after a failed fetch that fetch's result
	// until its goroutine clears it: the first attempt may still see the refusal.
	require.Eventually(t, func() bool { _, err := v.Verify(ctx, k2); return err == nil }, 10*time.Second, 10*time.Millisecond)
	assert.Equal(t, int32(2), f.fetches.Load())
}

func TestConfigRefusesSymmetricAlgs(t *testing.T) {
	t.Parallel()
	for _, alg := range []string{"HS256", "none"} {
		_, err := New(context.Background(), Config{Issuer: iss, Audience: "baton", JWKSURL: "https://idp.example.com/jwks", AllowedAlgs: []string{alg}})
		require.ErrorIs(t, err, ErrConfig, alg)
	}
}

// TestMaxTokenLifetime: a token that lives longer than MaxTokenLifetime (default 24 h) is
// refused like any invalid one, measured as exp - iat, or exp - now without iat.
func TestMaxTokenLifetime(t *testing.T) {
	t.Parallel()
	f := newIssuer(t)
	now := time.Now()
	v := newVerifier(t, f, func() time.Time { return now })
	ctx := context.Background()
	token := func(iat time.Time, life time.Duration, withIat bool) string {
		c := validClaims(now)
		c["exp"] = iat.Add(life).Unix()
		if withIat {
			c["iat"] = iat.Unix()
		} else {
			delete(c, "iat")
		}
		return f.sign(t, "k1", "at+jwt", c)
	}
	for _, tc := range []struct {
		name string
		tok  string
		ok   bool
	}{
		{"1 h", token(now, time.Hour, true), true},
		{"1 h without iat", token(now, time.Hour, false), true},
		{"24 h, the default bound", token(now, 24*time.Hour, true), true},
		{"10 years", token(now, 10*365*24*time.Hour, true), false},
		{"10 years without iat", token(now, 10*365*24*time.Hour, false), false},
		{"25 h issued 2 h ago (1 h left, but it was issued so)", token(now.Add(-2*time.Hour), 25*time.Hour, true), false},
		{"10 years with iat in the future", token(now.Add(10*365*24*time.Hour-time.Hour), time.Hour, true), false},
	} {
		_, err := v.Verify(ctx, tc.tok)
		if tc.ok {
			assert.NoError(t, err, tc.name)
			continue
		}
		require.ErrorIs(t, err, ErrInvalidToken, tc.name)
		assert.Contains(t, err.Error(), "lives longer", tc.name)
	}

	short, err := New(context.Background(), Config{Issuer: iss, Audience: "baton", JWKSURL: f.srv.URL,
		AllowedAlgs: []string{"ES256"}, MaxTokenLifetime: 30 * time.Minute, MinRefetch: time.Hour, Now: func() time.Time { return now }})
	require.NoError(t, err)
	t.Cleanup(short.Close)
	_, err = short.Verify(ctx, token(now, time.Hour, true))
	require.ErrorIs(t, err, ErrInvalidToken, "the configured bound applies")
	_, err = New(context.Background(), Config{Issuer: iss, Audience: "baton", JWKSURL: f.srv.URL, MaxTokenLifetime: -time.Second})
	require.ErrorIs(t, err, ErrConfig)
}
