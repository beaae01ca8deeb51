package server

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/baton-dev/baton/signin"
)

// failingDeletes is a store whose grants cannot be deleted (a store outage).
type failingDeletes struct{ signin.Store }

func (failingDeletes) DeleteGrant(context.Context, string, string) error {
	return errors.New("store down: grant at-canary-in-store-error")
}

// TestSignInSecretsCanary: the callback's pages (success and every refusal) and the
// answers of DELETE /agui/connections/{server} hold no state, code, verifier or token, and
// no log line (text or JSON, debug level) holds them or the callback's query string. The
// server keeps no access log; a line with "code=" would be one.
func TestSignInSecretsCanary(t *testing.T) {
	for _, format := range []string{"text", "json"} {
		t.Run(format, func(t *testing.T) { signInCanary(t, format) })
	}
}

func signInCanary(t *testing.T, format string) {
	const (
		accessToken  = "at-canary-7f3e1c"
		refreshToken = "rt-canary-2b9d4a"
		errDetail    = "detail-canary-4c1a"
	)
	// The authorization server's token endpoint: it echoes the code into its error (as a
	// careless one might), and grants the code "code-canary-good".
	as := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_ = r.ParseForm()
		w.Header().Set("Content-Type", "application/json")
		if r.Form.Get("code") != "code-canary-good" {
			w.WriteHeader(http.StatusBadRequest)
			_, _ = w.Write([]byte(`{"error":"invalid_grant","error_description":"bad code ` + r.Form.Get("code") + ` ` + errDetail + `"}`))
			return
		}
		_, _ = w.Write([]byte(`{"access_token":"` + accessToken + `","refresh_token":"` + refreshToken + `","token_type":"Bearer","expires_in":3600}`))
	}))
	defer as.Close()

	var logs bytes.Buffer
	hopts := &slog.HandlerOptions{Level: slog.LevelDebug}
	var lh slog.Handler = slog.NewTextHandler(&logs, hopts)
	if format == "json" {
		lh = slog.NewJSONHandler(&logs, hopts)
	}
	st := signin.NewMemory()
	ctx := context.Background()
	alice, bob := principalOf("tok-a"), principalOf("tok-b")
	cfg := Config{AuthTokens: []string{"tok-a", "tok-b"}, ListenAddr: "127.0.0.1:0", Logger: slog.New(lh), SignIn: &SignIn{
		Store: st, PublicURL: func() string { return "https://baton.example.com" }, Servers: []string{"files"},
		Forget: func(string, string) {}, Ring: testRing(t), HTTPClient: as.Client(),
	}}
	h := New(cfg)

	var secrets []string
	pending := func(state, principal string, expires time.Time, issuer string) {
		t.Helper()
		verifier := "verifier-canary-" + state
		secrets = append(secrets, state, verifier)
		require.NoError(t, st.PutPending(ctx, &signin.Pending{State: state, Principal: principal, Server: "files",
			Verifier: verifier, Issuer: issuer, IssParameterSupported: issuer != "",
			AuthURL: as.URL + "/authorize", RedirectURL: "https://baton.example.com/oauth/callback",
			Grant: signin.Grant{ClientID: "client-1", TokenURL: as.URL + "/token"}, Expires: expires}))
	}
	var bodies []string
	do := func(method, path, token string) *httptest.ResponseRecorder {
		t.Helper()
		rec := httptest.NewRecorder()
		req := httptest.NewRequest(method, "http://127.0.0.1"+path, nil)
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		h.ServeHTTP(rec, req)
		bodies = append(bodies, rec.Body.String())
		return rec
	}
	callback := func(state, code, token string, extra ...string) *httptest.ResponseRecorder {
		t.Helper()
		secrets = append(secrets, code)
		q := url.Values{"state": {state}, "code": {code}}
		for i := 0; i+1 < len(extra); i += 2 {
			q.Set(extra[i], extra[i+1])
		}
		rec := do(http.MethodGet, CallbackPath+"?"+q.Encode(), token)
		assert.Equal(t, "no-referrer", rec.Header().Get("Referrer-Policy"))
		assert.Equal(t, "no-store", rec.Header().Get("Cache-Control"))
		return rec
	}

	// Bad state.
	rec := callback("state-canary-unknown", "code-canary-unknown", "tok-a")
	assert.Equal(t, http.StatusBadRequest, rec.Code)
	assert.Contains(t, rec.Body.String(), "expired or was already completed")
	// Expired.
	pending("state-canary-expired", alice, time.Now().Add(-time.Minute), "")
	rec = callback("state-canary-expired", "code-canary-expired", "tok-a")
	assert.Equal(t, http.StatusBadRequest, rec.Code)
	assert.Contains(t, rec.Body.String(), "expired or was already completed")
	// Another principal's browser.
	pending("state-canary-bob", bob, time.Now().Add(time.Minute), "")
	rec = callback("state-canary-bob", "code-canary-bob", "tok-a")
	assert.Equal(t, http.StatusForbidden, rec.Code)
	assert.Contains(t, rec.Body.String(), "started by another user")
	// A browser that is nobody (no bearer token, no cookie).
	pending("state-canary-nobody", alice, time.Now().Add(time.Minute), "")
	rec = callback("state-canary-nobody", "code-canary-nobody", "")
	assert.Equal(t, http.StatusUnauthorized, rec.Code)
	// Another issuer (a mix-up).
	pending("state-canary-iss", alice, time.Now().Add(time.Minute), as.URL)
	rec = callback("state-canary-iss", "code-canary-iss", "tok-a", "iss", "https://mixup.example")
	assert.Equal(t, http.StatusBadRequest, rec.Code)
	assert.Contains(t, rec.Body.String(), "unexpected authorization server")
	// The authorization server refuses the code, echoing it and more in its error.
	pending("state-canary-refused", alice, time.Now().Add(time.Minute), "")
	rec = callback("state-canary-refused", "code-canary-refused", "tok-a")
	assert.Equal(t, http.StatusBadGateway, rec.Code)
	// Refused at the authorization server, with a description that names the code.
	pending("state-canary-denied", alice, time.Now().Add(time.Minute), "")
	rec = callback("state-canary-denied", "code-canary-denied", "tok-a", "error", "access_denied", "error_description", "code-canary-denied "+errDetail)
	assert.Equal(t, http.StatusOK, rec.Code)
	assert.Contains(t, rec.Body.String(), "(access_denied)")
	// Success.
	pending("state-canary-good", alice, time.Now().Add(time.Minute), "")
	rec = callback("state-canary-good", "code-canary-good", "tok-a")
	require.Equal(t, http.StatusOK, rec.Code, rec.Body.String())
	assert.Contains(t, rec.Body.String(), "Signed in to files")
	g, err := st.Grant(ctx, alice, "files")
	require.NoError(t, err)
	require.Equal(t, accessToken, g.Token.AccessToken, "the grant was stored")
	// Replayed: the state is single use.
	rec = callback("state-canary-good", "code-canary-good", "tok-a")
	assert.Equal(t, http.StatusBadRequest, rec.Code)

	// DELETE /agui/connections/{server}: forgotten, unknown, unauthenticated, store down.
	rec = do(http.MethodDelete, "/agui/connections/files", "tok-a")
	assert.Equal(t, http.StatusNoContent, rec.Code)
	assert.Empty(t, rec.Body.String())
	assert.Equal(t, http.StatusNotFound, do(http.MethodDelete, "/agui/connections/nope", "tok-a").Code)
	assert.Equal(t, http.StatusUnauthorized, do(http.MethodDelete, "/agui/connections/files", "").Code)
	require.NoError(t, st.PutGrant(ctx, bob, "files", &signin.Grant{ClientID: "client-1", TokenURL: as.URL + "/token"}))
	down := cfg
	si := *cfg.SignIn
	si.Store = failingDeletes{st}
	down.SignIn = &si
	rec = httptest.NewRecorder()
	req := httptest.NewRequest(http.MethodDelete, "http://127.0.0.1/agui/connections/files", nil)
	req.Header.Set("Authorization", "Bearer tok-b")
	New(down).ServeHTTP(rec, req)
	bodies = append(bodies, rec.Body.String())
	assert.Equal(t, http.StatusServiceUnavailable, rec.Code)
	assert.Contains(t, rec.Body.String(), `"error":"STORE_UNAVAILABLE"`)
	assert.NotContains(t, rec.Body.String(), "store down", "no internal detail in the answer")

	// Nothing secret anywhere.
	secrets = append(secrets, accessToken, refreshToken, errDetail, "tok-a", "tok-b")
	all := strings.Join(bodies, "\n")
	text := logs.String()
	require.Contains(t, text, "mcp sign-in completed", "the log was captured")
	for _, s := range secrets {
		assert.NotContains(t, all, s, "a page or answer holds a secret")
		assert.NotContains(t, text, s, "a log line holds a secret")
	}
	assert.NotContains(t, text, "code=", "no log line holds the callback's query")
	assert.NotContains(t, text, CallbackPath+"?", "no log line holds the callback's URL")
}
