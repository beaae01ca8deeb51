package server

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/binary"
	"errors"
	"html/template"
	"log/slog"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/go-chi/chi/v5"

	"github.com/baton-dev/baton/a2aauth"
	"github.com/baton-dev/baton/internal/seal"
	"github.com/baton-dev/baton/signin"
)

// SignIn configures the OAuth endpoints (DESIGN §3): GET /oauth/callback, GET
// /oauth/client-metadata.json and DELETE /agui/connections/{server}. See
// design/signin-engine.md.
type SignIn struct {
	// Store holds pending sign-ins and grants (sealed: tokenstore). Nil when nobody can
	// sign in (no secrets key): the callback and DELETE /agui/connections answer so, and
	// the client metadata document is still served.
	Store signin.Store
	// HTTPClient carries the code exchange.
	HTTPClient *http.Client
	// ClientFor, when set, chooses the client of the code exchange by the sign-in's server
	// (an MCP server's name or "a2a:<agent>"), so the token request goes through that
	// peer's egress policy; HTTPClient is used when it returns nil.
	ClientFor func(server string) *http.Client
	// PublicURL returns Baton's public base URL (scheme://host[:port], no trailing slash):
	// the callback is PublicURL()+"/oauth/callback".
	PublicURL func() string
	// Servers are the names of the MCP servers whose users sign in (auth mode user).
	Servers []string
	// Agents are the names of the A2A agents; their grants are kept as "a2a:<agent>"
	// (package a2aauth).
	Agents []string
	// Forget closes the principal's session with server after its grant was deleted.
	Forget func(principal, server string)
	// Ring seals the cookie that tells the callback which principal the browser belongs to
	// when bearer auth is on.
	Ring *seal.Ring
	// ClientName is the client_name of the Client ID Metadata Document. Default "Baton".
	ClientName string
	// CookieTTL is how long the sign-in cookie is valid. Default 24 h.
	CookieTTL time.Duration
}

// Paths of the OAuth endpoints.
const (
	CallbackPath       = "/oauth/callback"
	ClientMetadataPath = "/oauth/client-metadata.json"
	// signInCookie names the browser's principal for the callback (bearer auth on).
	signInCookie = "baton_signin"
	// cookieAAD binds the cookie's sealed value to its purpose.
	cookieAAD = "baton-signin-cookie"
	// callbackTimeout bounds the code exchange.
	callbackTimeout = 20 * time.Second
	// maxCallbackParam bounds each query parameter the callback reads.
	maxCallbackParam = 4096
)

// signInHandler serves the OAuth endpoints and sets the sign-in cookie of a run that may
// need one.
type signInHandler struct {
	cfg  *SignIn // never nil: an empty SignIn when sign-in is not configured
	auth *authn
	log  *slog.Logger
}

// newSignInHandler applies cfg's defaults to a copy of it; a nil cfg (an embedding without
// sign-in) still gets the endpoints of DESIGN §3, which then answer with structured errors
// rather than a bare 404 page.
func newSignInHandler(cfg *SignIn, auth *authn, log *slog.Logger) *signInHandler {
	si := &SignIn{}
	if cfg != nil {
		*si = *cfg
	}
	if si.ClientName == "" {
		si.ClientName = "Baton"
	}
	if si.CookieTTL <= 0 {
		si.CookieTTL = 24 * time.Hour
	}
	return &signInHandler{cfg: si, auth: auth, log: log}
}

func (s *signInHandler) route(r chi.Router) {
	r.Get(CallbackPath, s.handleCallback)
	r.Get(ClientMetadataPath, s.handleClientMetadata)
	r.Delete("/agui/connections/{server}", s.handleForget)
}

// handleClientMetadata serves Baton's OAuth Client ID Metadata Document: its client_id is
// the document's own URL, and it registers the callback as the only redirect URI.
func (s *signInHandler) handleClientMetadata(w http.ResponseWriter, _ *http.Request) {
	if s.cfg.PublicURL == nil {
		writeError(w, http.StatusNotFound, "SIGN_IN_NOT_CONFIGURED", "This coordinator has no public URL for sign-in.")
		return
	}
	base := s.cfg.PublicURL()
	w.Header().Set("Cache-Control", "public, max-age=300")
	writeJSON(w, http.StatusOK, map[string]any{
		"client_id":                  base + ClientMetadataPath,
		"client_name":                s.cfg.ClientName,
		"client_uri":                 base + "/",
		"redirect_uris":              []string{base + CallbackPath},
		"grant_types":                []string{"authorization_code", "refresh_token"},
		"response_types":             []string{"code"},
		"token_endpoint_auth_method": "none",
	})
}

// handleForget deletes the principal's grant for a server (DELETE /agui/connections/{server}).
func (s *signInHandler) handleForget(w http.ResponseWriter, r *http.Request) {
	who, ok := s.auth.principal(r)
	if !ok {
		s.auth.unauthorized(w, r)
		return
	}
	name := pathID(r, "server")
	key := name
	switch {
	case s.cfg.Store == nil:
		writeError(w, http.StatusNotFound, "NOT_FOUND", "No MCP server or agent signs users in on this coordinator.")
		return
	case slices.Contains(s.cfg.Servers, name):
	case slices.Contains(s.cfg.Agents, name):
		key = a2aauth.ServerName(name)
	default:
		writeError(w, http.StatusNotFound, "NOT_FOUND", "No MCP server with sign-in or agent has this name.")
		return
	}
	if err := s.cfg.Store.DeleteGrant(r.Context(), who, key); err != nil {
		s.log.Error("forgetting a grant failed", "server", name, "err", err)
		writeError(w, http.StatusServiceUnavailable, "STORE_UNAVAILABLE", "The connection could not be forgotten; try again.")
		return
	}
	if s.cfg.Forget != nil {
		s.cfg.Forget(who, name)
	}
	s.log.Info("mcp sign-in forgotten", "server", name)
	w.WriteHeader(http.StatusNoContent)
}

// setSignInCookie gives the browser of an authenticated request a cookie naming its
// principal (sealed), which the callback reads: the authorization server's redirect is a
// plain navigation without the chat page's bearer token. SameSite=Lax lets it ride along
// that top-level navigation and nothing else cross-site.
func (s *signInHandler) setSignInCookie(w http.ResponseWriter, r *http.Request, principal string) {
	si := s.cfg
	if si.Ring == nil || !s.auth.on() {
		return
	}
	exp := time.Now().Add(si.CookieTTL)
	pt := binary.BigEndian.AppendUint64(nil, uint64(exp.Unix()))
	pt = append(pt, principal...)
	http.SetCookie(w, &http.Cookie{
		Name: signInCookie, Value: base64.RawURLEncoding.EncodeToString(si.Ring.Seal(pt, []byte(cookieAAD))),
		Path: CallbackPath, Expires: exp, HttpOnly: true, SameSite: http.SameSiteLaxMode,
		Secure: r.TLS != nil || strings.HasPrefix(si.PublicURL(), "https://"),
	})
}

// callbackPrincipal is the principal of the browser at the callback: "" without auth; with
// auth, the request's bearer token when it has one (a client that follows the redirect
// itself), else the sign-in cookie.
func (s *signInHandler) callbackPrincipal(r *http.Request) (string, bool) {
	if !s.auth.on() {
		return "", true
	}
	if r.Header.Get("Authorization") != "" {
		return s.auth.principal(r)
	}
	c, err := r.Cookie(signInCookie)
	if err != nil || s.cfg.Ring == nil {
		return "", false
	}
	raw, err := base64.RawURLEncoding.DecodeString(c.Value)
	if err != nil {
		return "", false
	}
	pt, _, err := s.cfg.Ring.Open(raw, []byte(cookieAAD))
	if err != nil || len(pt) < 8 {
		return "", false
	}
	if time.Now().Unix() > int64(binary.BigEndian.Uint64(pt[:8])) {
		return "", false
	}
	return string(pt[8:]), true
}

// handleCallback completes a sign-in: the state (single use, short expiry) names the
// pending sign-in, which must belong to the browser's principal; the code is exchanged and
// the grant stored (sealed). The page says so and tells the chat page (window.opener) to
// resume. Nothing secret is shown, logged or sent to another origin.
func (s *signInHandler) handleCallback(w http.ResponseWriter, r *http.Request) {
	if s.cfg.Store == nil {
		s.callbackPage(w, http.StatusNotFound, "Sign-in failed", "Sign-in is not configured on this coordinator.", nil)
		return
	}
	q := r.URL.Query()
	state, code, iss, oerr := q.Get("state"), q.Get("code"), q.Get("iss"), q.Get("error")
	for _, v := range []string{state, code, iss, oerr} {
		if len(v) > maxCallbackParam {
			s.callbackPage(w, http.StatusBadRequest, "Sign-in failed", "The sign-in response is malformed.", nil)
			return
		}
	}
	// Whoever the callback ends a sign-in for must be the principal that started it, on the
	// error path too: a state is in URLs and browser histories, and without this check
	// anyone who learned one could cancel another user's sign-in.
	who, ok := s.callbackPrincipal(r)
	if !ok {
		s.callbackPage(w, http.StatusUnauthorized, "Sign-in failed", "This browser is not signed in to the chat. Open the sign-in link from the chat page, in the same browser.", nil)
		return
	}
	if oerr != "" {
		// The user refused at the authorization server (or it failed): the pending sign-in
		// is used up; the chat page's resume asks again.
		if _, err := signin.Cancel(r.Context(), s.cfg.Store, state, who); errors.Is(err, signin.ErrWrongPrincipal) {
			s.log.Warn("mcp sign-in answer carried to another principal's browser; refused")
			s.callbackPage(w, http.StatusForbidden, "Sign-in refused", "This sign-in was started by another user of the chat.", nil)
			return
		} else if err != nil && !errors.Is(err, signin.ErrUnknownState) {
			s.log.Error("mcp sign-in: reading the pending sign-in failed", "err", err)
			s.callbackPage(w, http.StatusServiceUnavailable, "Sign-in failed", "The sign-in could not be read; return to the chat and try again.", nil)
			return
		}
		s.log.Info("mcp sign-in refused at the authorization server", "error", safeErrorCode(oerr))
		s.callbackPage(w, http.StatusOK, "Sign-in not completed", "The authorization server did not grant access ("+safeErrorCode(oerr)+"). You can return to the chat.", nil)
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), callbackTimeout)
	defer cancel()
	p, err := signin.CompleteFor(ctx, s.cfg.Store, s.exchangeClient, state, code, iss, who)
	switch {
	case err == nil:
	case errors.Is(err, signin.ErrUnknownState):
		s.callbackPage(w, http.StatusBadRequest, "Sign-in link expired", "This sign-in has expired or was already completed. Return to the chat and try again.", nil)
		return
	case errors.Is(err, signin.ErrWrongPrincipal):
		s.log.Warn("mcp sign-in completed by another principal's browser; refused")
		s.callbackPage(w, http.StatusForbidden, "Sign-in refused", "This sign-in was started by another user of the chat.", nil)
		return
	case errors.Is(err, signin.ErrIssuerMismatch):
		s.log.Warn("mcp sign-in answered by another issuer; refused")
		s.callbackPage(w, http.StatusBadRequest, "Sign-in refused", "The sign-in response came from an unexpected authorization server.", nil)
		return
	default:
		s.log.Warn("mcp sign-in: the code exchange failed", "err", err)
		s.callbackPage(w, http.StatusBadGateway, "Sign-in failed", "The authorization server did not accept the sign-in. Return to the chat and try again.", nil)
		return
	}
	s.log.Info("mcp sign-in completed", "server", p.Server, "thread_id", p.ThreadID)
	shown := strings.TrimPrefix(p.Server, "a2a:")
	s.callbackPage(w, http.StatusOK, "Signed in to "+shown, "Signed in to "+shown+", you can return to the chat.",
		map[string]string{"type": "baton:signed-in", "server": p.Server, "threadId": p.ThreadID, "interruptId": p.InterruptID})
}

// exchangeClient is the HTTP client of the code exchange for server's sign-in.
func (s *signInHandler) exchangeClient(server string) *http.Client {
	if f := s.cfg.ClientFor; f != nil {
		if c := f(server); c != nil {
			return c
		}
	}
	return s.cfg.HTTPClient
}

// safeErrorCode keeps an OAuth error code printable and short: it comes from the URL.
func safeErrorCode(c string) string {
	out := make([]byte, 0, min(len(c), 64))
	for i := 0; i < len(c) && len(out) < 64; i++ {
		if b := c[i]; b == '_' || b == '-' || b == '.' || (b >= 'a' && b <= 'z') || (b >= 'A' && b <= 'Z') || (b >= '0' && b <= '9') {
			out = append(out, b)
		}
	}
	return string(out)
}

var callbackTmpl = template.Must(template.New("cb").Parse(`<!doctype html>
<html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width">
<title>{{.Title}}</title>
<style>body{font:16px system-ui,sans-serif;margin:3rem auto;max-width:32rem;padding:0 1rem;color:#222}</style>
</head><body><h1>{{.Title}}</h1><p id="msg">{{.Message}}</p>
{{if .Notice}}<script nonce="{{.Nonce}}">
(function(){var m={{.Notice}};
try{if(window.opener){window.opener.postMessage(m,location.origin)}}catch(e){}
try{localStorage.setItem("baton:signed-in",JSON.stringify(Object.assign({at:Date.now()},m)))}catch(e){}
if(window.opener){setTimeout(function(){window.close()},1200)}})();
</script>{{end}}
</body></html>
`))

// callbackPage writes the callback's answer: a small page without any secret. The code and
// state are in this page's URL, so it sends no referrer and is not cached. notice, when set,
// goes to the chat page (same origin only).
func (s *signInHandler) callbackPage(w http.ResponseWriter, status int, title, message string, notice map[string]string) {
	nonce := rand.Text()
	h := w.Header()
	h.Set("Content-Type", "text/html; charset=utf-8")
	h.Set("Cache-Control", "no-store")
	h.Set("Referrer-Policy", "no-referrer")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Content-Security-Policy", "default-src 'none'; style-src 'unsafe-inline'; script-src 'nonce-"+nonce+"'; frame-ancestors 'none'")
	w.WriteHeader(status)
	_ = callbackTmpl.Execute(w, map[string]any{"Title": title, "Message": message, "Notice": notice, "Nonce": nonce})
}
