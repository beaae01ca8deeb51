package server

import (
	"context"
	"iter"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/baton-dev/baton/coordinator"
	"github.com/baton-dev/baton/llm"
)

// gateModel answers "wait" only once gate is closed, and anything else at once with a
// ten-word answer (so a finished run's log is longer than a waiting run's).
type gateModel struct{ gate chan struct{} }

func (m gateModel) Stream(ctx context.Context, req *llm.Request) iter.Seq2[llm.Delta, error] {
	return func(yield func(llm.Delta, error) bool) {
		last := req.Messages[len(req.Messages)-1]
		if last.Content == "wait" {
			select {
			case <-ctx.Done():
				yield(llm.Delta{}, ctx.Err())
				return
			case <-m.gate:
			}
		}
		for range 10 {
			if !yield(llm.Delta{Text: "word "}, nil) {
				return
			}
		}
		yield(llm.Delta{Done: &llm.Completion{FinishReason: "stop"}}, nil)
	}
}

// TestReconnectBadInputWhileRunning: every bad reconnect request against a run that is going
// on gets a structured 4xx, and none of them changes anything: the run goes on to its normal
// end, its log is exactly its live stream, and the thread holds the same messages.
//
// A Last-Event-ID is a bare event number (DESIGN §3), so one taken from another run of the
// same thread is recognised only when it is past this run's log; below it, it names an event
// of this run and is served as such (design/event-log.md).
func TestReconnectBadInputWhileRunning(t *testing.T) {
	gate := make(chan struct{})
	srv, _ := newTestServer(t, gateModel{gate: gate}, Config{AuthTokens: []string{"alpha", "beta"}})
	alice, bob := []string{"Authorization", "Bearer alpha"}, []string{"Authorization", "Bearer beta"}
	msg := func(run, text string) string {
		return `{"threadId":"bad","runId":"` + run + `","protocolVersion":"1.0","messages":[{"id":"m-` + run + `","role":"user","content":"` + text + `"}]}`
	}

	// An earlier run of the thread, finished: its last id is past the running run's log.
	r0 := newFrameReader(t, post(t, srv.URL+"/agui", msg("r0", "go"), alice...).Body).all()
	require.Equal(t, "RUN_FINISHED", r0[len(r0)-1].ev["type"])
	otherRunID := r0[len(r0)-1].id

	live := post(t, srv.URL+"/agui", msg("r1", "wait"), alice...)
	require.Equal(t, http.StatusOK, live.StatusCode)
	defer live.Body.Close()
	fr := newFrameReader(t, live.Body)
	var seen []frame
	for len(seen) < 1 { // RUN_STARTED: the run is registered and its first event logged
		f, ok := fr.next()
		require.True(t, ok)
		seen = append(seen, f)
	}
	require.Less(t, int64(len(seen)), otherRunID, "the other run's last id must lie past this run's log")
	before := decodeJSON(t, get(t, srv.URL+"/agui/threads/bad", alice...))
	// The run's user message is stored with its start, before RUN_STARTED is sent: the
	// thread read on RUN_STARTED has it (else "before" and "after" below differ by it).
	msgs, _ := before["messages"].([]any)
	require.Len(t, msgs, 3, "the first run's two messages and this run's user message")
	assert.Equal(t, "m-r1", msgs[2].(map[string]any)["id"])

	events := "/agui/threads/bad/runs/r1/events"
	tests := []struct {
		name, path string
		hdr        []string
		status     int
		code       string
	}{
		{"malformed Last-Event-ID", events, append([]string{"Last-Event-ID", "abc"}, alice...), 400, "INVALID_LAST_EVENT_ID"},
		{"malformed after", events + "?after=1x", alice, 400, "INVALID_LAST_EVENT_ID"},
		{"negative Last-Event-ID", events, append([]string{"Last-Event-ID", "-3"}, alice...), 400, "INVALID_LAST_EVENT_ID"},
		{"huge Last-Event-ID (overflows int64)", events, append([]string{"Last-Event-ID", "99999999999999999999999"}, alice...), 400, "INVALID_LAST_EVENT_ID"},
		{"largest int64 (past the log)", events, append([]string{"Last-Event-ID", "9223372036854775807"}, alice...), 400, "INVALID_LAST_EVENT_ID"},
		{"Last-Event-ID of another run of the thread", events, append([]string{"Last-Event-ID", strconv.FormatInt(otherRunID, 10)}, alice...), 400, "INVALID_LAST_EVENT_ID"},
		{"unknown thread", "/agui/threads/nope/runs/r1/events", alice, 404, "THREAD_NOT_FOUND"},
		{"unknown run", "/agui/threads/bad/runs/nope/events", alice, 404, "RUN_NOT_FOUND"},
		{"another principal's thread", events, bob, 404, "THREAD_NOT_FOUND"},
		{"no token", events, nil, 401, "UNAUTHORIZED"},
		{"bad run id", "/agui/threads/bad/runs/a%20b/events", alice, 400, "INVALID_INPUT"},
		{"bad thread id", "/agui/threads/a%20b/runs/r1/events", alice, 400, "INVALID_INPUT"},
	}
	// The ids past the log are refused only after the catch-up wait (the log may lag the
	// live stream a little): run the cases side by side.
	t.Run("refused", func(t *testing.T) {
		for _, tt := range tests {
			t.Run(tt.name, func(t *testing.T) {
				t.Parallel()
				resp := get(t, srv.URL+tt.path, tt.hdr...)
				assert.Equal(t, tt.status, resp.StatusCode)
				assert.Contains(t, resp.Header.Get("Content-Type"), "application/json")
				eb := decodeJSON(t, resp)
				assert.Equal(t, tt.code, eb["error"])
				assert.NotEmpty(t, eb["message"])
			})
		}
	})

	// Nothing changed: the run is still going on, the thread is as it was.
	after := decodeJSON(t, get(t, srv.URL+"/agui/threads/bad", alice...))
	assert.Equal(t, before, after, "a refused reconnect changed the thread")
	run, _ := after["run"].(map[string]any)
	require.NotNil(t, run, "the run is still going on")
	assert.Equal(t, "r1", run["runId"])

	// A Last-Event-ID below the log's end is an event of this run by construction: served.
	ok := get(t, srv.URL+events, append([]string{"Last-Event-ID", "1"}, alice...)...)
	assert.Equal(t, http.StatusOK, ok.StatusCode)
	ok.Body.Close()

	// The run ends normally, and its log is exactly its live stream: no refusal left a trace.
	close(gate)
	seen = append(seen, fr.all()...)
	require.Equal(t, "RUN_FINISHED", seen[len(seen)-1].ev["type"])
	logged := newFrameReader(t, get(t, srv.URL+events, alice...).Body).all()
	require.Equal(t, len(seen), len(logged), "the log holds the live stream's events, no more")
	for i := range seen {
		assert.Equal(t, seen[i].id, logged[i].id)
		assert.Equal(t, seen[i].ev, logged[i].ev)
	}
	doc := decodeJSON(t, get(t, srv.URL+"/agui/threads/bad", alice...))
	assert.Len(t, doc["messages"], 4, "two user messages and two answers")
}

// lockedBuffer is a log sink safe for concurrent writes.
type lockedBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) count(s string) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return strings.Count(l.b.String(), s)
}

// TestRefusedReconnectDoesNotAttach: under server.on_disconnect: detach a reconnect that is
// refused must not count as a watcher of the detached run: attaching and releasing would
// restart its reconnect grace (and hold the run for the catch-up wait). Each time the last
// watcher of a run goes, the engine logs that the run is detached: a refused reconnect adds
// no such line, a served one does.
func TestRefusedReconnectDoesNotAttach(t *testing.T) {
	var logs lockedBuffer
	e := newStartedEngine(t, coordinator.Config{Model: blockingModel{release: make(chan struct{})},
		OnDisconnect: coordinator.DisconnectDetach, ReconnectGrace: time.Hour,
		Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	srv := httptest.NewServer(New(Config{Engine: runsOf(e)}))
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		_ = e.Stop(ctx)
		srv.Close()
	})
	const detached = "client gone; run detached"
	live := post(t, srv.URL+"/agui", body("det", "r1", ""))
	require.Equal(t, http.StatusOK, live.StatusCode)
	_, ok := newFrameReader(t, live.Body).next() // RUN_STARTED
	require.True(t, ok)
	live.Body.Close()
	require.Eventually(t, func() bool { return logs.count(detached) == 1 }, 10*time.Second, 10*time.Millisecond,
		"the dropped POST detaches the run")

	events := srv.URL + "/agui/threads/det/runs/r1/events"
	for _, id := range []string{"999", "x"} {
		eb := decodeJSON(t, get(t, events, "Last-Event-ID", id))
		assert.Equal(t, "INVALID_LAST_EVENT_ID", eb["error"], id)
	}
	assert.Equal(t, 1, logs.count(detached), "a refused reconnect attached to the run")

	served := get(t, events, "Last-Event-ID", "1")
	require.Equal(t, http.StatusOK, served.StatusCode)
	_, ok = newFrameReader(t, served.Body).next()
	require.True(t, ok)
	served.Body.Close()
	assert.Eventually(t, func() bool { return logs.count(detached) == 2 }, 10*time.Second, 10*time.Millisecond,
		"a served reconnect attaches, and its end detaches the run again")
}
