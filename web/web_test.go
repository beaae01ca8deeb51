package web

import (
	"crypto/sha256"
	"encoding/hex"
	"io"
	"io/fs"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestHandler(t *testing.T) {
	h := Handler()
	index, err := fs.ReadFile(static, "static/index.html")
	require.NoError(t, err)
	sum := sha256.Sum256(index)
	indexTag := `"` + hex.EncodeToString(sum[:12]) + `"`

	tests := []struct {
		name       string
		method     string
		path       string
		header     map[string]string
		wantStatus int
		wantType   string
		wantBody   string
	}{
		{name: "page", method: "GET", path: "/", wantStatus: 200, wantType: "text/html; charset=utf-8", wantBody: `<script type="module" src="app.js">`},
		{name: "page by name", method: "GET", path: "/index.html", wantStatus: 200, wantType: "text/html; charset=utf-8", wantBody: "<title>Baton</title>"},
		{name: "script", method: "GET", path: "/app.js", wantStatus: 200, wantType: "text/javascript; charset=utf-8", wantBody: "streamRun"},
		{name: "module", method: "GET", path: "/agui.js", wantStatus: 200, wantType: "text/javascript; charset=utf-8", wantBody: "export class SSEFramer"},
		{name: "forms", method: "GET", path: "/forms.js", wantStatus: 200, wantType: "text/javascript; charset=utf-8", wantBody: "export function buildFields"},
		{name: "approval card", method: "GET", path: "/approval.js", wantStatus: 200, wantType: "text/javascript; charset=utf-8", wantBody: "export function approvalCard"},
		{name: "style", method: "GET", path: "/style.css", wantStatus: 200, wantType: "text/css; charset=utf-8", wantBody: "#composer"},
		{name: "head", method: "HEAD", path: "/", wantStatus: 200, wantType: "text/html; charset=utf-8"},
		{name: "revalidation", method: "GET", path: "/", header: map[string]string{"If-None-Match": indexTag}, wantStatus: 304},
		{name: "stale etag", method: "GET", path: "/", header: map[string]string{"If-None-Match": `"old"`}, wantStatus: 200, wantBody: "<title>Baton</title>"},
		{name: "unknown path", method: "GET", path: "/nope.js", wantStatus: 404},
		{name: "directory", method: "GET", path: "/static/", wantStatus: 404},
		{name: "post", method: "POST", path: "/", wantStatus: 405},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			req := httptest.NewRequest(tt.method, tt.path, nil)
			for k, v := range tt.header {
				req.Header.Set(k, v)
			}
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, req)
			require.Equal(t, tt.wantStatus, rec.Code)
			if tt.wantType != "" {
				assert.Equal(t, tt.wantType, rec.Header().Get("Content-Type"))
			}
			if tt.wantStatus == 200 {
				assert.Equal(t, ContentSecurityPolicy, rec.Header().Get("Content-Security-Policy"))
				assert.Equal(t, "nosniff", rec.Header().Get("X-Content-Type-Options"))
				assert.Equal(t, "no-cache", rec.Header().Get("Cache-Control"))
				assert.NotEmpty(t, rec.Header().Get("ETag"))
			}
			if tt.path == "/" && tt.wantStatus == 200 {
				assert.Equal(t, indexTag, rec.Header().Get("ETag"))
			}
			if tt.wantBody != "" {
				assert.Contains(t, rec.Body.String(), tt.wantBody)
			}
			if tt.method == "HEAD" {
				assert.Empty(t, rec.Body.String())
			}
			if tt.wantStatus == 405 {
				assert.Equal(t, "GET, HEAD", rec.Header().Get("Allow"))
			}
		})
	}
}

// TestNothingFromOutside checks that no embedded file refers to another origin: no
// absolute URL in an attribute, an import or a CSS url(), and no protocol-relative one.
func TestNothingFromOutside(t *testing.T) {
	external := regexp.MustCompile(`(?i)(?:src|href|action)\s*=\s*["']?(?:[a-z]+:)?//|` +
		`\bfrom\s+["'](?:[a-z]+:)?//|\bimport\s*\(\s*["'](?:[a-z]+:)?//|url\(\s*["']?(?:[a-z]+:)?//|@import`)
	n := 0
	err := fs.WalkDir(static, "static", func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		n++
		b, err := fs.ReadFile(static, p)
		if err != nil {
			return err
		}
		assert.Empty(t, external.FindAllString(string(b), -1), "%s refers to another origin", p)
		return nil
	})
	require.NoError(t, err)
	assert.Equal(t, 7, n, "embedded files")
	// The pattern itself must be able to fail.
	assert.NotEmpty(t, external.FindString(`<script src="https://cdn.example/x.js">`))
	assert.NotEmpty(t, external.FindString(`import x from "//cdn.example/x.js"`))
	assert.NotEmpty(t, external.FindString(`background: url(http://x/y.png)`))
}

func TestContentSecurityPolicyIsSelfOnly(t *testing.T) {
	for _, directive := range strings.Split(ContentSecurityPolicy, ";") {
		fields := strings.Fields(directive)
		require.NotEmpty(t, fields)
		for _, src := range fields[1:] {
			assert.Contains(t, []string{"'self'", "'none'", "data:"}, src, "directive %s", fields[0])
		}
	}
	// What is not listed falls back to default-src 'none'.
	assert.Contains(t, ContentSecurityPolicy, "default-src 'none'")
}

func TestHandlerServesWholeFiles(t *testing.T) {
	srv := httptest.NewServer(Handler())
	defer srv.Close()
	for _, name := range []string{"index.html", "app.js", "agui.js", "forms.js", "approval.js", "oidc.js", "style.css"} {
		want, err := fs.ReadFile(static, "static/"+name)
		require.NoError(t, err)
		resp, err := http.Get(srv.URL + "/" + name)
		require.NoError(t, err)
		got, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		require.NoError(t, err)
		assert.Equal(t, want, got, name)
	}
}
