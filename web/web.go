// Package web serves Baton's built-in chat page (DESIGN §3, GET /): static files embedded in
// the binary, with no build step and nothing loaded from outside the coordinator.
//
// The page is a plain-JavaScript AG-UI 1.0 client (static/app.js) built on two small
// modules: static/agui.js (the streamed POST, the SSE framer, tags, JSON Patch) and
// static/forms.js (forms generated from an interrupt's responseSchema). A strict
// Content-Security-Policy makes the browser itself refuse any script, style or connection
// that does not come from the coordinator.
//
// When Baton trusts an OpenID provider and names the page's public client
// (server.oidc.client_id), the page signs its user in by itself (static/oidc.js:
// authorization code with PKCE). The contract gives the page no route to learn the
// provider, so the page Baton serves carries it: a <meta name="baton-oidc"> element with
// the issuer and the client id, and the Content-Security-Policy lets the page connect to
// the issuer's origin (discovery and the token endpoint), and to nothing else outside.
//
// Design note: embedded files have no modification time, so each file gets a strong ETag
// (a hash of its content) and "Cache-Control: no-cache": browsers revalidate on every load
// and get 304 until a new binary ships different files.
package web

import (
	"bytes"
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"encoding/json"
	"io/fs"
	"net/http"
	"path"
	"time"
)

//go:embed static
var static embed.FS

// ContentSecurityPolicy is sent with every file of the page: everything from the
// coordinator's own origin, nothing from elsewhere (data: only for the empty favicon).
const ContentSecurityPolicy = "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; " +
	"img-src 'self' data:; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"

// contentTypes are fixed here rather than taken from the host's MIME table, which differs
// between images and would make a module script fail to load under nosniff.
var contentTypes = map[string]string{
	".html": "text/html; charset=utf-8",
	".js":   "text/javascript; charset=utf-8",
	".css":  "text/css; charset=utf-8",
}

type file struct {
	body  []byte
	ctype string
	etag  string
}

// Options configures the page.
type Options struct {
	// Suggestions returns the example prompts the page offers on an empty chat, drawn
	// from what this deployment has now (its agents and tools, which may come up after the
	// start): the demo stack's are the demo's. It is asked on every GET
	// /suggestions.json; nil offers none.
	Suggestions func() []string
	// SignIn, when set, makes the page sign its user in with an OpenID provider (see
	// NewSignIn); nil: the page asks for nothing and sends the bearer token typed in its
	// settings, if any.
	SignIn *SignIn
	// MCP says that Baton serves MCP at /mcp beside the page (mcp_server.enabled): the
	// page's settings then show the configuration an MCP client needs to use it.
	MCP bool
}

// mcpMeta tells the page where Baton serves MCP, relative to the page.
const mcpMeta = `<meta name="baton-mcp" content="mcp">` + "\n"

// withHeadElement returns page with el inserted after its charset element.
func withHeadElement(page []byte, el string) []byte {
	i := bytes.Index(page, charsetMeta)
	if i < 0 {
		panic("web: index.html has no charset element")
	}
	i += len(charsetMeta)
	out := make([]byte, 0, len(page)+len(el))
	out = append(out, page[:i]...)
	out = append(out, el...)
	return append(out, page[i:]...)
}

// maxSuggestions caps the example prompts the page shows.
const maxSuggestions = 12

// Handler serves the chat page without suggestions; see New.
func Handler() http.Handler { return New(Options{}) }

// New serves the chat page at "/" and its assets beside it, plus /suggestions.json. Any
// other path is 404, and methods other than GET and HEAD get 405.
func New(opts Options) http.Handler {
	files := map[string]file{}
	sub, err := fs.Sub(static, "static")
	if err != nil {
		panic(err) // the embed pattern guarantees the directory
	}
	err = fs.WalkDir(sub, ".", func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := fs.ReadFile(sub, p)
		if err != nil {
			return err
		}
		sum := sha256.Sum256(b)
		ctype, known := contentTypes[path.Ext(p)]
		if !known {
			ctype = http.DetectContentType(b)
		}
		files["/"+p] = file{body: b, ctype: ctype, etag: `"` + hex.EncodeToString(sum[:12]) + `"`}
		return nil
	})
	if err != nil {
		panic(err) // embedded files are always readable
	}
	csp := ContentSecurityPolicy
	index := files["/index.html"]
	if s := opts.SignIn; s != nil {
		if s.origin == "" {
			panic("web: a SignIn must come from NewSignIn")
		}
		index.body = s.inject(index.body)
		csp = s.policy()
	}
	if opts.MCP {
		index.body = withHeadElement(index.body, mcpMeta)
	}
	sum := sha256.Sum256(index.body)
	index.etag = `"` + hex.EncodeToString(sum[:12]) + `"`
	files["/index.html"] = index
	files["/"] = files["/index.html"]
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			w.Header().Set("Allow", "GET, HEAD")
			http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
			return
		}
		if r.URL.Path == "/suggestions.json" {
			serveSuggestions(w, opts.Suggestions)
			return
		}
		f, ok := files[r.URL.Path]
		if !ok {
			http.NotFound(w, r)
			return
		}
		h := w.Header()
		h.Set("Content-Type", f.ctype)
		h.Set("ETag", f.etag)
		h.Set("Cache-Control", "no-cache")
		h.Set("Content-Security-Policy", csp)
		h.Set("X-Content-Type-Options", "nosniff")
		h.Set("Referrer-Policy", "no-referrer")
		http.ServeContent(w, r, "", time.Time{}, bytes.NewReader(f.body))
	})
}

// serveSuggestions answers GET /suggestions.json: {"suggestions": [...]}, at most
// maxSuggestions, never cached (agents and tools come and go).
func serveSuggestions(w http.ResponseWriter, fn func() []string) {
	list := []string{}
	if fn != nil {
		for _, s := range fn() {
			if s != "" && len(list) < maxSuggestions {
				list = append(list, s)
			}
		}
	}
	h := w.Header()
	h.Set("Content-Type", "application/json")
	h.Set("Cache-Control", "no-store")
	h.Set("X-Content-Type-Options", "nosniff")
	_ = json.NewEncoder(w).Encode(map[string]any{"suggestions": list})
}
