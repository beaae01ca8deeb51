package server

import (
	"bufio"
	"context"
	"encoding/json"
	"iter"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/baton-dev/baton/coordinator"
	"github.com/baton-dev/baton/internal/testutil"
	"github.com/baton-dev/baton/internal/testutil/pgtest"
	"github.com/baton-dev/baton/llm"
	"github.com/baton-dev/baton/store"
)

// TestMain fails the package if a test leaves a goroutine behind, and stops the throwaway
// PostgreSQL server if a test started one.
func TestMain(m *testing.M) {
	if os.Getenv(loadPeerEnv) != "" {
		runLoadPeer()
		return
	}
	testutil.VerifyTestMain(m, pgtest.Stop)
}

// blockingModel streams nothing until its context ends, or answers "hi" when release is closed.
type blockingModel struct{ release chan struct{} }

func (m blockingModel) Stream(ctx context.Context, _ *llm.Request) iter.Seq2[llm.Delta, error] {
	return func(yield func(llm.Delta, error) bool) {
		select {
		case <-ctx.Done():
			yield(llm.Delta{}, ctx.Err())
		case <-m.release:
			if yield(llm.Delta{Text: "hi"}, nil) {
				yield(llm.Delta{Done: &llm.Completion{FinishReason: "stop"}}, nil)
			}
		}
	}
}

// newStartedEngine builds an engine of cfg and launches it; it is shut down when the test
// ends, after the cleanups registered later (the servers'), its runs still active
// cancelled at once.
func newStartedEngine(tb testing.TB, cfg coordinator.Config) *coordinator.Engine {
	tb.Helper()
	e, err := coordinator.New(cfg)
	require.NoError(tb, err)
	require.NoError(tb, e.Start(context.Background()))
	tb.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Millisecond)
		defer cancel()
		_ = e.Stop(ctx)
	})
	return e
}

// testStores holds the store of each engine newTestServer made, for the tests that look at
// what the engine stored (storeOf).
var testStores sync.Map

// storeOf returns the store of an engine newTestServer made.
func storeOf(e *coordinator.Engine) store.Store {
	st, _ := testStores.Load(e)
	return st.(store.Store)
}

func newTestServer(t *testing.T, model llm.Model, cfg Config, rc ...coordinator.RunsConfig) (*httptest.Server, *coordinator.Engine) {
	t.Helper()
	st, err := store.Open(context.Background(), "memory:")
	require.NoError(t, err)
	t.Cleanup(func() { _ = st.Close() })
	e := newStartedEngine(t, coordinator.Config{Model: model, Store: st})
	testStores.Store(e, st)
	cfg.Engine = runsOf(e, rc...)
	srv := httptest.NewServer(New(cfg))
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Millisecond)
		defer cancel()
		_ = e.Stop(ctx)
		srv.Close()
	})
	return srv, e
}

func body(thread, run string, extra string) string {
	return `{"threadId":"` + thread + `","runId":"` + run + `","protocolVersion":"1.0","messages":[{"id":"u","role":"user","content":"hi"}]` + extra + `}`
}

func post(t *testing.T, url, b string, hdr ...string) *http.Response {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, url, strings.NewReader(b))
	require.NoError(t, err)
	req.Header.Set("Content-Type", "application/json")
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	return resp
}

func readEvents(t *testing.T, resp *http.Response) []map[string]any {
	t.Helper()
	defer resp.Body.Close()
	var out []map[string]any
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if data, ok := strings.CutPrefix(line, "data: "); ok {
			var ev map[string]any
			require.NoError(t, json.Unmarshal([]byte(data), &ev))
			out = append(out, ev)
		}
	}
	return out
}

func TestBadInputIs4xxAndLeavesNothing(t *testing.T) {
	release := make(chan struct{})
	close(release)
	srv, e := newTestServer(t, blockingModel{release: release}, Config{MaxBodyBytes: 4096})
	tests := []struct {
		name   string
		body   string
		status int
		code   string
	}{
		{"malformed json", `{"threadId":`, 400, "INVALID_JSON"},
		{"missing threadId", `{"runId":"r","messages":[]}`, 400, "INVALID_INPUT"},
		{"missing runId", `{"threadId":"t","messages":[]}`, 400, "INVALID_INPUT"},
		{"threadId number", `{"threadId":1,"runId":"r","messages":[]}`, 400, "INVALID_INPUT"},
		{"messages object", `{"threadId":"t","runId":"r","messages":{}}`, 400, "INVALID_INPUT"},
		{"oversized", body("t", "r", `,"state":{"pad":"`+strings.Repeat("x", 5000)+`"}`), 413, "BODY_TOO_LARGE"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			resp := post(t, srv.URL+"/agui", tt.body)
			defer resp.Body.Close()
			assert.Equal(t, tt.status, resp.StatusCode)
			assert.Equal(t, "application/json", resp.Header.Get("Content-Type"))
			var eb map[string]string
			require.NoError(t, json.NewDecoder(resp.Body).Decode(&eb))
			assert.Equal(t, tt.code, eb["error"])
			assert.NotEmpty(t, eb["message"])
			assert.Zero(t, e.Active(), "a refused request leaves no run behind")
		})
	}
	// The thread is still usable after every refusal.
	evs := readEvents(t, post(t, srv.URL+"/agui", body("t", "r", "")))
	require.NotEmpty(t, evs)
	assert.Equal(t, "RUN_STARTED", evs[0]["type"])
	assert.Equal(t, "RUN_FINISHED", evs[len(evs)-1]["type"])
}

func TestBusyThreadAndStop(t *testing.T) {
	srv, _ := newTestServer(t, blockingModel{}, Config{})
	first := post(t, srv.URL+"/agui", body("busy", "r1", ""))
	require.Equal(t, http.StatusOK, first.StatusCode)
	assert.Equal(t, "text/event-stream", first.Header.Get("Content-Type"))

	second := post(t, srv.URL+"/agui", body("busy", "r2", ""))
	assert.Equal(t, http.StatusConflict, second.StatusCode)
	second.Body.Close()

	nf := post(t, srv.URL+"/agui/threads/busy/runs/nope/stop", "")
	assert.Equal(t, http.StatusNotFound, nf.StatusCode)
	nf.Body.Close()

	stop := post(t, srv.URL+"/agui/threads/busy/runs/r1/stop", "")
	assert.Equal(t, http.StatusAccepted, stop.StatusCode)
	stop.Body.Close()
	evs := readEvents(t, first)
	last := evs[len(evs)-1]
	assert.Equal(t, "RUN_FINISHED", last["type"])
	assert.Equal(t, map[string]any{"type": "cancelled"}, last["outcome"])

	again := post(t, srv.URL+"/agui/threads/busy/runs/r1/stop", "")
	assert.Equal(t, http.StatusConflict, again.StatusCode)
	again.Body.Close()
}

func TestStopLegacyClientGetsRunError(t *testing.T) {
	srv, _ := newTestServer(t, blockingModel{}, Config{})
	legacy := `{"threadId":"old","runId":"r1","messages":[{"id":"u","role":"user","content":"hi"}]}`
	resp := post(t, srv.URL+"/agui", legacy)
	stop := post(t, srv.URL+"/agui/threads/old/runs/r1/stop", "")
	stop.Body.Close()
	evs := readEvents(t, resp)
	assert.NotContains(t, evs[0], "protocolVersion")
	last := evs[len(evs)-1]
	assert.Equal(t, "RUN_ERROR", last["type"])
	assert.Equal(t, "CANCELLED", last["code"])
}

func TestDisconnectCancelsRun(t *testing.T) {
	srv, e := newTestServer(t, blockingModel{}, Config{})
	ctx, cancel := context.WithCancel(context.Background())
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, srv.URL+"/agui", strings.NewReader(body("gone", "r1", "")))
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	br := bufio.NewReader(resp.Body)
	_, err = br.ReadString('\n') // RUN_STARTED arrived: the run is active
	require.NoError(t, err)
	require.Equal(t, 1, e.Active())
	cancel()
	resp.Body.Close()
	require.Eventually(t, func() bool { return e.Active() == 0 }, 10*time.Second, 5*time.Millisecond)
}

func TestAuth(t *testing.T) {
	release := make(chan struct{})
	close(release)
	srv, _ := newTestServer(t, blockingModel{release: release}, Config{AuthTokens: []string{"alpha", "beta"}})
	resp := post(t, srv.URL+"/agui", body("a", "r", ""))
	assert.Equal(t, http.StatusUnauthorized, resp.StatusCode)
	resp.Body.Close()
	resp = post(t, srv.URL+"/agui", body("a", "r", ""), "Authorization", "Bearer wrong")
	assert.Equal(t, http.StatusUnauthorized, resp.StatusCode)
	resp.Body.Close()
	evs := readEvents(t, post(t, srv.URL+"/agui", body("a", "r", ""), "Authorization", "Bearer alpha"))
	assert.Equal(t, "RUN_FINISHED", evs[len(evs)-1]["type"])
	// Another principal may not use the thread.
	resp = post(t, srv.URL+"/agui", body("a", "r2", ""), "Authorization", "Bearer beta")
	assert.Equal(t, http.StatusForbidden, resp.StatusCode)
	resp.Body.Close()
}
