package web

// The chat page's rough edges found by a first-hour user: where the page scrolls after an
// answer, how a failed call's retry advice reads, what the Chats list calls a chat.

import (
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

func TestPageFirstHour(t *testing.T) {
	p := startPage(t, browsertest.Options{})

	t.Run("answering an agent's question in the text form keeps the result in view", func(t *testing.T) {
		p.t = t
		p.load()
		// A conversation longer than the window, as after a few runs.
		for range 3 {
			p.send("delegate")
		}
		p.send("trip")
		field := `.interrupt[data-interrupt-id="int-trip-q"] textarea`
		require.Equal(t, 1, p.count(field), "the question has a text field")
		n := p.runsEnded()
		p.do(chromedp.SendKeys(chromedp.CSS(field), "12-19 May"),
			chromedp.Click(chromedp.CSS(`.interrupt[data-interrupt-id="int-trip-q"] button.primary`)))
		p.waitIdle(n + 1)
		p.screenshot("answered-text-form")
		assert.Positive(t, eval[float64](p, `window.scrollY`), "the page did not jump to the top")
		inView := `(() => { const r = document.querySelector('.msg.assistant[data-message-id="m-trip-done"]').getBoundingClientRect(); return r.top >= 0 && r.bottom <= window.innerHeight + 1; })()`
		assert.True(t, eval[bool](p, inView), "the answer to the question is in view")
	})

	t.Run("an agent's question says once that an answer is needed", func(t *testing.T) {
		p.t = t
		p.load()
		p.send("trip")
		assert.Equal(t, `The tool "travel" needs more detail from the user. Your decision is needed to go on. Answer below.`,
			p.text(`.notice.failure[data-kind="ambiguous_input"]`))
		visible := eval[string](p, `document.querySelector('#transcript').innerText`)
		assert.Equal(t, 1, strings.Count(visible, "to go on"), "said once: %q", visible)
	})

	t.Run("a failed call's retry advice reads as words, its JSON behind a toggle", func(t *testing.T) {
		p.t = t
		p.load()
		p.send("divide")
		card := `.tool[data-tool-call-id="call_d"]`
		assert.Equal(t, "RETRY", p.attr(card, "data-tag"))
		assert.Equal(t, "The call failed: division by zero\nThe model can correct the call and try again (2 tries left).", p.text(card+" .result-text"))
		assert.Equal(t, "The arguments do not match the tool's schema.\nThe argument “a” was \"ten\".\nThe model has no tries left for it.",
			p.text(`.tool[data-tool-call-id="call_v"] .result-text`))
		assert.Equal(t, "The tool \"demo__divide\" reported an error. The model may correct the call (retry 1 of 2). The model can try again.",
			p.text(`.notice.failure[data-kind="tool_error"]`), "no promise of a retry Baton does not make")

		visible := eval[string](p, `document.querySelector('#transcript').innerText`)
		for _, raw := range []string{`"valid_next_actions"`, `"error_message"`, "[RETRY:"} {
			assert.NotContains(t, visible, raw, "the JSON is folded away")
		}
		assert.False(t, eval[bool](p, `document.querySelector('`+card+` .result-raw').open`))
		p.do(chromedp.Click(chromedp.CSS(card + " .result-raw summary")))
		assert.True(t, eval[bool](p, `document.querySelector('`+card+` .result-raw').open`), "the toggle opens")
		json := eval[string](p, `document.querySelector('`+card+` .result-json').innerText`)
		assert.Contains(t, json, "[RETRY:tool_error]\n{\n")
		assert.Contains(t, json, `"error_message": "division by zero"`)
		assert.Equal(t, 0, p.count(`.tool[data-tag="COMPLETED"] .result-raw:not([hidden])`), "only retry results have the toggle")
		p.screenshot("retry-words")
	})

	t.Run("a run handed back ends in words, without a success or a JSON result", func(t *testing.T) {
		p.t = t
		p.load()
		p.send("handed back")
		assert.Equal(t, 1, p.count(".handoff.is-handoff"), "the handoff panel")
		assert.Equal(t, 0, p.count(".notice.result"), "Baton's {stopped, action} result is not shown as JSON")
		assert.Equal(t, "idle", p.attr("#status", "data-state"))
		assert.NotContains(t, eval[string](p, `document.querySelector('#transcript').innerText`), "capability_gap")
	})

	p.t = t
	assert.Empty(t, p.b.Problems())
}

// TestPageChatTitles: the Chats list names each chat by its first message, numbers chats
// whose names are the same (oldest first), and names an untitled chat by its time, never by
// its id.
func TestPageChatTitles(t *testing.T) {
	b := browsertest.Start(t, browsertest.Options{})
	mux := http.NewServeMux()
	mux.Handle("POST /agui", newFakeAGUI())
	mux.HandleFunc("GET /agui/threads", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(ev{"threads": []any{
			ev{"threadId": "t-3", "updatedAt": "2026-11-23T08:00:00Z", "title": "plan a trip to Lisbon"},
			ev{"threadId": "t-2", "updatedAt": "2026-11-23T07:00:00Z", "title": "research Go generics\nand more"},
			ev{"threadId": "t-1", "updatedAt": "2026-11-23T06:00:00Z", "title": "plan a trip to Lisbon"},
			ev{"threadId": "t-0", "updatedAt": "2026-11-23T05:00:00Z"},
		}})
	})
	mux.Handle("/", New(Options{}))
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	p := &page{t: t, b: b, url: srv.URL + "/"}
	p.load()
	p.do(chromedp.Click(chromedp.CSS("#threads summary")))
	_, err := chromedp.Run(p.b.Ctx, chromedp.Poll[chromedp.Void](`document.querySelectorAll('#thread-list a[data-thread-id]').length === 4`))
	require.NoError(t, err)
	titles := eval[[]string](p, `[...document.querySelectorAll('#thread-list .thread-title')].map((e) => e.textContent)`)
	require.Len(t, titles, 4)
	assert.Equal(t, "plan a trip to Lisbon (2)", titles[0])
	assert.Equal(t, "research Go generics", titles[1], "the first line")
	assert.Equal(t, "plan a trip to Lisbon (1)", titles[2])
	assert.True(t, strings.HasPrefix(titles[3], "Chat of "), "an untitled chat: %q", titles[3])
	assert.NotContains(t, titles[3], "t-0", "not its id")
	seen := map[string]bool{}
	for _, s := range titles {
		assert.False(t, seen[s], "two chats are called %q", s)
		seen[s] = true
	}
	assert.Equal(t, 4, p.count("#thread-list .thread-time"), "each chat says when it was last used")
	p.screenshot("chat-titles")
	assert.Empty(t, p.b.Problems())
}
