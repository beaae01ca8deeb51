package integration

// A reload during the page's own run, in headless Chromium against the demo stack. Under
// the default server.on_disconnect: cancel the reload closes the run's request, which
// cancels the run (DESIGN §10). The page that comes back must say so: the call that was
// running is shown as stopped, with why, not as "running…" forever; and a later reload of
// the thread, whose last run completed, adds no such notice.

import (
	"testing"

	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/baton-dev/baton/web/browsertest"
)

func TestPageReloadDuringRun(t *testing.T) {
	t.Parallel()
	target := startBrowserTarget(t)
	if target.proc == nil {
		t.Skip("needs the coordinator this test starts: its on_disconnect must be the default, cancel")
	}
	b := browsertest.Start(t, browsertest.Options{Width: 1280, Height: 900})
	c := &browserChat{t: t, b: b, dir: artifactsDir(t)}
	c.do(chromedp.Navigate(target.url+"/"), chromedp.WaitVisible(chromedp.CSS("#input")))
	c.waitIdle(0)

	id := c.threadID()
	c.do(chromedp.SendKeys(chromedp.CSS("#input"), "count slowly to 60"), chromedp.Click(chromedp.CSS("#send")))
	c.pollPage(`(() => { const p = document.querySelector('.tool[data-name="demo__count_slowly"] .activity progress'); return !!p && p.value >= 1; })()`,
		"the count did not start")
	card := c.lastCard("demo__count_slowly")
	c.screenshot("1-running")

	c.reloadPage()
	require.Equal(t, id, c.threadID(), "the reload stays on the thread")
	c.waitIdle(0)
	// The coordinator may still be ending the run when the page loads; the page then
	// follows it to its cancelled end, else it reads the end from the thread's journal.
	c.pollPage(`document.querySelector('.notice.stopped') !== null`, "the page does not say that the run was stopped")
	assert.Equal(t, []string{"Stopped. The page was reloaded or closed while Baton was working, and leaving the page cancels the run in progress."},
		c.texts(".notice.stopped"), "the notice says why")
	assert.Equal(t, []string{"stopped"}, c.texts(card+" .badge"), "the running call is shown stopped, not running")
	assert.Equal(t, "stopped", evalJS[string](c, `document.querySelector('`+card+`').dataset.state`))
	assert.Empty(t, c.texts(`.tool .badge[data-kind="running"]`), "nothing is shown as running")
	assert.Equal(t, "idle", evalJS[string](c, `document.querySelector('#status').dataset.state`))
	assertRunEndedBy(t, &baton{URL: target.url, P: target.proc}, id, reasonClientGone)
	c.screenshot("2-reloaded-stopped")

	// The thread goes on; a reload after a completed run says nothing about stopping.
	c.send("count slowly")
	assert.Equal(t, []string{"OK"}, c.texts(c.lastCard("demo__count_slowly")+" .badge"))
	c.reloadPage()
	c.waitIdle(0)
	assert.Equal(t, []string{"OK"}, c.texts(c.lastCard("demo__count_slowly")+" .badge"), "the completed call is restored")
	assert.Empty(t, c.texts(".notice.stopped"), "no stop notice after a run that completed")
	assert.Equal(t, []string{"unfinished"}, c.texts(card+" .badge"), "the earlier call without a result is not shown running")
	c.screenshot("3-reloaded-after-completed")

	assert.Empty(t, b.Problems(), "uncaught exceptions or security errors in the page")
}
