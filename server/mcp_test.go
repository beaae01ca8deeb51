package server

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/baton-dev/baton/internal/principal"
	"github.com/baton-dev/baton/oidcauth"
)

// echoPrincipal stands for the MCP handler: it answers the principal it was given and the
// size of the body it could read.
var echoPrincipal = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
	who, ok := principal.From(r.Context())
	n, _ := io.Copy(io.Discard, r.Body)
	_ = json.NewEncoder(w).Encode(map[string]any{"who": who, "ok": ok, "n": n})
})

func TestMCPBehindAuthWithResourceMetadata(t *testing.T) {
	t.Parallel()
	h := New(Config{AuthTokens: []string{"static-1"}, OIDC: stubVerifier{}, ListenAddr: "127.0.0.1:0",
		MCP: echoPrincipal, MCPIssuer: "https://idp.example.com", MaxBodyBytes: 100})
	post := func(auth, body string) *httptest.ResponseRecorder {
		rec := httptest.NewRecorder()
		req := httptest.NewRequest(http.MethodPost, "http://127.0.0.1:8080/mcp", strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		if auth != "" {
			req.Header.Set("Authorization", auth)
		}
		h.ServeHTTP(rec, req)
		return rec
	}
	rec := post("", "{}")
	assert.Equal(t, http.StatusUnauthorized, rec.Code)
	assert.Equal(t, `Bearer realm="baton", resource_metadata="http://127.0.0.1:8080/.well-known/oauth-protected-resource/mcp"`, rec.Header().Get("WWW-Authenticate"))
	rec = post("Bearer a.bad.jwt", "{}")
	assert.Equal(t, http.StatusUnauthorized, rec.Code)
	assert.Contains(t, rec.Header().Get("WWW-Authenticate"), `resource_metadata="http://127.0.0.1:8080/.well-known/oauth-protected-resource/mcp"`)
	assert.Contains(t, rec.Header().Get("WWW-Authenticate"), `error="invalid_token"`)

	rec = post("Bearer a.good.jwt", "{}")
	require.Equal(t, http.StatusOK, rec.Code)
	assert.JSONEq(t, `{"who":"`+oidcauth.Principal("https://idp", "alice")+`","ok":true,"n":2}`, rec.Body.String())

	// The body cap leaves room for a prompt of max_body_bytes (the tool refuses it with an
	// MCP error), and no more.
	rec = post("Bearer static-1", `{"p":"`+strings.Repeat("a", 150)+`"}`)
	assert.Equal(t, http.StatusOK, rec.Code)
	rec = post("Bearer static-1", strings.Repeat("a", int(MCPBodyLimit(100))+1))
	assert.Equal(t, http.StatusRequestEntityTooLarge, rec.Code)

	meta := httptest.NewRecorder()
	h.ServeHTTP(meta, httptest.NewRequest(http.MethodGet, "http://127.0.0.1:8080/.well-known/oauth-protected-resource/mcp", nil))
	require.Equal(t, http.StatusOK, meta.Code)
	assert.JSONEq(t, `{"resource":"http://127.0.0.1:8080/mcp","authorization_servers":["https://idp.example.com"],"bearer_methods_supported":["header"],"resource_name":"Baton"}`, meta.Body.String())
}

func TestMCPWithoutOIDCOrAuth(t *testing.T) {
	t.Parallel()
	withTokens := New(Config{AuthTokens: []string{"static-1"}, ListenAddr: "127.0.0.1:0", MCP: echoPrincipal})
	rec := httptest.NewRecorder()
	withTokens.ServeHTTP(rec, httptest.NewRequest(http.MethodPost, "http://127.0.0.1/mcp", strings.NewReader("{}")))
	assert.Equal(t, http.StatusUnauthorized, rec.Code)
	assert.Equal(t, `Bearer realm="baton"`, rec.Header().Get("WWW-Authenticate"), "no resource_metadata without OIDC")
	rec = httptest.NewRecorder()
	withTokens.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "http://127.0.0.1/.well-known/oauth-protected-resource/mcp", nil))
	assert.NotEqual(t, "application/json", rec.Header().Get("Content-Type"), "no metadata without OIDC")

	open := New(Config{ListenAddr: "127.0.0.1:0", MCP: echoPrincipal})
	rec = httptest.NewRecorder()
	req := httptest.NewRequest(http.MethodPost, "http://127.0.0.1/mcp", strings.NewReader("{}"))
	req.Header.Set("Content-Type", "application/json")
	open.ServeHTTP(rec, req)
	assert.JSONEq(t, `{"who":"","ok":true,"n":2}`, rec.Body.String(), "without auth: the anonymous principal")
	rec = httptest.NewRecorder()
	req = httptest.NewRequest(http.MethodPost, "http://127.0.0.1/mcp", strings.NewReader("{}"))
	req.Header.Set("Content-Type", "text/plain")
	open.ServeHTTP(rec, req)
	assert.Equal(t, http.StatusForbidden, rec.Code, "the CSRF guard applies")

	none := New(Config{ListenAddr: "127.0.0.1:0"})
	rec = httptest.NewRecorder()
	req = httptest.NewRequest(http.MethodPost, "http://127.0.0.1/mcp", strings.NewReader("{}"))
	req.Header.Set("Content-Type", "application/json")
	none.ServeHTTP(rec, req)
	assert.NotEqual(t, http.StatusOK, rec.Code, "no MCP handler: no /mcp")
}
