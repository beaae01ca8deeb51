package integration

// The chat page against the demo coordinator shows what the conversation's model calls
// used (its thread's usage), and it grows with every run.

import (
	"fmt"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/baton-dev/baton/web/browsertest"
)

func TestBrowserUsage(t *testing.T) {
	t.Parallel()
	target := startBrowserTarget(t)
	b := browsertest.Start(t, browsertest.Options{})
	c := &browserChat{t: t, b: b, dir: artifactsDir(t)}
	c.do(chromedp.Navigate(target.url+"/"), chromedp.WaitVisible(chromedp.CSS("#input")))
	c.waitIdle(0)
	if target.token != "" {
		c.do(chromedp.Click(chromedp.CSS("#settings summary")), chromedp.SendKeys(chromedp.CSS("#token"), target.token))
	}
	assert.True(t, evalJS[bool](c, `document.querySelector('#usage').hidden`), "a new chat has used nothing")

	tokens := func(above int) int {
		t.Helper()
		_, err := chromedp.Run(c.b.Ctx, chromedp.Poll[chromedp.Void](fmt.Sprintf(
			`(() => { const u = document.querySelector('#usage'); return !u.hidden && Number(u.dataset.inputTokens) + Number(u.dataset.outputTokens) > %d; })()`, above),
			chromedp.WithPollingInterval(50*time.Millisecond), chromedp.WithPollingTimeout(20*time.Second)))
		require.NoError(t, err, "the page shows no usage above %d tokens: %q", above, evalJS[string](c, `document.querySelector('#usage').textContent`))
		return evalJS[int](c, `Number(document.querySelector('#usage').dataset.inputTokens) + Number(document.querySelector('#usage').dataset.outputTokens)`)
	}
	c.send("research Go generics")
	first := tokens(0)
	assert.Regexp(t, `^[0-9,]+ tokens`, evalJS[string](c, `document.querySelector('#usage').textContent`))
	c.send("research Go generics again")
	tokens(first)
	c.screenshot("usage")
	assert.Empty(t, b.Problems(), "the page ran cleanly")
}
