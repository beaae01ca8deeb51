package integration

// The chat page against a coordinator in `server.on_disconnect: detach`, in
// headless Chromium, with the @a2a-js/sdk peer streaming a slow task:
//   - Stop during a streaming delegation is immediate: the page calls the stop endpoint for
//     its own run (closing its request would only detach it, until the grace, here 10 min),
//     the peer records CancelTask, and the page shows the run's cancelled outcome.
//   - A reload during a streaming delegation loses nothing: the page comes back to the
//     thread, re-attaches to the run, the sub-agent's text goes on live after the reload,
//     and the run completes with nothing cancelled.
//   - Leaving the thread (New chat) only closes the page's stream: the run goes on, the page
//     re-attaches when it comes back, and Stop then cancels it.

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/baton-dev/baton/internal/testutil/fakellm"
	"github.com/baton-dev/baton/web/browsertest"
)

// subagentStepJS is the highest "step N" the page shows for the running peer sub-agent (0
// when none).
const subagentStepJS = `(() => {
  let max = 0;
  for (const e of document.querySelectorAll('.subagent[data-name="peer"] .sub-msg')) {
    for (const m of e.textContent.matchAll(/step (\d+)/g)) max = Math.max(max, Number(m[1]));
  }
  return max;
})()`

func TestBrowserDetach(t *testing.T) {
	t.Parallel()
	requirePeers(t)
	peer := startA2APeerEnv(t)
	model := fakellm.Start(pointsModel)
	t.Cleanup(model.Close)
	bt := startBatonForCancel(t, cancelConfig{LLMURL: model.URL, Agents: []agentEntry{{Name: "peer", URL: peer}},
		OnDisconnect: "detach", ReconnectGrace: "10m"})
	b := browsertest.Start(t, browsertest.Options{Width: 1280, Height: 900})
	c := &browserChat{t: t, b: b, dir: artifactsDir(t)}
	c.do(chromedp.Navigate(bt.URL+"/"), chromedp.WaitVisible(chromedp.CSS("#input")))
	c.waitIdle(0)

	// startSlow sends the slow delegation from the page and waits until the sub-agent's text
	// streams on it; it returns the thread.
	startSlow := func() string {
		c.t.Helper()
		c.do(chromedp.Click(chromedp.CSS("#new-chat")))
		thread := c.threadID()
		c.do(chromedp.SendKeys(chromedp.CSS("#input"), "peer: slow please"), chromedp.Click(chromedp.CSS("#send")))
		c.pollPage(subagentStepJS+` >= 2`, "the sub-agent's text did not stream on the page")
		return thread
	}

	t.Run("Stop during a streaming delegation cancels at once", func(t *testing.T) {
		c.t = t
		before, _ := peerTasks(t, peer)
		n := c.runsEnded()
		thread := startSlow()
		c.do(chromedp.Click(chromedp.CSS("#stop")))
		c.waitIdle(n + 1)
		// The outcome came on the page's own stream: the stop endpoint ended the run, not
		// the closing of the request (which under detach would wait out the grace).
		assert.Equal(t, []string{"The run was cancelled."}, c.texts(".notice.stopped"), "the page shows the cancelled outcome")
		assert.Equal(t, []string{"cancelled"}, c.texts(`.tool[data-name="peer"]`+" .badge"))
		assertPeerCancelled(t, peer, before)
		assertRunEndedBy(t, bt, thread, "cancelled: stop requested")
		assert.Less(t, evalJS[float64](c, subagentStepJS), 20.0, "stopped before the task's end")
		c.screenshot("detach-1-stopped")
	})

	t.Run("reload during a streaming delegation; live text goes on", func(t *testing.T) {
		c.t = t
		before, _ := peerTasks(t, peer)
		thread := startSlow()
		at := evalJS[float64](c, subagentStepJS)
		c.reloadPage()
		assert.Equal(t, thread, c.threadID(), "the reload stays on the thread")
		assert.Equal(t, []string{"peer: slow please"}, c.texts(".msg.user .msg-text"), "the user message is restored once")
		// Re-attached: the replay shows what was streamed before the reload, then the
		// sub-agent's text continues live.
		c.pollPage(fmt.Sprintf(subagentStepJS+` > %v`, at+1), "the sub-agent's text did not continue after the reload")
		assert.Equal(t, "running", evalJS[string](c, `document.querySelector('#status').dataset.state`), "the page follows the running run")
		c.screenshot("detach-2-reattached")
		c.waitIdle(0)
		assert.Equal(t, 20.0, evalJS[float64](c, subagentStepJS), "every step of the sub-agent is shown")
		answers := c.texts(".msg.assistant .msg-text")
		require.NotEmpty(t, answers, "the coordinator's answer is shown")
		assert.Equal(t, pointsText, strings.TrimSpace(answers[len(answers)-1]))
		assert.Empty(t, c.texts(".notice.error"), "no error on the page")
		assert.Empty(t, c.texts(".notice.stopped"), "nothing was stopped")

		assert.EventuallyWithT(t, func(ct *assert.CollectT) {
			tasks, cancelled := peerTasks(ct, peer)
			ids := newKeys(before, tasks)
			if assert.Len(ct, ids, 1, "new tasks at the peer") {
				assert.False(ct, cancelled[ids[0]], "the reload cancelled the sub-agent's task")
				assert.Equal(ct, "TASK_STATE_COMPLETED", tasks[ids[0]])
			}
		}, eventualWait, 100*time.Millisecond)
		assertRunEndedBy(t, bt, thread, "completed")
		c.screenshot("detach-3-completed")
	})

	t.Run("leaving the thread keeps its run; coming back and Stop cancels it", func(t *testing.T) {
		c.t = t
		before, _ := peerTasks(t, peer)
		thread := startSlow()
		c.do(chromedp.Click(chromedp.CSS("#new-chat"))) // leave: the page closes its stream
		require.NotEqual(t, thread, c.threadID())
		c.waitIdle(0)
		// Come back through the URL, as the thread list's link does: the run went on.
		c.do(chromedp.Navigate(bt.URL + "/#thread=" + thread))
		c.pollPage(`document.querySelector('#status').dataset.state === 'running'`, "the page did not re-attach to the run it left")
		at := evalJS[float64](c, subagentStepJS)
		c.pollPage(fmt.Sprintf(subagentStepJS+` > %v`, at), "the run did not go on while the page was away")
		n := c.runsEnded()
		c.do(chromedp.Click(chromedp.CSS("#stop")))
		c.waitIdle(n + 1)
		assert.Equal(t, []string{"The run was cancelled."}, c.texts(".notice.stopped"))
		assertPeerCancelled(t, peer, before)
		assertRunEndedBy(t, bt, thread, "cancelled: stop requested")
		c.screenshot("detach-4-left-and-stopped")
	})

	c.t = t
	assert.Empty(t, b.Problems(), "uncaught exceptions or security errors in the page")
}
