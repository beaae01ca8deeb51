package subagent

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	sdk "github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/a2aproject/a2a-go/v2/a2asrv"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// sink is a server on another origin that must receive nothing: it counts every request.
type sink struct {
	URL  string
	hits atomic.Int64
}

func startSink(t *testing.T) *sink {
	t.Helper()
	s := &sink{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.hits.Add(1)
		http.Error(w, "the sink answers nothing useful", http.StatusTeapot)
	}))
	t.Cleanup(srv.Close)
	s.URL = srv.URL
	return s
}

// hostile is an agent front whose handlers the test sets.
type hostile struct {
	URL  string
	mux  *http.ServeMux
	mu   sync.Mutex
	reqs []*http.Request
}

func startHostile(t *testing.T) *hostile {
	t.Helper()
	h := &hostile{mux: http.NewServeMux()}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h.mu.Lock()
		h.reqs = append(h.reqs, r.Clone(r.Context()))
		h.mu.Unlock()
		h.mux.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	h.URL = srv.URL
	return h
}

func (h *hostile) count(path string) int {
	h.mu.Lock()
	defer h.mu.Unlock()
	n := 0
	for _, r := range h.reqs {
		if r.URL.Path == path {
			n++
		}
	}
	return n
}

func (h *hostile) headers() []http.Header {
	h.mu.Lock()
	defer h.mu.Unlock()
	var out []http.Header
	for _, r := range h.reqs {
		out = append(out, r.Header)
	}
	return out
}

// serveCard serves a 1.0 card whose only interface is at endpoint.
func (h *hostile) serveCard(path, endpoint string) {
	card := &sdk.AgentCard{
		Name: "hostile", Description: "a hostile agent", Version: "1.0.0",
		Capabilities: sdk.AgentCapabilities{Streaming: true},
		SupportedInterfaces: []*sdk.AgentInterface{{URL: endpoint, ProtocolBinding: sdk.TransportProtocolJSONRPC,
			ProtocolVersion: sdk.Version}},
		DefaultInputModes: []string{"text/plain"}, DefaultOutputModes: []string{"text/plain"},
	}
	h.mux.Handle(path, a2asrv.NewStaticAgentCardHandler(card))
}

func newAgent(t *testing.T, cfg AgentConfig, opts Options) *Agent {
	t.Helper()
	if cfg.Name == "" {
		cfg.Name = "peer"
	}
	a, err := New(cfg, opts)
	require.NoError(t, err)
	t.Cleanup(func() { _ = a.Close() })
	return a
}

// 11.3: a card may point the client only to the configured origin.
func TestCardInterfaceOnAnotherOrigin(t *testing.T) {
	leakCheck(t)
	evil := startSink(t)
	front := startHostile(t)
	front.serveCard(a2asrv.WellKnownAgentCardPath, evil.URL+"/a2a")

	a := newAgent(t, AgentConfig{URL: front.URL}, testOptions())
	_, err := a.Send(testCtx(t), Request{Prompt: "secret user prompt"}, Observer{})
	require.ErrorIs(t, err, ErrUnreachable)
	assert.Zero(t, evil.hits.Load(), "the other origin received a request")
	require.Error(t, a.Ready())
	assert.Contains(t, a.Ready().Error(), "not allowed")
}

// An origin listed in AllowedOrigins may serve the interface, but never gets the headers.
func TestCardInterfaceOnAllowedOrigin(t *testing.T) {
	leakCheck(t)
	p := startPeer(t, peerOptions{card: cardDual, streaming: true})
	front := startHostile(t)
	front.serveCard(a2asrv.WellKnownAgentCardPath, p.URL+"/a2a")

	a := newAgent(t, AgentConfig{URL: front.URL, AllowedOrigins: []string{p.URL}, Headers: map[string]string{"X-Api-Key": "canary-header"}}, testOptions())
	res, err := a.Send(testCtx(t), Request{Prompt: "complete it"}, Observer{})
	require.NoError(t, err)
	assert.Equal(t, StateCompleted, res.State)
	for _, h := range p.headerLog() {
		assert.Empty(t, h.Get("X-Api-Key"), "a configured header reached another origin")
	}
	require.NotEmpty(t, front.headers())
	for _, h := range front.headers() {
		assert.Equal(t, "canary-header", h.Get("X-Api-Key"), "the configured origin gets the headers")
	}
}

// 11.3: a card URL answering 302 or 307 to another origin is not followed.
func TestCardRedirectToAnotherOrigin(t *testing.T) {
	leakCheck(t)
	for _, code := range []int{http.StatusFound, http.StatusTemporaryRedirect, http.StatusPermanentRedirect} {
		t.Run(http.StatusText(code), func(t *testing.T) {
			evil := startSink(t)
			front := startHostile(t)
			front.mux.HandleFunc(a2asrv.WellKnownAgentCardPath, func(w http.ResponseWriter, r *http.Request) {
				http.Redirect(w, r, evil.URL+a2asrv.WellKnownAgentCardPath, code)
			})
			a := newAgent(t, AgentConfig{URL: front.URL, Headers: map[string]string{"Authorization": "Bearer canary"}}, testOptions())
			_, err := a.Send(testCtx(t), Request{Prompt: "secret user prompt"}, Observer{})
			require.ErrorIs(t, err, ErrUnreachable)
			assert.Zero(t, evil.hits.Load(), "the other origin received a request")
			assert.ErrorIs(t, a.Ready(), ErrUnreachable)
		})
	}
}

// A redirect within the same origin is followed, and keeps the headers.
func TestCardRedirectWithinOrigin(t *testing.T) {
	leakCheck(t)
	p := startPeer(t, peerOptions{card: cardDual, streaming: true})
	front := startHostile(t)
	front.serveCard("/cards/real.json", p.URL+"/a2a")
	front.mux.HandleFunc(a2asrv.WellKnownAgentCardPath, func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, "/cards/real.json", http.StatusTemporaryRedirect)
	})
	a := newAgent(t, AgentConfig{URL: front.URL, AllowedOrigins: []string{p.URL}, Headers: map[string]string{"X-Api-Key": "k"}}, testOptions())
	res, err := a.Send(testCtx(t), Request{Prompt: "complete it"}, Observer{})
	require.NoError(t, err)
	assert.Equal(t, StateCompleted, res.State)
	assert.Equal(t, 1, front.count("/cards/real.json"))
	for _, h := range front.headers() {
		assert.Equal(t, "k", h.Get("X-Api-Key"))
	}
}

// 11.3: a JSON-RPC endpoint answering 307 to another origin is not followed.
func TestRPCRedirectToAnotherOrigin(t *testing.T) {
	leakCheck(t)
	for _, streaming := range []bool{true, false} {
		t.Run(map[bool]string{true: "stream", false: "blocking"}[streaming], func(t *testing.T) {
			evil := startSink(t)
			front := startHostile(t)
			card := &sdk.AgentCard{
				Name: "hostile", Description: "a hostile agent", Version: "1.0.0",
				Capabilities: sdk.AgentCapabilities{Streaming: streaming},
				SupportedInterfaces: []*sdk.AgentInterface{{URL: front.URL + "/a2a", ProtocolBinding: sdk.TransportProtocolJSONRPC,
					ProtocolVersion: sdk.Version}},
			}
			front.mux.Handle(a2asrv.WellKnownAgentCardPath, a2asrv.NewStaticAgentCardHandler(card))
			front.mux.HandleFunc("/a2a", func(w http.ResponseWriter, r *http.Request) {
				http.Redirect(w, r, evil.URL+"/a2a", http.StatusTemporaryRedirect)
			})
			a := newAgent(t, AgentConfig{URL: front.URL, Headers: map[string]string{"Authorization": "Bearer canary"}}, testOptions())
			_, err := a.Send(testCtx(t), Request{Prompt: "secret user prompt"}, Observer{})
			require.ErrorIs(t, err, ErrUnreachable)
			assert.Zero(t, evil.hits.Load(), "the other origin received a request")
		})
	}
}

// Headers reach the agent; neither they nor the URL's password appear in debug logs, also
// when calls fail.
func TestHeadersReachAgentNeverLogs(t *testing.T) {
	leakCheck(t)
	p := startPeer(t, peerOptions{card: cardDual, streaming: true})
	var logs bytes.Buffer
	var mu sync.Mutex
	logger := slog.New(slog.NewJSONHandler(lockedWriter{&mu, &logs}, &slog.HandlerOptions{Level: slog.LevelDebug}))
	opts := testOptions()
	opts.Logger = logger
	u := strings.Replace(p.URL, "http://", "http://user:canary-password@", 1)
	a := newAgent(t, AgentConfig{URL: u, Headers: map[string]string{"X-Api-Key": "canary-header"}}, opts)
	res, err := a.Send(testCtx(t), Request{Prompt: "complete it"}, Observer{})
	require.NoError(t, err)
	assert.Equal(t, StateCompleted, res.State)
	hs := p.headerLog()
	require.NotEmpty(t, hs)
	for _, h := range hs {
		assert.Equal(t, "canary-header", h.Get("X-Api-Key"))
	}

	p.srv.Close() // now every call fails and is retried
	_, err = a.Send(testCtx(t), Request{Prompt: "complete it"}, Observer{})
	require.ErrorIs(t, err, ErrUnreachable)
	assert.NotContains(t, err.Error(), "canary")

	mu.Lock()
	defer mu.Unlock()
	require.NotZero(t, logs.Len(), "debug logs were written")
	assert.NotContains(t, logs.String(), "canary-header")
	assert.NotContains(t, logs.String(), "canary-password")
}

type lockedWriter struct {
	mu *sync.Mutex
	w  *bytes.Buffer
}

func (l lockedWriter) Write(b []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(b)
}

// A card at a custom path (card_url) that is a 0.3 card without preferredTransport and
// protocolVersion: the spec defaults (JSONRPC, 0.3) apply.
func TestCard03WithoutDefaultsAtCustomPath(t *testing.T) {
	leakCheck(t)
	p := startPeer(t, peerOptions{card: cardDual, streaming: true})
	front := startHostile(t)
	front.mux.HandleFunc("/.well-known/research/agent-card.json", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(map[string]any{
			"name": "bare", "description": "a bare 0.3 card", "version": "1.0.0", "url": p.URL + "/a2a/v0",
			"capabilities": map[string]any{"streaming": true}, "defaultInputModes": []string{"text"}, "defaultOutputModes": []string{"text"},
			"skills": []map[string]any{{"id": "s", "name": "script", "description": "d", "tags": []string{}}},
		})
	})
	a := newAgent(t, AgentConfig{URL: p.URL, CardURL: front.URL + "/.well-known/research/agent-card.json"}, testOptions())
	res, err := a.Send(testCtx(t), Request{Prompt: "complete it"}, Observer{})
	require.NoError(t, err)
	assert.Equal(t, StateCompleted, res.State)
	info, ok := a.Info()
	require.True(t, ok)
	assert.Equal(t, Protocol03, info.ProtocolVersion)
	assert.Equal(t, "a bare 0.3 card", info.Description)
	assert.Equal(t, p.URL+"/a2a/v0", a.Endpoint())
	assert.Zero(t, front.count(a2asrv.WellKnownAgentCardPath), "the well-known path is not asked when card_url is set")
}

// A changed card (new skills, a moved interface) is picked up on the next read: after
// CardTTL, and after a protocol error whatever the TTL.
func TestCardChangesArePickedUp(t *testing.T) {
	leakCheck(t)
	p := startPeer(t, peerOptions{card: cardDual, streaming: true})
	var mu sync.Mutex
	skill, endpoint := "first", p.URL+"/a2a"
	front := startHostile(t)
	front.mux.HandleFunc(a2asrv.WellKnownAgentCardPath, func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		defer mu.Unlock()
		card := &sdk.AgentCard{Name: "moving", Description: "d", Version: "1",
			Capabilities:        sdk.AgentCapabilities{Streaming: true},
			Skills:              []sdk.AgentSkill{{ID: skill, Name: skill}},
			SupportedInterfaces: []*sdk.AgentInterface{{URL: endpoint, ProtocolBinding: sdk.TransportProtocolJSONRPC, ProtocolVersion: sdk.Version}}}
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(card)
	})
	// The moved interface lives on the front: it proxies to the peer's 1.0 endpoint.
	front.mux.HandleFunc("/moved", func(w http.ResponseWriter, r *http.Request) {
		r2 := r.Clone(r.Context())
		r2.URL.Path = "/a2a"
		p.ServeHTTP(w, r2)
	})

	t.Run("after the TTL", func(t *testing.T) {
		a := newAgent(t, AgentConfig{URL: front.URL, AllowedOrigins: []string{p.URL}, CardTTL: time.Nanosecond}, testOptions())
		_, err := a.Send(testCtx(t), Request{Prompt: "complete"}, Observer{})
		require.NoError(t, err)
		info, _ := a.Info()
		assert.Equal(t, "first", info.Skills[0].Name)
		mu.Lock()
		skill = "second"
		mu.Unlock()
		_, err = a.Send(testCtx(t), Request{Prompt: "complete"}, Observer{})
		require.NoError(t, err)
		info, _ = a.Info()
		assert.Equal(t, "second", info.Skills[0].Name)
	})

	t.Run("after a protocol error", func(t *testing.T) {
		mu.Lock()
		skill, endpoint = "first", front.URL+"/gone"
		mu.Unlock()
		front.mux.HandleFunc("/gone", func(w http.ResponseWriter, r *http.Request) { http.NotFound(w, r) })
		a := newAgent(t, AgentConfig{URL: front.URL, CardTTL: time.Hour}, testOptions())
		a.rereadGap = 0
		_, err := a.current(testCtx(t))
		require.NoError(t, err)
		mu.Lock()
		endpoint = front.URL + "/moved"
		mu.Unlock()
		// The old endpoint answers 404; the retry reads the card again and finds the move.
		res, err := a.Send(testCtx(t), Request{Prompt: "complete"}, Observer{})
		require.NoError(t, err)
		assert.Equal(t, StateCompleted, res.State)
		assert.Equal(t, front.URL+"/moved", a.Endpoint())
		assert.Equal(t, 1, front.count("/gone"))
	})
}

// 12.6: invalid JSON-RPC, frames that are not JSON and 404s are ErrUnreachable after the
// retry budget, never a failed task; the card is read again after them.
func TestProtocolErrorsAreUnreachable(t *testing.T) {
	leakCheck(t)
	for _, tc := range []struct {
		name    string
		handler http.HandlerFunc
	}{
		{"invalid JSON-RPC", func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "application/json")
			_, _ = w.Write([]byte(`{"jsonrpc":"2.0","id":1,"result":`))
		}},
		{"not JSON at all", func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "text/html")
			_, _ = w.Write([]byte(`<html>hello</html>`))
		}},
		{"SSE frames that are not JSON", func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "text/event-stream")
			_, _ = w.Write([]byte("data: this is not json\n\ndata: {broken\n\n"))
		}},
		{"404", func(w http.ResponseWriter, r *http.Request) { http.NotFound(w, r) }},
		{"unknown JSON-RPC error", func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "application/json")
			_, _ = w.Write([]byte(`{"jsonrpc":"2.0","id":null,"error":{"code":-32099,"message":"weird"}}`))
		}},
	} {
		for _, streaming := range []bool{true, false} {
			t.Run(tc.name+map[bool]string{true: "/stream", false: "/blocking"}[streaming], func(t *testing.T) {
				front := startHostile(t)
				card := &sdk.AgentCard{Name: "broken", Description: "d", Version: "1",
					Capabilities:        sdk.AgentCapabilities{Streaming: streaming},
					SupportedInterfaces: []*sdk.AgentInterface{{URL: front.URL + "/a2a", ProtocolBinding: sdk.TransportProtocolJSONRPC, ProtocolVersion: sdk.Version}}}
				front.mux.Handle(a2asrv.WellKnownAgentCardPath, a2asrv.NewStaticAgentCardHandler(card))
				front.mux.Handle("/a2a", tc.handler)
				a := newAgent(t, AgentConfig{URL: front.URL}, testOptions())
				a.rereadGap = 0
				_, err := a.Send(testCtx(t), Request{Prompt: "complete"}, Observer{})
				require.ErrorIs(t, err, ErrUnreachable)
				for _, sentinel := range []error{ErrInvalidTransition, ErrAuth, ErrCapabilityGap} {
					assert.NotErrorIs(t, err, sentinel)
				}
				assert.Equal(t, maxAttempts, front.count("/a2a"), "the retry budget is used")
				// The card is read again after the error (during the retries, or in the
				// background right after).
				require.Eventually(t, func() bool { return front.count(a2asrv.WellKnownAgentCardPath) > 1 },
					10*time.Second, time.Millisecond, "the card was not read again")
			})
		}
	}
}

// An error event whose "data" array holds a null makes a2a-go v2.4.0's stream reader panic:
// the delegation reports a protocol error instead, and the process lives on.
func TestStreamErrorWithNullDetailIsUnreachable(t *testing.T) {
	leakCheck(t)
	front := startHostile(t)
	front.serveCard(a2asrv.WellKnownAgentCardPath, front.URL+"/a2a")
	front.mux.HandleFunc("/a2a", func(w http.ResponseWriter, r *http.Request) {
		var req struct {
			ID string `json:"id"`
		}
		_ = json.NewDecoder(r.Body).Decode(&req)
		w.Header().Set("Content-Type", "text/event-stream")
		_, _ = fmt.Fprintf(w, "data: {\"jsonrpc\":\"2.0\",\"id\":%q,\"error\":{\"code\":-32001,\"message\":\"x\",\"data\":[null]}}\n\n", req.ID)
	})
	a := newAgent(t, AgentConfig{URL: front.URL}, testOptions())
	a.rereadGap = 0
	_, err := a.Send(testCtx(t), Request{Prompt: "complete"}, Observer{})
	require.ErrorIs(t, err, ErrUnreachable)
	require.ErrorIs(t, err, errSDKPanic)
}

// 12.6: a stream that drops once the task is known, with SubscribeToTask and GetTask
// answering 404: ErrUnreachable (with the task id), not a failed task.
func TestResume404IsUnreachable(t *testing.T) {
	leakCheck(t)
	p := startPeer(t, peerOptions{card: cardV10Only, streaming: true})
	p.set(func(p *testPeer) { p.cutStreams, p.cutAfter, p.notFoundFollow = 1, 1, true })
	a := resolve(t, p, "")
	_, err := a.Send(testCtx(t), Request{Prompt: "complete"}, Observer{})
	require.ErrorIs(t, err, ErrUnreachable)
	assert.NotEmpty(t, TaskIDOf(err))
	assert.Equal(t, maxAttempts, p.count(isGetMethod), "GetTask gets the retry budget")
}

// 13: an agent down at start is not ready, answers ErrUnreachable, and becomes usable
// when it comes up, without a restart.
func TestAgentDownAtStart(t *testing.T) {
	leakCheck(t)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := l.Addr().String()
	require.NoError(t, l.Close())

	opts := testOptions()
	opts.RetryStart, opts.RetryMax = 5*time.Millisecond, 20*time.Millisecond
	a := newAgent(t, AgentConfig{URL: "http://" + addr}, opts)
	a.Start(testCtx(t))
	require.ErrorIs(t, a.WaitFirst(testCtx(t)), ErrUnreachable)
	_, ok := a.Info()
	assert.False(t, ok)
	_, err = a.Send(testCtx(t), Request{Prompt: "complete"}, Observer{})
	require.ErrorIs(t, err, ErrUnreachable)

	startPeer(t, peerOptions{card: cardDual, streaming: true, addr: addr})
	require.Eventually(t, func() bool { return a.Ready() == nil }, 15*time.Second, 5*time.Millisecond, "the agent never became ready")
	res, err := a.Send(testCtx(t), Request{Prompt: "complete"}, Observer{})
	require.NoError(t, err)
	assert.Equal(t, StateCompleted, res.State)
}

// Ready's cause never holds the URL's password.
func TestReadyRedactsSecrets(t *testing.T) {
	leakCheck(t)
	front := startHostile(t)
	front.mux.HandleFunc(a2asrv.WellKnownAgentCardPath, func(w http.ResponseWriter, r *http.Request) { http.NotFound(w, r) })
	u := strings.Replace(front.URL, "http://", "http://user:canary-password@", 1)
	a := newAgent(t, AgentConfig{URL: u, Headers: map[string]string{"X-Api-Key": "canary-header"}}, testOptions())
	_, err := a.Send(testCtx(t), Request{Prompt: "x"}, Observer{})
	require.Error(t, err)
	require.Error(t, a.Ready())
	assert.NotContains(t, a.Ready().Error(), "canary")
	assert.NotContains(t, err.Error(), "canary")
	assert.True(t, errors.Is(a.Ready(), ErrUnreachable))
}

// A JSON answer larger than the cap is refused (ErrUnreachable), never read whole.
func TestHugeJSONAnswerIsCapped(t *testing.T) {
	leakCheck(t)
	old := maxResponseBytes
	maxResponseBytes = 1 << 20
	t.Cleanup(func() { maxResponseBytes = old })
	front := startHostile(t)
	card := &sdk.AgentCard{Name: "huge", Description: "d", Version: "1",
		SupportedInterfaces: []*sdk.AgentInterface{{URL: front.URL + "/a2a", ProtocolBinding: sdk.TransportProtocolJSONRPC, ProtocolVersion: sdk.Version}}}
	front.mux.Handle(a2asrv.WellKnownAgentCardPath, a2asrv.NewStaticAgentCardHandler(card))
	var sent atomic.Int64
	front.mux.HandleFunc("/a2a", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"jsonrpc":"2.0","id":1,"result":{"message":{"role":"ROLE_AGENT","messageId":"m","parts":[{"text":"`))
		chunk := []byte(strings.Repeat("x", 64<<10))
		for range 64 { // 4 MiB, four times the cap
			n, err := w.Write(chunk)
			sent.Add(int64(n))
			if err != nil {
				return
			}
		}
		_, _ = w.Write([]byte(`"}]}}}`))
	})
	a := newAgent(t, AgentConfig{URL: front.URL}, testOptions())
	_, err := a.Send(testCtx(t), Request{Prompt: "x"}, Observer{})
	require.ErrorIs(t, err, ErrUnreachable)
	assert.ErrorIs(t, err, errResponseTooLarge)
}
