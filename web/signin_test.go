package web

import (
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"io/fs"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/baton-dev/baton/web/browsertest"
)

// TestSignInPage: with sign-in settings the served page carries the issuer and client id
// (escaped) before any script, its ETag is that of what is served, and every file's
// policy allows connections to the issuer's origin and no other; without them the page and
// the policy are exactly the embedded ones.
func TestSignInPage(t *testing.T) {
	s, err := NewSignIn("https://IdP.example.com:8443/realms/a", `web"<client>&`)
	require.NoError(t, err)
	h := New(Options{SignIn: s})
	wantPolicy := strings.Replace(ContentSecurityPolicy, "connect-src 'self';", "connect-src 'self' https://idp.example.com:8443;", 1)
	require.NotEqual(t, ContentSecurityPolicy, wantPolicy, "the replacement must find connect-src")

	for _, path := range []string{"/", "/index.html", "/app.js", "/oidc.js"} {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest("GET", path, nil))
		require.Equal(t, 200, rec.Code, path)
		assert.Equal(t, wantPolicy, rec.Header().Get("Content-Security-Policy"), path)
		if path == "/" || path == "/index.html" {
			body := rec.Body.String()
			meta := `<meta name="baton-oidc" data-issuer="https://IdP.example.com:8443/realms/a" data-client-id="web&#34;&lt;client&gt;&amp;">`
			assert.Contains(t, body, meta, path)
			assert.Less(t, strings.Index(body, meta), strings.Index(body, "<script"), "the element comes before the script")
			sum := sha256.Sum256(rec.Body.Bytes())
			assert.Equal(t, `"`+hex.EncodeToString(sum[:12])+`"`, rec.Header().Get("ETag"), path)
		}
	}

	index, err := fs.ReadFile(static, "static/index.html")
	require.NoError(t, err)
	rec := httptest.NewRecorder()
	New(Options{}).ServeHTTP(rec, httptest.NewRequest("GET", "/", nil))
	assert.Equal(t, string(index), rec.Body.String(), "without sign-in the page is the embedded file")
	assert.Equal(t, ContentSecurityPolicy, rec.Header().Get("Content-Security-Policy"))
	assert.NotContains(t, rec.Body.String(), "baton-oidc")
}

func TestNewSignInRefuses(t *testing.T) {
	bad := []struct{ issuer, client string }{
		{"", "web"},
		{"ftp://idp.example.com", "web"},
		{"https://idp.example.com?x=1", "web"},
		{"https://idp.example.com#f", "web"},
		{"https://user:pw@idp.example.com", "web"},
		{"https://idp.example.com;script-src", "web"},
		{"https://idp.example.com,x", "web"},
		{"https:///path", "web"},
		{"https://idp.example.com", ""},
		{"https://idp.example.com", "web client"},
		{"https://idp.example.com", "web\n"},
		{"https://idp.example.com", strings.Repeat("a", 256)},
	}
	for _, tt := range bad {
		s, err := NewSignIn(tt.issuer, tt.client)
		assert.Nil(t, s, "%q %q", tt.issuer, tt.client)
		assert.True(t, errors.Is(err, ErrSignIn), "%q %q: %v", tt.issuer, tt.client, err)
	}
	for _, issuer := range []string{"https://idp.example.com", "http://127.0.0.1:9400", "https://[::1]:8443/x/", "https://login.example.com/tenant/v2.0"} {
		s, err := NewSignIn(issuer, "baton-web")
		require.NoError(t, err, issuer)
		assert.NotEmpty(t, s.policy())
	}
	assert.Panics(t, func() { New(Options{SignIn: &SignIn{}}) }, "a SignIn not made by NewSignIn")
}

// TestPageSignInHelpers checks oidc.js's PKCE pieces in the browser: the S256 challenge
// equals SHA-256 then base64url computed here, verifiers are 43 characters of the base64url
// alphabet and differ, and a page served without sign-in settings has none.
func TestPageSignInHelpers(t *testing.T) {
	p := startPage(t, browsertest.Options{})
	p.load()
	verifier := "dBjftJeZ4CVP-mJ92K9kGfn-rSJOXAcKHhyq-2Bu5L_o"
	sum := sha256.Sum256([]byte(verifier))
	want := base64.RawURLEncoding.EncodeToString(sum[:])
	got := eval[string](p, `(async () => { const o = await import('./oidc.js'); return o.codeChallenge(`+"`"+verifier+"`"+`); })()`)
	assert.Equal(t, want, got)
	vs := eval[[]string](p, `(async () => { const o = await import('./oidc.js'); return [o.randomString(32), o.randomString(32), o.base64url(new Uint8Array([251, 255, 191]))]; })()`)
	require.Len(t, vs, 3)
	assert.Regexp(t, `^[A-Za-z0-9_-]{43}$`, vs[0])
	assert.NotEqual(t, vs[0], vs[1])
	assert.Equal(t, "-_-_", vs[2], "base64url, no padding")
	assert.True(t, eval[bool](p, `(async () => { const o = await import('./oidc.js'); return o.signInConfig() === null; })()`))
	assert.Empty(t, p.b.Problems())
}
