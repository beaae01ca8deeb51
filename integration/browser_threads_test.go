package integration

// The chat page keeps its thread across reloads (DESIGN §3,
// §9a), in headless Chromium against the demo stack: a reload with an open interrupt
// shows its form, which still resumes the same thread; a page that opens a thread whose
// run is going on re-attaches to it through the reconnect stream, sees it continue live,
// and Stop cancels it; the thread list switches conversations.
//
// The running run is started by this test over HTTP rather than by the page: with the
// default `server.on_disconnect: cancel` a reload closes the page's own POST stream, and
// that is an abort by contract. The page load that follows it is the same either way.

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/baton-dev/baton/web/browsertest"
)

// pollPage waits until expr is true in the page; the bound only keeps a broken page from
// hanging the test.
func (c *browserChat) pollPage(expr, what string) {
	c.t.Helper()
	_, err := chromedp.Run(c.b.Ctx, chromedp.Poll[chromedp.Void](expr,
		chromedp.WithPollingInterval(50*time.Millisecond), chromedp.WithPollingTimeout(60*time.Second)))
	require.NoError(c.t, err, what)
}

// reloadPage reloads the tab and waits until the page has restored its thread.
func (c *browserChat) reloadPage() {
	c.t.Helper()
	c.do(chromedp.Reload(), chromedp.WaitVisible(chromedp.CSS("#input")))
	c.pollPage(`document.querySelector('#status').dataset.state !== 'loading'`, "the page did not finish loading its thread")
}

func (c *browserChat) threadID() string {
	c.t.Helper()
	h := evalJS[string](c, `decodeURIComponent(location.hash.replace(/^#thread=/, ''))`)
	require.NotEmpty(c.t, h, "the URL names no thread")
	return h
}

func TestBrowserThreads(t *testing.T) {
	t.Parallel()
	target := startBrowserTarget(t)
	if target.proc == nil {
		t.Log("BATON_URL: the demo prompts below assume the demo stack's scripted model")
	}
	b := browsertest.Start(t, browsertest.Options{Width: 1280, Height: 900})
	c := &browserChat{t: t, b: b, dir: artifactsDir(t)}
	c.do(chromedp.Navigate(target.url+"/"), chromedp.WaitVisible(chromedp.CSS("#input")))
	c.waitIdle(0)
	if target.token != "" {
		c.do(chromedp.Click(chromedp.CSS("#settings summary")), chromedp.SendKeys(chromedp.CSS("#token"), target.token))
	}

	var deployThread string
	t.Run("reload with an open interrupt, then answer it", func(t *testing.T) {
		c.t = t
		deployThread = c.threadID()
		c.send("deploy")
		box := ".interrupt[data-state=open]"
		require.True(t, c.has(box), "deploy asks for the environment with an interrupt")

		c.reloadPage()
		assert.Equal(t, deployThread, c.threadID(), "the reload stays on the thread")
		assert.Equal(t, []string{"deploy"}, c.texts(".msg.user .msg-text"), "the conversation is restored")
		assert.NotEmpty(t, c.texts(`.tool[data-name="demo__deploy"]`), "the tool call is restored")
		require.True(t, c.has(box), "the open interrupt's form is shown again after the reload")
		assert.Contains(t, strings.Join(c.texts(box+" .question"), ""), "which environment")
		assert.True(t, evalJS[bool](c, `document.querySelector('#input').disabled`), "the composer waits for the answer")
		c.screenshot("1-interrupt-after-reload")

		n := c.runsEnded()
		c.do(
			chromedp.SetValue(chromedp.CSS(box+` [data-path="content.environment"] select`), "0"), // staging
			chromedp.Click(chromedp.CSS(box+` button[data-action="accept"]`)),
		)
		c.waitIdle(n + 1)
		done := c.texts(`.tool[data-name="demo__deploy"][data-tag="OK"] .result-text`)
		require.NotEmpty(t, done, "the answer given after the reload resumed the deploy call")
		assert.Contains(t, done[len(done)-1], "to staging")
		assert.Empty(t, c.texts(".notice.error"), "no error on the page")

		// And the answered thread reloads whole: the tagged result is restored.
		c.reloadPage()
		assert.NotEmpty(t, c.texts(`.tool[data-name="demo__deploy"][data-tag="OK"]`), "the tagged result is restored")
		assert.False(t, c.has(box), "no open interrupt after it was answered")
		c.screenshot("2-answered-after-reload")
	})

	var countThread string
	t.Run("opening a thread re-attaches to its running run; Stop cancels it", func(t *testing.T) {
		c.t = t
		countThread = fmt.Sprintf("browser-count-%d", time.Now().UnixNano())
		body := fmt.Sprintf(`{"threadId":%q,"runId":"r1","protocolVersion":"1.0","messages":[{"id":"u1","role":"user","content":"count slowly to 60"}]}`, countThread)
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, target.url+"/agui", strings.NewReader(body))
		require.NoError(t, err)
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "text/event-stream")
		if target.token != "" {
			req.Header.Set("Authorization", "Bearer "+target.token)
		}
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		defer resp.Body.Close()
		require.Equal(t, http.StatusOK, resp.StatusCode)
		// The other client reads its stream to the end; its last event is the outcome.
		lastEvent := make(chan map[string]any, 1)
		go func() {
			var last map[string]any
			sc := bufio.NewScanner(resp.Body)
			sc.Buffer(make([]byte, 64<<10), 1<<20)
			for sc.Scan() {
				if d, ok := strings.CutPrefix(sc.Text(), "data: "); ok {
					var ev map[string]any
					if json.Unmarshal([]byte(d), &ev) == nil {
						last = ev
					}
				}
			}
			lastEvent <- last
		}()

		// The page opens the thread as after a reload (a new load of its URL).
		c.do(chromedp.Navigate(target.url+"/#thread="+countThread), chromedp.Reload(), chromedp.WaitVisible(chromedp.CSS("#input")))
		assert.Equal(t, countThread, c.threadID())
		card := `.tool[data-name="demo__count_slowly"]`
		c.pollPage(`(() => { const p = document.querySelector('`+card+` .activity progress'); return !!p && p.value >= 1; })()`,
			"the page did not show the running count")
		assert.Equal(t, "running", evalJS[string](c, `document.querySelector('#status').dataset.state`), "the page follows the running run")
		assert.False(t, evalJS[bool](c, `document.querySelector('#stop').hidden`), "Stop is offered")
		assert.Equal(t, []string{"count slowly to 60"}, c.texts(".msg.user .msg-text"), "the user message is shown once")
		first := evalJS[float64](c, `document.querySelector('`+card+` .activity progress').value`)
		t.Logf("re-attached at count %v", first)
		// Live: the count goes on while the page watches (one number a second).
		c.pollPage(fmt.Sprintf(`document.querySelector('%s .activity progress').value >= %v`, card, first+2),
			"the count did not continue live on the re-attached page")
		c.screenshot("3-reattached")

		n := c.runsEnded()
		c.do(chromedp.Click(chromedp.CSS("#stop")))
		c.waitIdle(n + 1)
		assert.NotEmpty(t, c.texts(".notice.stopped"), "the page says the run was cancelled")
		select {
		case last := <-lastEvent:
			require.NotNil(t, last)
			assert.Equal(t, "RUN_FINISHED", last["type"], "the other client's stream ends with the outcome")
			outcome, _ := last["outcome"].(map[string]any)
			assert.Equal(t, "cancelled", outcome["type"], "Stop on the re-attached page cancelled the run")
		case <-ctx.Done():
			t.Fatal("the run's original stream did not end after Stop")
		}
		assert.Less(t, evalJS[float64](c, `document.querySelector('`+card+` .activity progress').value`), 60.0, "stopped before the count ended")
		c.screenshot("4-stopped")
	})

	t.Run("the thread list switches conversations", func(t *testing.T) {
		c.t = t
		require.NotEmpty(t, deployThread)
		require.NotEmpty(t, countThread)
		c.do(chromedp.Click(chromedp.CSS("#threads summary")))
		link := func(id string) string { return fmt.Sprintf(`#thread-list a[data-thread-id=%q]`, id) }
		// A click from the page itself: the list may be re-rendered between finding a link
		// and a synthetic pointer click on it.
		clickLink := func(id string) {
			evalJS[bool](c, fmt.Sprintf(`(() => { document.querySelector('%s').click(); return true; })()`, link(id)))
		}
		c.pollPage(fmt.Sprintf(`!!document.querySelector('%s') && !!document.querySelector('%s')`, link(deployThread), link(countThread)),
			"the thread list does not show both threads")
		assert.Equal(t, "true", evalJS[string](c, `document.querySelector('`+link(countThread)+`').getAttribute('aria-current')`))
		c.screenshot("5-thread-list")

		clickLink(deployThread)
		c.pollPage(`!!document.querySelector('.tool[data-name="demo__deploy"][data-tag="OK"]')`, "the deploy conversation was not shown")
		assert.Equal(t, deployThread, c.threadID())
		assert.Equal(t, []string{"deploy"}, c.texts(".msg.user .msg-text")[:1])
		assert.False(t, c.has(`.tool[data-name="demo__count_slowly"]`), "only the chosen conversation is shown")

		c.do(chromedp.Click(chromedp.CSS("#threads summary")))
		c.pollPage(`!!document.querySelector('`+link(countThread)+`')`, "the list did not reopen")
		clickLink(countThread)
		c.pollPage(`!!document.querySelector('.tool[data-name="demo__count_slowly"]')`, "the count conversation was not shown")
		assert.Equal(t, countThread, c.threadID())
		assert.False(t, c.has(`.tool[data-name="demo__deploy"]`))

		// New chat makes a new, empty thread with its own id; the conversation goes on there.
		c.do(chromedp.Click(chromedp.CSS("#new-chat")))
		fresh := c.threadID()
		assert.NotEqual(t, countThread, fresh)
		assert.NotEqual(t, deployThread, fresh)
		assert.Zero(t, len(c.texts(".msg")), "a new chat is empty")
		c.send("research Go generics")
		assert.Equal(t, []string{"COMPLETED"}, c.texts(c.lastCard("research")+" .badge"))
		c.reloadPage()
		assert.Equal(t, fresh, c.threadID())
		assert.Equal(t, []string{"research Go generics"}, c.texts(".msg.user .msg-text"))
		assert.Equal(t, []string{"COMPLETED"}, c.texts(c.lastCard("research")+" .badge"), "the tagged result is restored")
		c.screenshot("6-new-chat-reloaded")
	})

	t.Run("a reload during the page's own run keeps the thread usable", func(t *testing.T) {
		c.t = t
		c.do(chromedp.Click(chromedp.CSS("#new-chat")))
		id := c.threadID()
		c.do(chromedp.SendKeys(chromedp.CSS("#input"), "count slowly to 60"), chromedp.Click(chromedp.CSS("#send")))
		c.pollPage(`(() => { const p = document.querySelector('.tool[data-name="demo__count_slowly"] .activity progress'); return !!p && p.value >= 1; })()`,
			"the count did not start")
		// With on_disconnect: cancel the reload is an abort of this run (DESIGN §10); the
		// page comes back to the thread, shows what was said, and the thread goes on.
		c.reloadPage()
		assert.Equal(t, id, c.threadID())
		c.waitIdle(0)
		assert.Equal(t, []string{"count slowly to 60"}, c.texts(".msg.user .msg-text"), "the message sent before the reload is restored once")
		n := c.runsEnded()
		c.do(chromedp.SendKeys(chromedp.CSS("#input"), "count slowly"), chromedp.Click(chromedp.CSS("#send")))
		c.waitIdle(n + 1)
		assert.Equal(t, []string{"OK"}, c.texts(c.lastCard("demo__count_slowly")+" .badge"), "the next run on the thread completes")
		c.screenshot("7-after-reload-mid-run")
	})

	c.t = t
	assert.Empty(t, b.Problems(), "uncaught exceptions or security errors in the page")
}
