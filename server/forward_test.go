package server

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/baton-dev/baton/coordinator"
	"github.com/baton-dev/baton/hitl"
	"github.com/baton-dev/baton/store"
)

// forwardFixture is one replica on a memory store with a thread parked on an in-session
// elicitation that another replica (home) holds.
func forwardFixture(t *testing.T, home string) (base string) {
	t.Helper()
	st, err := store.Open(context.Background(), "memory:")
	require.NoError(t, err)
	e := newStartedEngine(t, coordinator.Config{Model: manyDeltas(1), Store: st})
	srv := httptest.NewServer(New(Config{Engine: runsOf(e), AuthTokens: []string{"tok"}}))
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		_ = e.Stop(ctx)
		srv.Close()
	})
	saveHeldSuspension(t, st, home)
	return srv.URL
}

// saveHeldSuspension parks thread t1 (the owner is token "tok") on an in-session
// elicitation held by the replica at home.
func saveHeldSuspension(t *testing.T, st store.Store, home string) {
	t.Helper()
	handle, _ := json.Marshal(map[string]string{"session": "sess-1", "home": home})
	require.NoError(t, st.SaveSuspension(context.Background(), &store.Suspension{
		ThreadID: "t1", RunID: "r1", Owner: principalOf("tok"),
		History: json.RawMessage(`[{"role":"user","content":"deploy"}]`),
		Interrupts: []store.Interrupt{{
			ID: "int-1", ToolCallID: "call-1", Kind: hitl.KindMCPSession, Reason: "input_required", Message: "Which?",
			ResponseSchema: map[string]any{"type": "object", "properties": map[string]any{"action": map[string]any{"type": "string", "enum": []any{"accept", "decline"}}}, "required": []any{"action"}},
			ExpiresAt:      time.Now().Add(time.Hour),
			Metadata:       map[string]any{"mcp": map[string]any{"server": "everything", "tool": "ask", "mode": "form"}},
			Handle:         handle,
		}},
	}))
}

const forwardResumeBody = `{"threadId":"t1","runId":"r2","protocolVersion":"1.0","messages":[],"resume":[{"interruptId":"int-1","status":"resolved","payload":{"action":"decline"}}]}`

// A resume of a thread whose in-session elicitation another replica holds is sent there as
// the client's own request (body, bearer, Host, path /agui), marked forwarded, and the
// holder's SSE response reaches the client.
func TestForwardResumeToHolder(t *testing.T) {
	var mu sync.Mutex
	var got *http.Request
	var gotBody string
	holder := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		mu.Lock()
		got, gotBody = r, string(b)
		mu.Unlock()
		w.Header().Set("Content-Type", "text/event-stream")
		_, _ = io.WriteString(w, "id: 1\ndata: {\"type\":\"RUN_STARTED\",\"threadId\":\"t1\",\"runId\":\"r2\"}\n\n")
	}))
	defer holder.Close()
	base := forwardFixture(t, holder.URL+"/")

	resp := post(t, base+"/agui", forwardResumeBody, "Authorization", "Bearer tok")
	defer resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)
	body, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	assert.Contains(t, string(body), `"RUN_STARTED"`, "the holder's stream is relayed")

	mu.Lock()
	defer mu.Unlock()
	require.NotNil(t, got, "the holder got the request")
	assert.Equal(t, "/agui", got.URL.Path)
	assert.Equal(t, forwardResumeBody, gotBody, "the client's body, unchanged")
	assert.Equal(t, "Bearer tok", got.Header.Get("Authorization"), "the client's own credentials")
	assert.Equal(t, "1", got.Header.Get(forwardedHeader))
	assert.Equal(t, strings.TrimPrefix(base, "http://"), got.Host, "the client's Host")
}

// A request that was forwarded already is never forwarded again; a holder that cannot be
// reached leaves the resume to this replica, where the lost call is a tool error.
func TestForwardResumeRunsHere(t *testing.T) {
	var hits int
	var mu sync.Mutex
	holder := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		hits++
		mu.Unlock()
		w.WriteHeader(http.StatusTeapot)
	}))
	defer holder.Close()

	t.Run("already forwarded", func(t *testing.T) {
		base := forwardFixture(t, holder.URL)
		evs := readEvents(t, post(t, base+"/agui", forwardResumeBody, "Authorization", "Bearer tok", forwardedHeader, "1"))
		require.NotEmpty(t, evs)
		assert.Equal(t, "RUN_STARTED", evs[0]["type"], "run here")
		mu.Lock()
		assert.Zero(t, hits, "not forwarded again")
		mu.Unlock()
	})

	t.Run("holder unreachable", func(t *testing.T) {
		gone := httptest.NewServer(http.NotFoundHandler())
		addr := gone.URL
		gone.Close() // nothing listens there any more
		base := forwardFixture(t, addr)
		evs := readEvents(t, post(t, base+"/agui", forwardResumeBody, "Authorization", "Bearer tok"))
		require.NotEmpty(t, evs)
		assert.Equal(t, "RUN_STARTED", evs[0]["type"])
		var result string
		for _, ev := range evs {
			if ev["type"] == "TOOL_CALL_RESULT" && ev["toolCallId"] == "call-1" {
				result, _ = ev["content"].(string)
			}
		}
		assert.Contains(t, result, "tool_error", "the model is told the call was lost: %v", evs)
		assert.Contains(t, result, "INTERRUPT_EXPIRED")
		assert.Equal(t, "RUN_FINISHED", evs[len(evs)-1]["type"])
	})
}

// principalOf is the principal the server derives from a bearer token.
func principalOf(tok string) string {
	s := &authn{tokens: [][32]byte{sha256.Sum256([]byte(tok))}}
	r := httptest.NewRequest(http.MethodGet, "/", nil)
	r.Header.Set("Authorization", "Bearer "+tok)
	p, _ := s.principal(r)
	return p
}

// A resume from a principal who does not own the thread is refused by the replica it reached
// (403, as a start would be) and never reaches the holder: a stranger costs no other replica
// any work, and the answer's timing does not tell where the thread is held.
func TestForwardResumeAuthorisedFirst(t *testing.T) {
	var mu sync.Mutex
	var hits int
	holder := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		hits++
		mu.Unlock()
		w.Header().Set("Content-Type", "text/event-stream")
		_, _ = io.WriteString(w, "id: 1\ndata: {\"type\":\"RUN_STARTED\",\"threadId\":\"t1\",\"runId\":\"r2\"}\n\n")
	}))
	defer holder.Close()
	st, err := store.Open(context.Background(), "memory:")
	require.NoError(t, err)
	e := newStartedEngine(t, coordinator.Config{Model: manyDeltas(1), Store: st})
	srv := httptest.NewServer(New(Config{Engine: runsOf(e), AuthTokens: []string{"tok", "other"}}))
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		_ = e.Stop(ctx)
		srv.Close()
	})
	saveHeldSuspension(t, st, holder.URL)

	for _, claimed := range []bool{false, true} {
		if claimed {
			// The thread's stored owner decides, when there is one.
			_, err := st.ClaimThread(context.Background(), "t1", principalOf("tok"), "deploy")
			require.NoError(t, err)
		}
		resp := post(t, srv.URL+"/agui", forwardResumeBody, "Authorization", "Bearer other")
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		assert.Equal(t, http.StatusForbidden, resp.StatusCode, "claimed=%v: %s", claimed, body)
		assert.Contains(t, string(body), "FORBIDDEN")
	}
	mu.Lock()
	assert.Zero(t, hits, "the stranger's resume never reached the holder")
	mu.Unlock()

	// The owner's resume still goes to the holder.
	resp := post(t, srv.URL+"/agui", forwardResumeBody, "Authorization", "Bearer tok")
	_, _ = io.ReadAll(resp.Body)
	resp.Body.Close()
	assert.Equal(t, http.StatusOK, resp.StatusCode)
	mu.Lock()
	assert.Equal(t, 1, hits, "the owner's resume is forwarded")
	mu.Unlock()
}

// A holder that is paused (it accepts the request and answers nothing) is given up on after
// forwardTimeout: the resume runs on the replica it reached. The forwarded request carried
// the run's epoch (0: the run did not exist yet).
func TestForwardToPausedHolderRunsHere(t *testing.T) {
	var mu sync.Mutex
	var epochSent string
	wake := make(chan struct{})
	holder := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		epochSent = r.Header.Get(forwardedEpochHeader)
		mu.Unlock()
		select { // paused: nothing is answered
		case <-wake:
		case <-r.Context().Done():
		}
	}))
	defer holder.Close()
	defer close(wake)
	base := forwardFixture(t, holder.URL)
	start := time.Now()
	evs := readEvents(t, post(t, base+"/agui", forwardResumeBody, "Authorization", "Bearer tok"))
	took := time.Since(start)
	require.NotEmpty(t, evs)
	assert.Equal(t, "RUN_STARTED", evs[0]["type"], "run here")
	assert.Equal(t, "RUN_FINISHED", evs[len(evs)-1]["type"])
	assert.GreaterOrEqual(t, took, forwardTimeout, "the holder was waited for")
	mu.Lock()
	defer mu.Unlock()
	assert.Equal(t, "0", epochSent, "the forward carried the run's epoch")
}

// A forwarded request whose run's epoch moved on since it was forwarded (the forwarding
// replica ran it meanwhile) is refused with 409 RUN_MOVED, and the run's log is untouched;
// a request forwarded under the current epoch runs.
func TestStaleForwardRefused(t *testing.T) {
	st, err := store.Open(context.Background(), "memory:")
	require.NoError(t, err)
	e := newStartedEngine(t, coordinator.Config{Model: manyDeltas(1), Store: st})
	srv := httptest.NewServer(New(Config{Engine: runsOf(e), AuthTokens: []string{"tok", "other"}}))
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		_ = e.Stop(ctx)
		srv.Close()
	})
	ctx := context.Background()
	const body = `{"threadId":"t1","runId":"r2","protocolVersion":"1.0","messages":[{"id":"u1","role":"user","content":"hi"}]}`
	evs := readEvents(t, post(t, srv.URL+"/agui", body, "Authorization", "Bearer tok"))
	require.Equal(t, "RUN_FINISHED", evs[len(evs)-1]["type"])
	logged, err := st.Events(ctx, "t1", "r2", 0, 0)
	require.NoError(t, err)
	rec, err := st.GetRun(ctx, "t1", "r2")
	require.NoError(t, err)

	// Forwarded when r2 did not exist yet (epoch 0), delivered after it ran here.
	resp := post(t, srv.URL+"/agui", body, "Authorization", "Bearer tok", forwardedHeader, "1", forwardedEpochHeader, "0")
	out, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	assert.Equal(t, http.StatusConflict, resp.StatusCode, "%s", out)
	assert.Contains(t, string(out), "RUN_MOVED")
	after, err := st.Events(ctx, "t1", "r2", 0, 0)
	require.NoError(t, err)
	assert.Equal(t, logged, after, "the run's log is untouched")
	now, err := st.GetRun(ctx, "t1", "r2")
	require.NoError(t, err)
	assert.Equal(t, rec.Epoch, now.Epoch, "the run was not begun again")

	// Another principal is not told that the run exists: refused as any start of theirs.
	resp = post(t, srv.URL+"/agui", body, "Authorization", "Bearer other", forwardedHeader, "1", forwardedEpochHeader, "0")
	_, _ = io.ReadAll(resp.Body)
	resp.Body.Close()
	assert.Equal(t, http.StatusForbidden, resp.StatusCode)

	// Forwarded under the run's current epoch: it is not refused as stale.
	resp = post(t, srv.URL+"/agui", strings.Replace(body, "r2", "r3", 1), "Authorization", "Bearer tok", forwardedHeader, "1", forwardedEpochHeader, "0")
	_, _ = io.ReadAll(resp.Body)
	resp.Body.Close()
	assert.Equal(t, http.StatusOK, resp.StatusCode)
}
