package server

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/baton-dev/baton/internal/seal"
	"github.com/baton-dev/baton/signin"
)

func testRing(t *testing.T) *seal.Ring {
	t.Helper()
	r, err := seal.New(base64.StdEncoding.EncodeToString([]byte(strings.Repeat("k", 32))))
	require.NoError(t, err)
	return r
}

func signInServer(t *testing.T, tokens []string, st signin.Store) (http.Handler, *signInHandler, *[]string) {
	t.Helper()
	var forgot []string
	cfg := Config{AuthTokens: tokens, ListenAddr: "127.0.0.1:0", SignIn: &SignIn{
		Store: st, PublicURL: func() string { return "https://baton.example.com" }, Servers: []string{"files"},
		Forget: func(p, s string) { forgot = append(forgot, p+"/"+s) }, Ring: testRing(t),
	}}
	h := New(cfg)
	s := newSignInHandler(cfg.SignIn, newAuthn(tokens, nil), slog.Default())
	return h, s, &forgot
}

func TestClientMetadataDocument(t *testing.T) {
	h, _, _ := signInServer(t, nil, signin.NewMemory())
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "http://127.0.0.1/oauth/client-metadata.json", nil))
	require.Equal(t, http.StatusOK, rec.Code)
	var doc map[string]any
	require.NoError(t, json.Unmarshal(rec.Body.Bytes(), &doc))
	assert.Equal(t, "https://baton.example.com/oauth/client-metadata.json", doc["client_id"])
	assert.Equal(t, []any{"https://baton.example.com/oauth/callback"}, doc["redirect_uris"])
	assert.Equal(t, "none", doc["token_endpoint_auth_method"])
	assert.Equal(t, []any{"authorization_code", "refresh_token"}, doc["grant_types"])
}

func TestForgetConnection(t *testing.T) {
	st := signin.NewMemory()
	ctx := context.Background()
	h, _, forgot := signInServer(t, []string{"tok-a"}, st)
	alice := principalOf("tok-a")
	require.NoError(t, st.PutGrant(ctx, alice, "files", &signin.Grant{ClientID: "c", TokenURL: "https://as/token"}))
	del := func(path, token string) *httptest.ResponseRecorder {
		rec := httptest.NewRecorder()
		req := httptest.NewRequest(http.MethodDelete, "http://127.0.0.1"+path, nil)
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		h.ServeHTTP(rec, req)
		return rec
	}
	assert.Equal(t, http.StatusUnauthorized, del("/agui/connections/files", "").Code)
	rec := del("/agui/connections/nope", "tok-a")
	assert.Equal(t, http.StatusNotFound, rec.Code)
	assert.Contains(t, rec.Body.String(), `"error":"NOT_FOUND"`)
	assert.Equal(t, http.StatusNoContent, del("/agui/connections/files", "tok-a").Code)
	_, err := st.Grant(ctx, alice, "files")
	assert.ErrorIs(t, err, signin.ErrNoGrant)
	assert.Equal(t, []string{alice + "/files"}, *forgot)
}

// TestSignInCookie: with bearer auth on, the callback learns the browser's principal from
// the sealed cookie a run set; a forged, foreign or expired cookie names nobody.
func TestSignInCookie(t *testing.T) {
	_, s, _ := signInServer(t, []string{"tok-a"}, signin.NewMemory())
	rec := httptest.NewRecorder()
	s.setSignInCookie(rec, httptest.NewRequest(http.MethodPost, "http://127.0.0.1/agui", nil), "alice-hash")
	cookies := rec.Result().Cookies()
	require.Len(t, cookies, 1)
	c := cookies[0]
	assert.Equal(t, signInCookie, c.Name)
	assert.Equal(t, CallbackPath, c.Path)
	assert.True(t, c.HttpOnly)
	assert.True(t, c.Secure, "the public URL is https")
	assert.Equal(t, http.SameSiteLaxMode, c.SameSite)
	assert.NotContains(t, c.Value, "alice-hash")

	req := httptest.NewRequest(http.MethodGet, "http://127.0.0.1/oauth/callback", nil)
	req.AddCookie(c)
	who, ok := s.callbackPrincipal(req)
	assert.True(t, ok)
	assert.Equal(t, "alice-hash", who)

	forged := httptest.NewRequest(http.MethodGet, "http://127.0.0.1/oauth/callback", nil)
	forged.AddCookie(&http.Cookie{Name: signInCookie, Value: base64.RawURLEncoding.EncodeToString([]byte("alice-hash"))})
	_, ok = s.callbackPrincipal(forged)
	assert.False(t, ok)
	none := httptest.NewRequest(http.MethodGet, "http://127.0.0.1/oauth/callback", nil)
	_, ok = s.callbackPrincipal(none)
	assert.False(t, ok)

	s.cfg.CookieTTL = -time.Hour // already expired when set
	rec = httptest.NewRecorder()
	s.setSignInCookie(rec, httptest.NewRequest(http.MethodPost, "http://127.0.0.1/agui", nil), "alice-hash")
	old := httptest.NewRequest(http.MethodGet, "http://127.0.0.1/oauth/callback", nil)
	old.AddCookie(&http.Cookie{Name: signInCookie, Value: rec.Result().Cookies()[0].Value})
	_, ok = s.callbackPrincipal(old)
	assert.False(t, ok, "expired")
}

func TestCallbackRefusals(t *testing.T) {
	h, _, _ := signInServer(t, nil, signin.NewMemory())
	get := func(q string) *httptest.ResponseRecorder {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "http://127.0.0.1/oauth/callback?"+q, nil))
		return rec
	}
	rec := get("state=unknown&code=the-code-1234")
	assert.Equal(t, http.StatusBadRequest, rec.Code)
	assert.Contains(t, rec.Body.String(), "expired or was already completed")
	assert.NotContains(t, rec.Body.String(), "the-code-1234")
	assert.Equal(t, "no-referrer", rec.Header().Get("Referrer-Policy"))
	assert.Equal(t, "no-store", rec.Header().Get("Cache-Control"))
	rec = get("state=x&error=access_denied%3Cscript%3E")
	assert.Equal(t, http.StatusOK, rec.Code)
	assert.Contains(t, rec.Body.String(), "(access_deniedscript)")
	assert.NotContains(t, rec.Body.String(), "<script>")
	rec = get("state=" + strings.Repeat("s", maxCallbackParam+1))
	assert.Equal(t, http.StatusBadRequest, rec.Code)
}

func sha256Sum(tok string) [32]byte { return sha256.Sum256([]byte(tok)) }

// TestCallbackOnlyOwnerEndsSignIn: a pending sign-in is used up only by the principal that
// started it, on the error path too; without credentials or with another principal's, the
// callback refuses and the sign-in stays.
func TestCallbackOnlyOwnerEndsSignIn(t *testing.T) {
	st := signin.NewMemory()
	ctx := context.Background()
	h, _, _ := signInServer(t, []string{"tok-a", "tok-b"}, st)
	alice := principalOf("tok-a")
	require.NoError(t, st.PutPending(ctx, &signin.Pending{State: "st-1", Principal: alice, Server: "files",
		Verifier: "v", Expires: time.Now().Add(time.Hour)}))
	get := func(q, token string) int {
		rec := httptest.NewRecorder()
		req := httptest.NewRequest(http.MethodGet, "http://127.0.0.1/oauth/callback?"+q, nil)
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		h.ServeHTTP(rec, req)
		return rec.Code
	}
	stillPending := func() bool {
		p, err := st.PendingFor(ctx, alice, "files")
		require.NoError(t, err)
		return p != nil
	}
	assert.Equal(t, http.StatusUnauthorized, get("state=st-1&error=access_denied", ""))
	assert.True(t, stillPending(), "an anonymous error callback used up the sign-in")
	assert.Equal(t, http.StatusForbidden, get("state=st-1&error=access_denied", "tok-b"))
	assert.True(t, stillPending(), "another principal's error callback used up the sign-in")
	assert.Equal(t, http.StatusForbidden, get("state=st-1&code=c", "tok-b"))
	assert.True(t, stillPending(), "another principal's callback used up the sign-in")
	assert.Equal(t, http.StatusOK, get("state=st-1&error=access_denied", "tok-a"))
	assert.False(t, stillPending(), "the owner's error callback left the sign-in pending")
}
