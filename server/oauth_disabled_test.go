package server

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Without a secrets key nobody signs in, but the endpoints of DESIGN §3 still answer: the
// client metadata document is served, the callback and DELETE /agui/connections say that
// sign-in is not configured (never a bare 404 page), and nothing panics on the nil store.
func TestSignInEndpointsWithoutStore(t *testing.T) {
	for name, si := range map[string]*SignIn{
		"public URL only": {PublicURL: func() string { return "http://127.0.0.1:8080" }},
		"not configured":  nil,
	} {
		t.Run(name, func(t *testing.T) {
			h := New(Config{ListenAddr: "127.0.0.1:0", SignIn: si})
			do := func(method, path string) *httptest.ResponseRecorder {
				rec := httptest.NewRecorder()
				h.ServeHTTP(rec, httptest.NewRequest(method, "http://127.0.0.1:8080"+path, nil))
				return rec
			}
			meta := do(http.MethodGet, "/oauth/client-metadata.json")
			if si != nil {
				require.Equal(t, http.StatusOK, meta.Code)
				var doc map[string]any
				require.NoError(t, json.Unmarshal(meta.Body.Bytes(), &doc))
				assert.Equal(t, "http://127.0.0.1:8080/oauth/client-metadata.json", doc["client_id"])
				assert.Equal(t, []any{"http://127.0.0.1:8080/oauth/callback"}, doc["redirect_uris"])
			} else {
				assert.Equal(t, http.StatusNotFound, meta.Code)
				assert.Contains(t, meta.Body.String(), "SIGN_IN_NOT_CONFIGURED")
			}

			cb := do(http.MethodGet, "/oauth/callback?state=abc&code=xyz")
			assert.Equal(t, http.StatusNotFound, cb.Code)
			assert.Contains(t, cb.Body.String(), "not configured")
			assert.NotContains(t, cb.Body.String(), "xyz", "the code is not echoed")

			del := do(http.MethodDelete, "/agui/connections/docs")
			assert.Equal(t, http.StatusNotFound, del.Code)
			var e struct{ Error, Message string }
			require.NoError(t, json.Unmarshal(del.Body.Bytes(), &e), del.Body.String())
			assert.Equal(t, "NOT_FOUND", e.Error)
			assert.NotEmpty(t, e.Message)
		})
	}
}
