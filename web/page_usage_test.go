package web

// The chat page shows what a thread's model calls used (GET agui/threads/{id} usage:
// tokens and cost) in its header, updated after each run, and a budget warning
// (CUSTOM baton.budget_warning) in words when one comes.

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/baton-dev/baton/web/browsertest"
)

// usageFake is a coordinator whose threads count usage: t-cost has spent something
// already, and each run adds 1,000 tokens in, 100 out and $0.50.
type usageFake struct {
	mu    sync.Mutex
	usage map[string][3]float64 // thread → input tokens, output tokens, USD
}

func (f *usageFake) thread(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	f.mu.Lock()
	u, ok := f.usage[id]
	f.mu.Unlock()
	w.Header().Set("Content-Type", "application/json")
	if !ok {
		w.WriteHeader(http.StatusNotFound)
		_ = json.NewEncoder(w).Encode(ev{"error": "THREAD_NOT_FOUND", "message": "No such thread."})
		return
	}
	_ = json.NewEncoder(w).Encode(ev{"threadId": id, "messages": []any{
		ev{"id": "u0", "role": "user", "content": "earlier question"},
		ev{"id": "a0", "role": "assistant", "content": "earlier answer"},
	}, "interrupts": []any{}, "usage": ev{"inputTokens": u[0], "outputTokens": u[1], "costUsd": u[2]}})
}

func (f *usageFake) run(w http.ResponseWriter, r *http.Request) {
	var in map[string]any
	if err := json.NewDecoder(r.Body).Decode(&in); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	thread, _ := in["threadId"].(string)
	run, _ := in["runId"].(string)
	w.Header().Set("Content-Type", "text/event-stream")
	rc := http.NewResponseController(w)
	send := func(e ev) {
		b, _ := json.Marshal(e)
		fmt.Fprintf(w, "data: %s\n\n", b)
		_ = rc.Flush()
	}
	send(ev{"type": "RUN_STARTED", "threadId": thread, "runId": run})
	send(ev{"type": "CUSTOM", "name": "baton.budget_warning", "value": ev{"budget": "run", "unit": "usd", "used": 0.8, "limit": 1, "remaining": 0.2}})
	send(ev{"type": "CUSTOM", "name": "baton.usage", "value": ev{"inputTokens": 1000, "outputTokens": 100, "costUsd": 0.5}})
	send(ev{"type": "TEXT_MESSAGE_START", "messageId": "m-" + run, "role": "assistant"})
	send(ev{"type": "TEXT_MESSAGE_CONTENT", "messageId": "m-" + run, "delta": "Done, at a price."})
	send(ev{"type": "TEXT_MESSAGE_END", "messageId": "m-" + run})
	// The run's usage is in the store before its end reaches the client.
	f.mu.Lock()
	u := f.usage[thread]
	f.usage[thread] = [3]float64{u[0] + 1000, u[1] + 100, u[2] + 0.5}
	f.mu.Unlock()
	send(ev{"type": "RUN_FINISHED", "threadId": thread, "runId": run, "outcome": ev{"type": "success"}})
}

func TestPageUsage(t *testing.T) {
	b := browsertest.Start(t, browsertest.Options{})
	f := &usageFake{usage: map[string][3]float64{"t-cost": {1200, 34, 0.0123}}}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /agui", f.run)
	mux.HandleFunc("GET /agui/threads/{id}", f.thread)
	mux.HandleFunc("GET /agui/threads", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(ev{"threads": []any{}})
	})
	mux.Handle("/", New(Options{Suggestions: func() []string { return pageSuggestions }}))
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	p := &page{t: t, b: b, url: srv.URL + "/"}
	usageText := func(want string) {
		t.Helper()
		_, err := chromedp.Run(p.b.Ctx, chromedp.Poll[chromedp.Void](fmt.Sprintf(
			`(() => { const u = document.querySelector('#usage'); return !u.hidden && u.textContent === %q; })()`, want),
			chromedp.WithPollingInterval(20*time.Millisecond), chromedp.WithPollingTimeout(10*time.Second)))
		require.NoError(t, err, "usage shown %q, want %q", p.text("#usage"), want)
	}

	// A thread that has spent something shows it when it is opened.
	p.do(chromedp.Navigate(p.url+"#thread=t-cost"), chromedp.WaitVisible(chromedp.CSS("#input")))
	p.waitIdle(0)
	usageText("1,234 tokens · $0.0123")
	assert.Equal(t, "1200", p.attr("#usage", "data-input-tokens"))
	assert.Equal(t, "34", p.attr("#usage", "data-output-tokens"))
	assert.Contains(t, p.attr("#usage", "title"), "1,200 tokens in, 34 out, $0.0123")

	// A run's cost is added once it ends, and its budget warning is said in words.
	p.send("spend")
	usageText("2,334 tokens · $0.5123")
	assert.Equal(t, "0.5123", p.attr("#usage", "data-cost-usd"))
	require.Equal(t, 1, p.count(".notice.budget"), "one warning")
	assert.Equal(t, "This run has used 80% of its budget: $0.80 of $1.00 ($0.20 left).", p.text(".notice.budget .notice-text"))
	assert.Equal(t, "usd", p.attr(".notice.budget", "data-unit"))
	assert.Zero(t, p.count(".notice.custom"), "baton.usage is not shown as a raw event")

	// A new chat has spent nothing: nothing is shown.
	p.do(chromedp.Click(chromedp.CSS("#new-chat")))
	p.waitIdle(0)
	assert.True(t, eval[bool](p, `document.querySelector('#usage').hidden`))
	assert.Empty(t, b.Problems(), "the page ran cleanly")
}
