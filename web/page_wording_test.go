package web

// What the chat page says in the user's words: failures, approvals and answers, and a model
// answer that repeats a result tag or a continued task's note. The raw tags and codes stay
// in the tool card and in data attributes, where developers and tests read them.

import (
	"testing"

	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/baton-dev/baton/web/browsertest"
)

func TestPageWording(t *testing.T) {
	p := startPage(t, browsertest.Options{})

	t.Run("failures, sub-agent errors, tags and continuation notes", func(t *testing.T) {
		p.t = t
		p.load()
		p.send("wording")
		assert.Equal(t, []string{
			"The request is not clear enough to act on. Asking the model to take a smaller step.",
			"Research reported an error. The model can try again.",
		}, eval[[]string](p, `[...document.querySelectorAll('.notice.failure')].map(e => e.textContent)`))
		assert.Equal(t, []string{"ambiguous_input", "tool_error"}, eval[[]string](p, `[...document.querySelectorAll('.notice.failure')].map(e => e.dataset.kind)`),
			"the kind stays available to tools")

		sub := `.subagent[data-subagent-run-id="sa-call_w"]`
		assert.Equal(t, "failed", p.text(sub+" .sub-state"))
		assert.Equal(t, "A2A_UNREACHABLE", p.attr(sub, "data-code"))
		assert.Equal(t, "The travel agent could not be reached.", p.text(sub+" .sub-error"))

		card := `.tool[data-tool-call-id="call_w"]`
		assert.Contains(t, p.text(card+" .result-text"), "[COMPLETED]\nBooked for 12-19 May.", "the tool card keeps the raw result")
		assert.Contains(t, p.text(card+" .result-text"), "(continuation of task 3f1c2a9e")

		answer := p.text(`.msg.assistant[data-message-id="mw"] .msg-text`)
		assert.Equal(t, "Booked for 12-19 May.", answer, "no tag and no continuation note in the visible answer")

		assert.Equal(t, "asks", p.text(`.interrupt[data-interrupt-id="int-odd"] .role-tag`), "an unknown reason code is not shown")
		assert.Equal(t, "some_future_reason", p.attr(`.interrupt[data-interrupt-id="int-odd"]`, "data-reason"))

		visible := eval[string](p, `document.querySelector('#transcript').innerText`)
		for _, raw := range []string{"ambiguous_input", "tool_error", "narrow_scope", "(attempt", "A2A_UNREACHABLE", "some_future_reason"} {
			assert.NotContains(t, visible, raw, "developer wording on the page")
		}
		p.screenshot("wording")

		// The history the next run sends keeps what the model said, tags included.
		n := p.runsEnded()
		p.do(
			chromedp.SendKeys(chromedp.CSS(`.interrupt[data-interrupt-id="int-odd"] textarea`), "yes"),
			chromedp.Click(chromedp.CSS(`.interrupt[data-interrupt-id="int-odd"] button.primary`)),
		)
		p.waitIdle(n + 1)
		var said string
		for _, m := range p.fake.last(t)["messages"].([]any) {
			if mm := m.(map[string]any); mm["id"] == "mw" {
				said, _ = mm["content"].(string)
			}
		}
		assert.Contains(t, said, "[COMPLETED]\nBooked for 12-19 May.")
		assert.Contains(t, said, "(continuation of task 3f1c2a9e")
	})

	approve := func(t *testing.T, text string, act func(card string)) string {
		t.Helper()
		p.t = t
		p.load()
		p.send(text)
		card := `.interrupt.approval[data-interrupt-id="int-ap"]`
		n := p.runsEnded()
		act(card)
		p.waitIdle(n + 1)
		got := eval[[]string](p, `[...document.querySelectorAll('.msg.answer .msg-text')].map(e => e.textContent)`)
		require.Len(t, got, 1)
		return got[0]
	}
	t.Run("approval answers in words", func(t *testing.T) {
		assert.Equal(t, "Approved", approve(t, "approval", func(card string) {
			p.do(chromedp.Click(chromedp.CSS(card + ` button[data-action="approve"]`)))
		}))
		p.screenshot("approved")
		assert.Equal(t, "Approved, with changes: release: v2", approve(t, "approval", func(card string) {
			eval[bool](p, `(() => { document.querySelector('`+card+` [name="editedArgs.release"]').value = ""; return true })()`)
			p.do(chromedp.SendKeys(chromedp.CSS(card+` [name="editedArgs.release"]`), "v2"),
				chromedp.Click(chromedp.CSS(card+` button[data-action="approve"]`)))
		}))
		assert.Equal(t, "Denied: still live", approve(t, "approval", func(card string) {
			p.do(chromedp.SendKeys(chromedp.CSS(card+` input[name="reason"]`), "still live"),
				chromedp.Click(chromedp.CSS(card+` button[data-action="deny"]`)))
		}))
		assert.Equal(t, "Denied", approve(t, "approval", func(card string) {
			p.do(chromedp.Click(chromedp.CSS(card + ` button[data-action="deny"]`)))
		}))
		assert.Equal(t, "Run it again", approve(t, "in doubt", func(card string) {
			p.do(chromedp.Click(chromedp.CSS(card + ` button[data-action="approve"]`)))
		}))
		assert.Equal(t, "Not run again", approve(t, "in doubt", func(card string) {
			p.do(chromedp.Click(chromedp.CSS(card + ` button[data-action="deny"]`)))
		}))
		visible := eval[string](p, `document.querySelector('#transcript').innerText`)
		assert.NotContains(t, visible, "approved:", "the answer is not shown as a field dump")
		assert.NotContains(t, visible, "↩")
	})

	p.t = t
	assert.Empty(t, p.b.Problems())
}
