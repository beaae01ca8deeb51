package integration

// The chat page signs its user in with the OpenID provider Baton trusts (server.oidc with
// client_id): headless Chromium opens the page, is sent to panva's oidc-provider
// (integration/peers/idp.mjs, public client "chat", PKCE required), fills its login and
// consent forms, comes back, and chats; Baton saw that user's JWT (the thread belongs to
// issuer + sub) and no token is in Web Storage. The page is reached through a recording
// reverse proxy in front of Baton: it sees the bearer token of every /agui request, and can
// refuse one with 401, as Baton does for a revoked token.

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/baton-dev/baton/internal/testutil/fakellm"
	"github.com/baton-dev/baton/web/browsertest"
)

// authProxy is a reverse proxy to Baton that records the bearer token of every /agui
// request and refuses the next refuse runs (POST /agui) with Baton's 401. Only runs: the
// page's other requests (its thread list, a thread's history) come at moments of their own
// after a sign-in, and a refusal they took would not be the one a test is about.
type authProxy struct {
	mu      sync.Mutex
	target  *url.URL
	tokens  []string // in request order; "" for a request without one
	paths   []string // the request of each token
	refuse  int
	refused []string
}

func (p *authProxy) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	p.mu.Lock()
	target := p.target
	refuse := false
	if r.URL.Path == "/agui" || strings.HasPrefix(r.URL.Path, "/agui/") {
		tok, _ := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
		p.tokens = append(p.tokens, tok)
		p.paths = append(p.paths, r.Method+" "+r.URL.Path)
		if p.refuse > 0 && tok != "" && r.Method == http.MethodPost && r.URL.Path == "/agui" {
			p.refuse--
			p.refused = append(p.refused, tok)
			refuse = true
		}
	}
	p.mu.Unlock()
	if target == nil {
		http.Error(w, "Baton is not up yet", http.StatusServiceUnavailable)
		return
	}
	if refuse {
		w.Header().Set("WWW-Authenticate", `Bearer realm="baton", error="invalid_token", error_description="the token was revoked"`)
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusUnauthorized)
		_, _ = w.Write([]byte(`{"error":"UNAUTHORIZED","message":"A valid bearer token is required."}`))
		return
	}
	bufferBody(r)
	(&httputil.ReverseProxy{Rewrite: func(pr *httputil.ProxyRequest) { pr.SetURL(target) }}).ServeHTTP(w, r)
}

func (p *authProxy) seen() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]string(nil), p.tokens...)
}

func (p *authProxy) refuseNext(n int) {
	p.mu.Lock()
	p.refuse = n
	p.mu.Unlock()
}

// oidcPage is Baton with server.oidc.client_id behind an authProxy, its provider, and a
// browser.
type oidcPage struct {
	*browserChat
	idp   *idp
	baton string // Baton's own URL
	page  string // the page's URL (through the proxy)
	proxy *authProxy
}

const oidcPageAnswer = "Hello from the model, signed-in user."

func startOIDCPage(t *testing.T, idpEnv ...string) *oidcPage {
	t.Helper()
	model := fakellm.Start(func(fakellm.Request) fakellm.Reply { return fakellm.Reply{Text: oidcPageAnswer} })
	t.Cleanup(model.Close)
	proxy := &authProxy{}
	front := httptest.NewServer(proxy)
	t.Cleanup(front.Close)
	p := startIDP(t, append([]string{"CHAT_REDIRECTS=" + front.URL + "/"}, idpEnv...)...)
	cfg := fmt.Sprintf(`server:
  shutdown_grace: 3s
  oidc:
    issuer: %q
    audience: baton
    allowed_algs: [ES256]
    clock_skew: 1s
    client_id: chat
llm:
  provider: openai
  base_url: %q
  model: fake-model
  api_key_env: %s
store: "memory:"
`, p.issuer, model.URL, llmKeyEnv)
	base, _ := startSecCoordinator(t, cfg, []string{llmKeyEnv + "=fake-key"}, "text")
	u, err := url.Parse(base)
	require.NoError(t, err)
	proxy.mu.Lock()
	proxy.target = u
	proxy.mu.Unlock()
	b := browsertest.Start(t, browsertest.Options{Width: 1280, Height: 900})
	return &oidcPage{browserChat: &browserChat{t: t, b: b, dir: artifactsDir(t)}, idp: p, baton: base, page: front.URL + "/", proxy: proxy}
}

// waitJS evaluates expr until it is true; a navigation in between (the page leaving for
// the provider and coming back) only makes one evaluation fail.
func (o *oidcPage) waitJS(expr, what string) {
	o.t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	var last error
	for time.Now().Before(deadline) {
		ctx, cancel := context.WithTimeout(o.b.Ctx, 5*time.Second)
		ok, err := chromedp.Run(ctx, chromedp.Evaluate[bool](expr))
		cancel()
		if err == nil && ok {
			return
		}
		last = err
		time.Sleep(50 * time.Millisecond)
	}
	o.screenshot("timeout")
	o.t.Fatalf("%s: %s did not become true (last error: %v)", what, expr, last)
}

// signInAt fills the provider's login form as user, and its consent form when it shows one.
func (o *oidcPage) signInAt(user string) {
	o.t.Helper()
	o.waitJS(`location.origin === `+jsString(o.idp.issuer)+` && document.querySelector('input[name=login]') !== null`, "the provider's login form")
	o.screenshot("1-provider-login")
	o.do(chromedp.SendKeys(chromedp.CSS(`input[name=login]`), user),
		chromedp.SendKeys(chromedp.CSS(`input[name=password]`), "any password"),
		chromedp.Click(chromedp.CSS(`button[type=submit]`)))
	o.waitJS(`document.querySelector('input[name=prompt][value=consent]') !== null || document.querySelector('#signed-in') !== null`, "consent or the page")
	if evalJS[bool](o.browserChat, `document.querySelector('input[name=prompt][value=consent]') !== null`) {
		o.do(chromedp.Click(chromedp.CSS(`button[type=submit]`)))
	}
	o.waitSignedIn()
}

// waitSignedIn waits until the page is back, signed in and idle.
func (o *oidcPage) waitSignedIn() {
	o.t.Helper()
	o.waitJS(`location.origin + '/' === `+jsString(o.page)+` && (document.querySelector('#signed-in') || {}).textContent === 'Signed in with `+strings.TrimPrefix(o.idp.issuer, "http://")+`.'`, "the page signed in")
	o.waitIdle(0)
}

func jsString(s string) string { return fmt.Sprintf("%q", s) }

// storage is every key and value of the page's localStorage and sessionStorage.
func (o *oidcPage) storage() map[string]string {
	o.t.Helper()
	return evalJS[map[string]string](o.browserChat, `(() => { const out = {}; for (const [n, s] of [["local", localStorage], ["session", sessionStorage]]) for (let i = 0; i < s.length; i++) out[n + ":" + s.key(i)] = s.getItem(s.key(i)); return out; })()`)
}

// bearerTokens are the distinct non-empty tokens the page sent, in order.
func (o *oidcPage) bearerTokens() []string {
	var out []string
	for _, tok := range o.proxy.seen() {
		if tok != "" && (len(out) == 0 || out[len(out)-1] != tok) {
			out = append(out, tok)
		}
	}
	return out
}

// answers are the model's answers shown, in order.
func (o *oidcPage) answers() []string {
	o.t.Helper()
	return o.texts(".msg.assistant .msg-text")
}

// TestBrowserOIDCSignIn: the page signs in through the provider (code + PKCE), the chat
// runs as that user, and the tokens stay out of Web Storage and the address bar.
func TestBrowserOIDCSignIn(t *testing.T) {
	t.Parallel()
	o := startOIDCPage(t)
	o.do(chromedp.Navigate(o.page))
	o.signInAt("alice")
	o.screenshot("2-signed-in")

	assert.Empty(t, evalJS[string](o.browserChat, `location.search`), "the code and state left the address bar")
	assert.Regexp(t, `^#thread=`, evalJS[string](o.browserChat, `location.hash`))
	o.send("hello")
	assert.Equal(t, []string{oidcPageAnswer}, o.answers())
	o.screenshot("3-chat")

	toks := o.bearerTokens()
	require.NotEmpty(t, toks, "the page sent a bearer token to /agui")
	for i, tok := range o.proxy.seen() {
		assert.NotEmpty(t, tok, "every /agui request of the signed-in page carries the token: %s", o.proxy.paths[i])
	}
	c := claims(t, toks[0])
	assert.Equal(t, "alice", c["sub"])
	assert.Equal(t, o.idp.issuer, c["iss"])
	assert.Equal(t, "baton", c["aud"])
	assert.Equal(t, "chat", c["client_id"])

	// The thread belongs to issuer + sub: alice's own token (client credentials, same sub)
	// reads it, bob's does not.
	thread := strings.TrimPrefix(evalJS[string](o.browserChat, `decodeURIComponent(location.hash)`), "#thread=")
	require.NotEmpty(t, thread)
	st, _, body := authGet(t, o.baton, "/agui/threads/"+url.PathEscape(thread), o.idp.token(t, "alice", "urn:baton"))
	require.Equal(t, http.StatusOK, st, body)
	assert.Contains(t, body, "hello")
	st, _, _ = authGet(t, o.baton, "/agui/threads/"+url.PathEscape(thread), o.idp.token(t, "bob", "urn:baton"))
	assert.Equal(t, http.StatusNotFound, st, "bob reads alice's thread")

	// Nothing of the sign-in is in Web Storage: no token, and the PKCE verifier and state
	// are gone.
	for k, v := range o.storage() {
		assert.NotContains(t, k, "oidc", "the pending sign-in was removed")
		for _, tok := range toks {
			assert.NotContains(t, v, tok, "the access token is in %s", k)
		}
		assert.NotRegexp(t, `eyJ[A-Za-z0-9_-]+\.`, v, "a JWT is in %s", k)
	}
	assert.Empty(t, o.b.Problems(), "the page ran cleanly (no CSP violation)")
}

// TestBrowserOIDCRenewal: short-lived tokens (2 s) are refreshed with the refresh token
// without leaving the page, before they expire and when Baton refuses one; the refused run
// is sent again and answers.
func TestBrowserOIDCRenewal(t *testing.T) {
	t.Parallel()
	o := startOIDCPage(t, "CHAT_RESOURCE=urn:baton-short")
	o.do(chromedp.Navigate(o.page))
	o.signInAt("alice")
	evalJS[bool](o.browserChat, `(window.__stay = true)`)

	o.send("one")
	assert.Equal(t, []string{oidcPageAnswer}, o.answers())
	first := o.bearerTokens()
	require.NotEmpty(t, first)
	exp := time.Unix(int64(claims(t, first[len(first)-1])["exp"].(float64)), 0)
	time.Sleep(time.Until(exp.Add(1500 * time.Millisecond))) // past exp and Baton's 1 s skew
	o.send("two")
	assert.Len(t, o.answers(), 2, "the run with a renewed token answers")
	second := o.bearerTokens()
	assert.Greater(t, len(second), len(first), "a new token after expiry")
	assert.True(t, evalJS[bool](o.browserChat, `window.__stay === true`), "renewed without leaving the page (refresh token)")

	// Baton refuses the current token once (a revocation): the page refreshes and sends the
	// run again.
	o.proxy.refuseNext(1)
	o.send("three")
	assert.Len(t, o.answers(), 3, "the refused run was sent again with a new token")
	o.proxy.mu.Lock()
	refused := append([]string(nil), o.proxy.refused...)
	o.proxy.mu.Unlock()
	require.Len(t, refused, 1)
	after := o.bearerTokens()
	assert.NotEqual(t, refused[0], after[len(after)-1], "the retry carried another token")
	assert.Equal(t, "alice", claims(t, after[len(after)-1])["sub"])
	assert.True(t, evalJS[bool](o.browserChat, `window.__stay === true`))
	assert.Empty(t, o.texts(".notice.error"), "no error shown")
	for k, v := range o.storage() {
		for _, tok := range after {
			assert.NotContains(t, v, tok, "the access token is in %s", k)
		}
	}
	assert.Empty(t, o.b.Problems())
}

// TestBrowserOIDCWithoutRefresh: without a refresh token, an expired token signs the user
// in again (the provider's session makes it two redirects) and the typed message comes
// back; a token Baton refuses right after sign-in is shown, not answered by a sign-in loop.
func TestBrowserOIDCWithoutRefresh(t *testing.T) {
	t.Parallel()
	o := startOIDCPage(t, "CHAT_RESOURCE=urn:baton-15s", "CHAT_REFRESH=0")
	o.do(chromedp.Navigate(o.page))
	o.signInAt("alice")

	o.proxy.refuseNext(1)
	evalJS[bool](o.browserChat, `(window.__stay = true)`)
	o.send("refused")
	assert.Contains(t, strings.Join(o.texts(".notice.error"), " "), "A valid bearer token is required.")
	assert.True(t, evalJS[bool](o.browserChat, `window.__stay === true`), "no sign-in loop for a fresh token")

	toks := o.bearerTokens()
	require.NotEmpty(t, toks)
	exp := time.Unix(int64(claims(t, toks[len(toks)-1])["exp"].(float64)), 0)
	time.Sleep(time.Until(exp.Add(1500 * time.Millisecond)))
	o.do(chromedp.SendKeys(chromedp.CSS("#input"), "after expiry"), chromedp.Click(chromedp.CSS("#send")))
	o.waitJS(`window.__stay === undefined`, "the page left to sign in again")
	o.waitSignedIn()
	assert.Equal(t, "after expiry", evalJS[string](o.browserChat, `document.querySelector('#input').value`), "the typed message came back")
	n := o.runsEnded()
	o.do(chromedp.Click(chromedp.CSS("#send")))
	o.waitIdle(n + 1)
	assert.Equal(t, []string{oidcPageAnswer}, o.answers(), "the restored thread's first answer")
	assert.Empty(t, o.storage(), "nothing left in Web Storage")
	assert.Empty(t, o.b.Problems())
}

// TestBrowserOIDCForeignAnswer: a sign-in answer the page did not ask for (its state is
// not the page's) is refused before any token request, and the page offers to sign in.
func TestBrowserOIDCForeignAnswer(t *testing.T) {
	t.Parallel()
	o := startOIDCPage(t)
	o.do(chromedp.Navigate(o.page + "?code=stolen-code&state=forged&iss=" + url.QueryEscape(o.idp.issuer)))
	o.waitJS(`document.querySelector('.notice.signin-error') !== null`, "the refusal")
	o.waitIdle(0)
	o.screenshot("foreign-answer")
	assert.Contains(t, strings.Join(o.texts(".notice.signin-error .notice-text"), " "), "state does not match")
	assert.Empty(t, evalJS[string](o.browserChat, `location.search`), "the code left the address bar")
	assert.Equal(t, "Not signed in.", evalJS[string](o.browserChat, `document.querySelector('#signed-in').textContent`))
	for _, tok := range o.proxy.seen() {
		assert.Empty(t, tok, "no token was sent")
	}
	// The button starts a real sign-in, which works.
	require.True(t, o.has(".notice.signin-error button"), "a sign-in button")
	o.do(chromedp.Click(chromedp.CSS(".notice.signin-error button")))
	o.signInAt("bob")
	o.send("hi")
	assert.Equal(t, []string{oidcPageAnswer}, o.answers())
	assert.Equal(t, "bob", claims(t, o.bearerTokens()[0])["sub"])
}
