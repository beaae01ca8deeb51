package web

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/baton-dev/baton/web/browsertest"
)

// TestMCPPageElement: with MCP served, the page carries the baton-mcp element before any
// script (next to the sign-in one when both are on), and its ETag is that of what is
// served; without it, the page has no such element.
func TestMCPPageElement(t *testing.T) {
	t.Parallel()
	s, err := NewSignIn("https://idp.example.com", "web")
	require.NoError(t, err)
	for _, opts := range []Options{{MCP: true}, {MCP: true, SignIn: s}} {
		rec := httptest.NewRecorder()
		New(opts).ServeHTTP(rec, httptest.NewRequest("GET", "/", nil))
		require.Equal(t, 200, rec.Code)
		body := rec.Body.String()
		assert.Contains(t, body, `<meta name="baton-mcp" content="mcp">`)
		assert.Less(t, strings.Index(body, "baton-mcp"), strings.Index(body, "<script"), "the element comes before the script")
		assert.Equal(t, opts.SignIn != nil, strings.Contains(body, "baton-oidc"))
		sum := sha256.Sum256(rec.Body.Bytes())
		assert.Equal(t, `"`+hex.EncodeToString(sum[:12])+`"`, rec.Header().Get("ETag"))
	}
	rec := httptest.NewRecorder()
	New(Options{}).ServeHTTP(rec, httptest.NewRequest("GET", "/", nil))
	assert.NotContains(t, rec.Body.String(), "baton-mcp")
}

// TestPageMCPConfig: when Baton serves MCP, the settings show an MCP client configuration
// whose URL is the /mcp beside the page, also when a proxy serves Baton under a path; when
// it does not, the settings show none.
func TestPageMCPConfig(t *testing.T) {
	b := browsertest.Start(t, browsertest.Options{})
	for _, tc := range []struct {
		name, prefix string
		mcp          bool
	}{{"served", "", true}, {"under a path", "/baton", true}, {"not served", "", false}} {
		t.Run(tc.name, func(t *testing.T) {
			mux := http.NewServeMux()
			mux.Handle(tc.prefix+"/", http.StripPrefix(tc.prefix, New(Options{MCP: tc.mcp})))
			srv := httptest.NewServer(mux)
			defer srv.Close()
			require.NoError(t, chromedp.Do(b.Ctx, chromedp.Navigate(srv.URL+tc.prefix+"/"), chromedp.WaitVisible(chromedp.CSS("#input"))))
			// The element is added once the page has started (after its sign-in step).
			_, err := chromedp.Run(b.Ctx, chromedp.Poll[chromedp.Void](
				`document.querySelector('#status').dataset.state !== 'loading'`))
			require.NoError(t, err)
			got, err := chromedp.Run(b.Ctx, chromedp.Evaluate[string](
				`(() => { const e = document.querySelector('#mcp-client pre'); return e ? e.textContent : ""; })()`))
			require.NoError(t, err)
			if !tc.mcp {
				assert.Empty(t, got, "no MCP configuration when Baton does not serve MCP")
				return
			}
			var cfg struct {
				MCPServers map[string]struct {
					Type string `json:"type"`
					URL  string `json:"url"`
				} `json:"mcpServers"`
			}
			require.NoError(t, json.Unmarshal([]byte(got), &cfg), "%q", got)
			assert.Equal(t, "http", cfg.MCPServers["baton"].Type)
			assert.Equal(t, srv.URL+tc.prefix+"/mcp", cfg.MCPServers["baton"].URL)
		})
	}
}
