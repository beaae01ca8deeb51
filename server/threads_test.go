package server

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"iter"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/baton-dev/baton/coordinator"
	"github.com/baton-dev/baton/internal/testutil/pgtest"
	"github.com/baton-dev/baton/llm"
	"github.com/baton-dev/baton/store"
)

// stepModel streams "a", then waits for next before it streams "b" and finishes: a run that
// is mid-text for as long as the test wants.
type stepModel struct{ next chan struct{} }

func (m stepModel) Stream(ctx context.Context, _ *llm.Request) iter.Seq2[llm.Delta, error] {
	return func(yield func(llm.Delta, error) bool) {
		if !yield(llm.Delta{Text: "a"}, nil) {
			return
		}
		select {
		case <-ctx.Done():
			yield(llm.Delta{}, ctx.Err())
			return
		case <-m.next:
		}
		if yield(llm.Delta{Text: "b"}, nil) {
			yield(llm.Delta{Done: &llm.Completion{FinishReason: "stop"}}, nil)
		}
	}
}

// frame is one SSE frame: its id line (-1 without one) and its event.
type frame struct {
	id int64
	ev map[string]any
}

// frameReader reads SSE frames one at a time.
type frameReader struct {
	t  testing.TB
	sc *bufio.Scanner
}

func newFrameReader(t testing.TB, r io.Reader) *frameReader {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	return &frameReader{t: t, sc: sc}
}

// next returns the next event frame, or false at the end of the stream.
func (fr *frameReader) next() (frame, bool) {
	f := frame{id: -1}
	for fr.sc.Scan() {
		line := fr.sc.Text()
		switch {
		case strings.HasPrefix(line, "id: "):
			n, err := strconv.ParseInt(strings.TrimPrefix(line, "id: "), 10, 64)
			require.NoError(fr.t, err)
			f.id = n
		case strings.HasPrefix(line, "data: "):
			require.NoError(fr.t, json.Unmarshal([]byte(strings.TrimPrefix(line, "data: ")), &f.ev))
		case line == "" && f.ev != nil:
			return f, true
		}
	}
	return f, false
}

func (fr *frameReader) all() []frame {
	var out []frame
	for {
		f, ok := fr.next()
		if !ok {
			return out
		}
		out = append(out, f)
	}
}

// replicas starts n servers, each with its own engine and its own store handle on one
// database (dsn): n replicas. Their heartbeat is short, so that a stop request that reaches
// a replica by polling is found quickly.
func replicas(t testing.TB, dsn string, model llm.Model, n int, cfg Config) []*httptest.Server {
	t.Helper()
	var out []*httptest.Server
	for range n {
		st, err := store.Open(context.Background(), dsn)
		require.NoError(t, err)
		e := newStartedEngine(t, coordinator.Config{Model: model, Store: st, Heartbeat: 50 * time.Millisecond, Lease: 10 * time.Second})
		c := cfg
		c.Engine = runsOf(e)
		srv := httptest.NewServer(New(c))
		t.Cleanup(func() {
			ctx, cancel := context.WithTimeout(context.Background(), time.Millisecond)
			defer cancel()
			_ = e.Stop(ctx)
			srv.Close()
			_ = st.Close()
		})
		out = append(out, srv)
	}
	return out
}

// sharedStores are the databases that replicas share. SQLite is not one: a second
// process (or handle) on one SQLite file is refused (one process per file).
var sharedStores = []struct {
	name string
	dsn  func(t testing.TB) string
}{
	{"postgres", func(t testing.TB) string { return pgtest.DSN(t) }},
}

// sqliteDSN is a new SQLite database for one engine.
func sqliteDSN(t testing.TB) string { return "sqlite:" + filepath.Join(t.TempDir(), "baton.db") }

func get(t *testing.T, url string, hdr ...string) *http.Response {
	t.Helper()
	return request(t, http.MethodGet, url, hdr...)
}

func request(t *testing.T, method, url string, hdr ...string) *http.Response {
	t.Helper()
	req, err := http.NewRequest(method, url, nil)
	require.NoError(t, err)
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	return resp
}

func decodeJSON(t *testing.T, resp *http.Response) map[string]any {
	t.Helper()
	defer resp.Body.Close()
	var out map[string]any
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&out))
	return out
}

func TestSSEFramesCarryIDs(t *testing.T) {
	release := make(chan struct{})
	close(release)
	srv, _ := newTestServer(t, blockingModel{release: release}, Config{})
	resp := post(t, srv.URL+"/agui", body("ids", "r1", ""))
	defer resp.Body.Close()
	frames := newFrameReader(t, resp.Body).all()
	require.NotEmpty(t, frames)
	for i, f := range frames {
		assert.Equal(t, int64(i+1), f.id, "frame %d (%v)", i, f.ev["type"])
	}
	assert.Equal(t, "RUN_FINISHED", frames[len(frames)-1].ev["type"])
}

// TestReconnectThroughAnotherReplica drops the stream mid-text on replica A, reconnects with
// Last-Event-ID through replica B, and checks that the two parts make the whole stream:
// nothing missing, nothing twice, and a second stream that opens as a client expects.
func TestReconnectThroughAnotherReplica(t *testing.T) {
	for _, b := range sharedStores {
		t.Run(b.name, func(t *testing.T) {
			model := stepModel{next: make(chan struct{})}
			reps := replicas(t, b.dsn(t), model, 2, Config{})

			resp := post(t, reps[0].URL+"/agui", body("rc", "r1", ""))
			require.Equal(t, http.StatusOK, resp.StatusCode)
			fr := newFrameReader(t, resp.Body)
			var before []frame
			for {
				f, ok := fr.next()
				require.True(t, ok, "the stream ended before the first text")
				before = append(before, f)
				if f.ev["type"] == "TEXT_MESSAGE_CONTENT" {
					break
				}
			}
			last := before[len(before)-1].id

			// A second POST on the busy thread is refused by the other replica too.
			busy := post(t, reps[1].URL+"/agui", body("rc", "r2", ""))
			assert.Equal(t, http.StatusConflict, busy.StatusCode)
			busy.Body.Close()

			re := get(t, reps[1].URL+"/agui/threads/rc/runs/r1/events", "Last-Event-ID", strconv.FormatInt(last, 10))
			require.Equal(t, http.StatusOK, re.StatusCode)
			assert.Equal(t, "text/event-stream", re.Header.Get("Content-Type"))
			rr := newFrameReader(t, re.Body)
			// The replay restates what is open at the point of reconnection.
			f, ok := rr.next()
			require.True(t, ok)
			assert.Equal(t, "RUN_STARTED", f.ev["type"])
			assert.Equal(t, last, f.id)
			f, ok = rr.next()
			require.True(t, ok)
			assert.Equal(t, "TEXT_MESSAGE_START", f.ev["type"])
			assert.Equal(t, last, f.id)

			close(model.next)
			after := rr.all()
			re.Body.Close()
			rest := fr.all()
			resp.Body.Close()

			// The live stream went on (the first connection was not dropped here) and is
			// the reference: the replayed part equals what the live stream sent after last.
			require.Equal(t, len(rest), len(after))
			for i := range rest {
				assert.Equal(t, rest[i].id, after[i].id)
				assert.Equal(t, rest[i].ev, after[i].ev)
			}
			require.NotEmpty(t, after)
			assert.Equal(t, "RUN_FINISHED", after[len(after)-1].ev["type"])
			for i, f := range append(before, rest...) {
				assert.Equal(t, int64(i+1), f.id)
			}

			// Replaying from the start gives the whole stream.
			full := newFrameReader(t, get(t, reps[0].URL+"/agui/threads/rc/runs/r1/events").Body).all()
			assert.Equal(t, len(before)+len(rest), len(full))

			// The thread is free on both replicas now.
			evs := readEvents(t, post(t, reps[1].URL+"/agui", body("rc", "r3", "")))
			assert.Equal(t, "RUN_FINISHED", evs[len(evs)-1]["type"])
		})
	}
}

// TestOwnershipSurvivesRestart: a thread's owner is in the store, so a second engine on the
// same store (a restart, or another replica) refuses another principal.
func TestOwnershipSurvivesRestart(t *testing.T) {
	release := make(chan struct{})
	close(release)
	reps := replicas(t, pgtest.DSN(t), blockingModel{release: release}, 2, Config{AuthTokens: []string{"alpha", "beta"}})
	evs := readEvents(t, post(t, reps[0].URL+"/agui", body("owned", "r1", ""), "Authorization", "Bearer alpha"))
	require.Equal(t, "RUN_FINISHED", evs[len(evs)-1]["type"])

	resp := post(t, reps[1].URL+"/agui", body("owned", "r2", ""), "Authorization", "Bearer beta")
	assert.Equal(t, http.StatusForbidden, resp.StatusCode)
	resp.Body.Close()
	// Stop answers another principal as for a thread that does not exist (DESIGN §3).
	resp = post(t, reps[1].URL+"/agui/threads/owned/runs/r1/stop", "", "Authorization", "Bearer beta")
	assert.Equal(t, http.StatusNotFound, resp.StatusCode)
	resp.Body.Close()
	evs = readEvents(t, post(t, reps[1].URL+"/agui", body("owned", "r2", ""), "Authorization", "Bearer alpha"))
	assert.Equal(t, "RUN_FINISHED", evs[len(evs)-1]["type"], "the owner goes on on the other replica")
}

func TestThreadEndpoints(t *testing.T) {
	release := make(chan struct{})
	close(release)
	srv, _ := newTestServer(t, blockingModel{release: release}, Config{AuthTokens: []string{"alpha", "beta"}})
	alice, bob := []string{"Authorization", "Bearer alpha"}, []string{"Authorization", "Bearer beta"}
	evs := readEvents(t, post(t, srv.URL+"/agui", body("t1", "r1", ""), alice...))
	require.Equal(t, "RUN_FINISHED", evs[len(evs)-1]["type"])

	list := decodeJSON(t, get(t, srv.URL+"/agui/threads", alice...))
	threads := list["threads"].([]any)
	require.Len(t, threads, 1)
	th := threads[0].(map[string]any)
	assert.Equal(t, "t1", th["threadId"])
	assert.Equal(t, "hi", th["title"])
	assert.Equal(t, false, th["running"])
	assert.Equal(t, float64(0), th["openInterrupts"])
	assert.NotEmpty(t, th["updatedAt"])
	assert.Empty(t, decodeJSON(t, get(t, srv.URL+"/agui/threads", bob...))["threads"], "bob sees none of alice's threads")

	doc := decodeJSON(t, get(t, srv.URL+"/agui/threads/t1", alice...))
	assert.Equal(t, "t1", doc["threadId"])
	msgs := doc["messages"].([]any)
	require.Len(t, msgs, 2, "the user message and the assistant's answer")
	assert.Equal(t, map[string]any{"id": "u", "role": "user", "content": "hi"}, msgs[0])
	assert.Equal(t, "assistant", msgs[1].(map[string]any)["role"])
	assert.Equal(t, "hi", msgs[1].(map[string]any)["content"])
	assert.Empty(t, doc["interrupts"])
	assert.Nil(t, doc["run"], "no run is going on")

	// A client that sends the full history again is deduplicated by message id.
	evs = readEvents(t, post(t, srv.URL+"/agui", `{"threadId":"t1","runId":"r2","protocolVersion":"1.0","messages":[{"id":"u","role":"user","content":"hi"},{"id":"u2","role":"user","content":"again"}]}`, alice...))
	require.Equal(t, "RUN_FINISHED", evs[len(evs)-1]["type"])
	doc = decodeJSON(t, get(t, srv.URL+"/agui/threads/t1", alice...))
	assert.Len(t, doc["messages"], 4)

	tests := []struct {
		name, method, path string
		hdr                []string
		status             int
		code               string
	}{
		{"other principal reads", "GET", "/agui/threads/t1", bob, 404, "THREAD_NOT_FOUND"},
		{"unknown thread", "GET", "/agui/threads/nope", alice, 404, "THREAD_NOT_FOUND"},
		{"bad thread id", "GET", "/agui/threads/bad%20id", alice, 400, "INVALID_INPUT"},
		{"no token", "GET", "/agui/threads/t1", nil, 401, "UNAUTHORIZED"},
		{"bad limit", "GET", "/agui/threads?limit=0", alice, 400, "INVALID_INPUT"},
		{"other principal deletes", "DELETE", "/agui/threads/t1", bob, 404, "THREAD_NOT_FOUND"},
		{"events: other principal", "GET", "/agui/threads/t1/runs/r1/events", bob, 404, "THREAD_NOT_FOUND"},
		{"events: unknown run", "GET", "/agui/threads/t1/runs/nope/events", alice, 404, "RUN_NOT_FOUND"},
		{"events: malformed after", "GET", "/agui/threads/t1/runs/r1/events?after=abc", alice, 400, "INVALID_LAST_EVENT_ID"},
		{"events: negative after", "GET", "/agui/threads/t1/runs/r1/events?after=-1", alice, 400, "INVALID_LAST_EVENT_ID"},
		{"events: id past the run's end", "GET", "/agui/threads/t1/runs/r1/events?after=9999", alice, 400, "INVALID_LAST_EVENT_ID"},
		{"events: bad run id", "GET", "/agui/threads/t1/runs/a%20b/events", alice, 400, "INVALID_INPUT"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			eb := decodeJSON(t, request(t, tt.method, srv.URL+tt.path, tt.hdr...))
			assert.Equal(t, tt.code, eb["error"])
			assert.NotEmpty(t, eb["message"])
		})
	}
	// The malformed Last-Event-ID header is refused like ?after=.
	eb := decodeJSON(t, get(t, srv.URL+"/agui/threads/t1/runs/r1/events", append(alice, "Last-Event-ID", "x1")...))
	assert.Equal(t, "INVALID_LAST_EVENT_ID", eb["error"])

	// Nothing was changed by the refusals.
	doc = decodeJSON(t, get(t, srv.URL+"/agui/threads/t1", alice...))
	assert.Len(t, doc["messages"], 4)

	// A reconnect after the end restates the start and the terminal event.
	full := newFrameReader(t, get(t, srv.URL+"/agui/threads/t1/runs/r1/events", alice...).Body).all()
	require.NotEmpty(t, full)
	end := full[len(full)-1].id
	frames := newFrameReader(t, get(t, srv.URL+"/agui/threads/t1/runs/r1/events?after="+strconv.FormatInt(end, 10), alice...).Body).all()
	require.Len(t, frames, 2)
	assert.Equal(t, end, frames[1].id)
	assert.Equal(t, "RUN_STARTED", frames[0].ev["type"])
	assert.Equal(t, "RUN_FINISHED", frames[1].ev["type"])

	resp := request(t, "DELETE", srv.URL+"/agui/threads/t1", alice...)
	assert.Equal(t, http.StatusNoContent, resp.StatusCode)
	resp.Body.Close()
	eb = decodeJSON(t, get(t, srv.URL+"/agui/threads/t1", alice...))
	assert.Equal(t, "THREAD_NOT_FOUND", eb["error"])
	eb = decodeJSON(t, get(t, srv.URL+"/agui/threads/t1/runs/r1/events", alice...))
	assert.Equal(t, "THREAD_NOT_FOUND", eb["error"])
}

func TestDeleteRunningThreadRefused(t *testing.T) {
	srv, _ := newTestServer(t, blockingModel{}, Config{})
	run := post(t, srv.URL+"/agui", body("busy", "r1", ""))
	require.Equal(t, http.StatusOK, run.StatusCode)
	defer run.Body.Close()
	fr := newFrameReader(t, run.Body)
	_, ok := fr.next() // RUN_STARTED: the run is registered
	require.True(t, ok)
	eb := decodeJSON(t, request(t, "DELETE", srv.URL+"/agui/threads/busy"))
	assert.Equal(t, "THREAD_BUSY", eb["error"])
	doc := decodeJSON(t, get(t, srv.URL+"/agui/threads/busy"))
	assert.Equal(t, "busy", doc["threadId"], "the refused delete changed nothing")
	assert.Equal(t, map[string]any{"runId": "r1", "status": "running"}, doc["run"])
}

// TestStopThroughAnotherReplica: a stop that reaches a replica other than the run's owner is
// recorded in the store and applied by the owner (NOTIFY on PostgreSQL, polling on SQLite):
// the run's stream ends with the cancelled outcome.
func TestStopThroughAnotherReplica(t *testing.T) {
	for _, b := range sharedStores {
		t.Run(b.name, func(t *testing.T) {
			reps := replicas(t, b.dsn(t), blockingModel{}, 2, Config{})
			resp := post(t, reps[0].URL+"/agui", body("stop", "r1", ""))
			require.Equal(t, http.StatusOK, resp.StatusCode)
			defer resp.Body.Close()
			fr := newFrameReader(t, resp.Body)
			_, ok := fr.next() // RUN_STARTED: the run is recorded
			require.True(t, ok)

			nf := post(t, reps[1].URL+"/agui/threads/stop/runs/nope/stop", "")
			assert.Equal(t, http.StatusNotFound, nf.StatusCode, "an unknown run is not found on the other replica either")
			nf.Body.Close()

			st := post(t, reps[1].URL+"/agui/threads/stop/runs/r1/stop", "")
			assert.Equal(t, http.StatusAccepted, st.StatusCode)
			st.Body.Close()
			rest := fr.all()
			require.NotEmpty(t, rest)
			last := rest[len(rest)-1].ev
			assert.Equal(t, "RUN_FINISHED", last["type"])
			assert.Equal(t, map[string]any{"type": "cancelled"}, last["outcome"])

			again := post(t, reps[1].URL+"/agui/threads/stop/runs/r1/stop", "")
			assert.Equal(t, http.StatusConflict, again.StatusCode, "the run has finished")
			again.Body.Close()
		})
	}
}
