package web

// The chat page restores a thread from the coordinator: against fake thread
// endpoints it renders the stored messages with their tagged results, shows an open
// interrupt whose answer resumes the same thread with the whole history, follows a running
// run through the reconnect stream without showing a replayed message twice, and lists the
// threads to switch between them.

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"

	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/baton-dev/baton/web/browsertest"
)

// storedThreads is what the fake coordinator keeps: t-wait has an open interrupt, t-run a
// running run whose first message is already stored.
var storedThreads = map[string]any{
	"t-wait": map[string]any{
		"threadId": "t-wait",
		"messages": []any{
			ev{"id": "u1", "role": "user", "content": "research Go generics"},
			ev{"id": "a1", "role": "assistant", "content": "Asking research.", "toolCalls": []any{
				ev{"id": "call_1", "type": "function", "function": ev{"name": "research", "arguments": `{"prompt":"Go generics"}`}},
			}},
			ev{"id": "tr1", "role": "tool", "toolCallId": "call_1", "content": "[COMPLETED]\nGenerics arrived in Go 1.18."},
			ev{"id": "u2", "role": "user", "content": "plan a trip"},
			ev{"id": "a2", "role": "assistant", "content": "", "toolCalls": []any{
				ev{"id": "call_2", "type": "function", "function": ev{"name": "travel", "arguments": `{"prompt":"plan a trip"}`}},
			}},
		},
		"interrupts": []any{ev{"id": "i1", "reason": "input_required", "toolCallId": "call_2", "message": "Which dates?"}},
	},
	"t-run": map[string]any{
		"threadId": "t-run",
		"messages": []any{
			ev{"id": "u9", "role": "user", "content": "write slowly"},
			ev{"id": "a9", "role": "assistant", "content": "Once upon"},
		},
		"interrupts": []any{},
		"run":        ev{"runId": "r9", "status": "running"},
	},
}

func startThreadPage(t *testing.T) (*page, *atomic.Int32) {
	t.Helper()
	b := browsertest.Start(t, browsertest.Options{})
	fake := newFakeAGUI()
	var followed atomic.Int32
	writeJSON := func(w http.ResponseWriter, status int, v any) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(status)
		_ = json.NewEncoder(w).Encode(v)
	}
	mux := http.NewServeMux()
	mux.Handle("POST /agui", fake)
	mux.HandleFunc("GET /agui/threads", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, http.StatusOK, ev{"threads": []any{
			ev{"threadId": "t-wait", "updatedAt": "2026-11-23T06:00:00Z", "running": false, "openInterrupts": 1, "title": "research Go generics"},
			ev{"threadId": "t-run", "updatedAt": "2026-11-23T05:00:00Z", "running": true, "openInterrupts": 0},
		}})
	})
	mux.HandleFunc("GET /agui/threads/{id}", func(w http.ResponseWriter, r *http.Request) {
		doc, ok := storedThreads[r.PathValue("id")]
		if !ok {
			writeJSON(w, http.StatusNotFound, ev{"error": "THREAD_NOT_FOUND", "message": "No such thread."})
			return
		}
		writeJSON(w, http.StatusOK, doc)
	})
	mux.HandleFunc("GET /agui/threads/t-run/runs/r9/events", func(w http.ResponseWriter, r *http.Request) {
		followed.Add(1)
		if r.URL.Query().Get("after") != "0" {
			http.Error(w, "the page replays from the start", http.StatusBadRequest)
			return
		}
		w.Header().Set("Content-Type", "text/event-stream")
		// The replay restates the stored message a9 from its start, then the run goes on.
		for i, e := range []ev{
			{"type": "RUN_STARTED", "threadId": "t-run", "runId": "r9"},
			{"type": "TEXT_MESSAGE_START", "messageId": "a9", "role": "assistant"},
			{"type": "TEXT_MESSAGE_CONTENT", "messageId": "a9", "delta": "Once upon"},
			{"type": "TEXT_MESSAGE_CONTENT", "messageId": "a9", "delta": " a time."},
			{"type": "TEXT_MESSAGE_END", "messageId": "a9"},
			{"type": "RUN_FINISHED", "threadId": "t-run", "runId": "r9", "outcome": ev{"type": "success"}},
		} {
			data, _ := json.Marshal(e)
			fmt.Fprintf(w, "id: %d\ndata: %s\n\n", i+1, data)
		}
	})
	mux.Handle("/", New(Options{Suggestions: func() []string { return pageSuggestions }}))
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	return &page{t: t, b: b, url: srv.URL + "/", fake: fake}, &followed
}

func TestPageThreads(t *testing.T) {
	p, followed := startThreadPage(t)

	t.Run("a new page puts a new thread id in the URL", func(t *testing.T) {
		p.t = t
		p.load()
		hash := eval[string](p, `location.hash`)
		assert.Regexp(t, `^#thread=thread-[0-9a-f]{24}$`, hash)
		p.send("hello")
		assert.Equal(t, hash, "#thread="+p.fake.last(t)["threadId"].(string), "the run is posted on the URL's thread")
	})

	t.Run("a thread with an open interrupt is restored and the answer resumes it", func(t *testing.T) {
		p.t = t
		p.do(chromedp.Navigate(p.url+"#thread=t-wait"), chromedp.Reload(), chromedp.WaitVisible(chromedp.CSS("#input")))
		p.waitIdle(0)
		assert.Equal(t, 2, p.count(".msg.user"))
		assert.Equal(t, "Asking research.", p.text(`.msg.assistant[data-message-id="a1"] .msg-text`))
		assert.Equal(t, "COMPLETED", p.text(`.tool[data-tool-call-id="call_1"] .badge`), "the tagged result is restored")
		assert.Equal(t, "waiting for you", p.text(`.tool[data-tool-call-id="call_2"] .badge`))
		assert.Equal(t, "Which dates?", p.text(`.interrupt[data-interrupt-id="i1"][data-state="open"] .question`))
		assert.True(t, eval[bool](p, `document.querySelector('#input').disabled`), "the composer waits for the answer")

		n := p.runsEnded()
		box := `.interrupt[data-interrupt-id="i1"]`
		p.do(chromedp.SendKeys(chromedp.CSS(box+" textarea, "+box+" input"), "12-19 May"), chromedp.Click(chromedp.CSS(box+" button.primary")))
		p.waitIdle(n + 1)
		in := p.fake.last(t)
		assert.Equal(t, "t-wait", in["threadId"])
		resume, _ := in["resume"].([]any)
		require.Len(t, resume, 1)
		assert.Equal(t, "i1", resume[0].(map[string]any)["interruptId"])
		msgs, _ := in["messages"].([]any)
		var ids []string
		for _, m := range msgs {
			ids = append(ids, m.(map[string]any)["id"].(string))
		}
		assert.Equal(t, []string{"u1", "a1", "tr1", "u2", "a2"}, ids, "the restored history is sent once, in order")
		tc := msgs[1].(map[string]any)["toolCalls"].([]any)
		require.Len(t, tc, 1, "a restored assistant message keeps its tool call once")
		assert.Equal(t, "answered", p.attr(box, "data-state"), "the resumed run closed the form")
	})

	t.Run("a running run is followed from its start without duplicates", func(t *testing.T) {
		p.t = t
		n := p.runsEnded()
		p.do(chromedp.Navigate(p.url + "#thread=t-run"))
		p.waitIdle(n + 1)
		assert.Equal(t, int32(1), followed.Load(), "the page followed the run once")
		assert.Equal(t, 1, p.count(".msg.assistant"), "the replayed message replaces the stored one")
		assert.Equal(t, "Once upon a time.", p.text(`.msg.assistant[data-message-id="a9"] .msg-text`))
		assert.Equal(t, 1, p.count(".msg.user"))
		assert.Equal(t, "idle", p.attr("#status", "data-state"))
	})

	t.Run("the thread list switches conversations", func(t *testing.T) {
		p.t = t
		p.do(chromedp.Click(chromedp.CSS("#threads summary")))
		_, err := chromedp.Run(p.b.Ctx, chromedp.Poll[chromedp.Void](`document.querySelectorAll('#thread-list a[data-thread-id]').length === 2`))
		require.NoError(t, err)
		assert.Equal(t, "true", p.attr(`#thread-list a[data-thread-id="t-run"]`, "aria-current"))
		assert.Contains(t, p.text(`#thread-list a[data-thread-id="t-wait"]`), "research Go generics")
		assert.Contains(t, p.text(`#thread-list a[data-thread-id="t-wait"]`), "waiting for you")
		eval[bool](p, `(() => { document.querySelector('#thread-list a[data-thread-id="t-wait"]').click(); return true; })()`)
		_, err = chromedp.Run(p.b.Ctx, chromedp.Poll[chromedp.Void](`!!document.querySelector('.interrupt[data-interrupt-id="i1"][data-state="open"]')`))
		require.NoError(t, err, "the other conversation with its open interrupt is shown")
		assert.Equal(t, "#thread=t-wait", eval[string](p, `location.hash`))
		assert.Equal(t, 0, p.count(`.msg.assistant[data-message-id="a9"]`))
	})

	t.Run("an unknown thread starts empty under its id", func(t *testing.T) {
		p.t = t
		p.do(chromedp.Navigate(p.url + "#thread=t-new"))
		p.waitIdle(0)
		assert.Equal(t, 0, p.count(".msg"))
		assert.Equal(t, 0, p.count(".notice.error"), "a thread the coordinator does not know yet is no error")
		p.send("hello")
		assert.Equal(t, "t-new", p.fake.last(t)["threadId"])
	})

	assert.Empty(t, p.b.Problems())
}
