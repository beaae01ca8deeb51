package integration

// The chat page signs the user in to an MCP server: headless Chromium opens
// the page of a coordinator whose MCP server is in auth mode user (internal/testutil/
// oauthmcp on loopback, which approves its configured user at once). The tool call ends in
// a "Sign in to sec" card; its button opens the authorization URL in a new window, the
// authorization server redirects to Baton's callback, whose page tells the chat page, which
// resumes by itself: the parked call completes, and the next call runs as the user. The
// coordinator's text log at debug level holds none of the tokens, codes or verifiers.

import (
	"encoding/base64"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/baton-dev/baton/internal/testutil/fakellm"
	"github.com/baton-dev/baton/internal/testutil/oauthmcp"
	"github.com/baton-dev/baton/web/browsertest"
)

func TestBrowserSignIn(t *testing.T) {
	t.Parallel()
	srv := oauthmcp.New(oauthmcp.Config{})
	defer srv.Close()
	srv.SetUser("browser-user")
	model := fakellm.Start(mcpModel)
	defer model.Close()
	cfg := fmt.Sprintf(`server:
  shutdown_grace: 3s
  secrets_key_env: SI_KEY
llm:
  provider: openai
  base_url: %q
  model: fake-model
  api_key_env: SI_LLM
mcp_servers:
  - name: sec
    url: %q
    auth: {mode: user}
store: "memory:"
`, model.URL, srv.URL())
	key := base64.StdEncoding.EncodeToString([]byte("0123456789abcdef0123456789abcdef"))
	base, p := startSecCoordinator(t, cfg, []string{"SI_KEY=" + key, "SI_LLM=fake"}, "text")

	b := browsertest.Start(t, browsertest.Options{Width: 1280, Height: 900})
	c := &browserChat{t: t, b: b, dir: artifactsDir(t)}
	c.do(chromedp.Navigate(base+"/"), chromedp.WaitVisible(chromedp.CSS("#input")))
	c.waitIdle(0)

	c.send(mcpCallMarker + " sec__sign_in")
	card := ".interrupt.signin[data-state=open]"
	require.True(t, c.has(card), "a sign-in card")
	assert.Equal(t, []string{"Sign in to sec"}, c.texts(card+" .question"))
	assert.Equal(t, []string{"Sign in to sec"}, c.texts(card+" .open-signin"))
	c.screenshot("1-sign-in-card")

	n := c.runsEnded()
	c.do(chromedp.Click(chromedp.CSS(card + " .open-signin")))
	// The callback's page reports the sign-in; the page resumes the run by itself.
	_, err := chromedp.Run(c.b.Ctx, chromedp.Poll[chromedp.Void](fmt.Sprintf(
		`(() => { const s = document.querySelector('#status'); return Number(s.dataset.runs) >= %d && s.dataset.state !== 'running'; })()`, n+1),
		chromedp.WithPollingInterval(50*time.Millisecond), chromedp.WithPollingTimeout(60*time.Second)))
	require.NoError(t, err, "the page did not resume after the sign-in")
	assert.Equal(t, 1, srv.Stats().Authorizations)
	results := strings.Join(c.texts(c.lastCard("sec__sign_in")+" .result-text"), "")
	assert.Contains(t, results, "Signed in to sec")
	c.screenshot("2-signed-in")

	c.send(mcpCallMarker + " sec__whoami")
	assert.Contains(t, strings.Join(c.texts(c.lastCard("sec__whoami")+" .result-text"), ""), "user=browser-user")
	assert.Empty(t, b.Problems(), "the page ran cleanly")

	// Secrets canary for text logs at debug level (the end-to-end test covers JSON).
	require.Equal(t, 0, p.Stop())
	stdout, stderr := p.Logs()
	issued := srv.Issued()
	require.NotEmpty(t, issued)
	for _, secret := range issued {
		if strings.Contains(stdout+stderr, secret) {
			t.Errorf("a token, code or verifier (%.6s…) is in the text log", secret)
		}
	}
}
