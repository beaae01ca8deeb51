// Package server is Baton's HTTP surface (DESIGN §3): the AG-UI endpoint, the producer-side
// stop endpoint, health and readiness, and the chat page.
//
// Input is validated completely before a stream starts, so that a bad request gets a 4xx
// JSON error and changes nothing; once the stream has started, errors travel as AG-UI
// events. The stream only relays a run's events: a client that disconnects cancels the run,
// or under server.on_disconnect: detach leaves it running for a reconnect.
package server

import (
	"bytes"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"strings"
	"sync/atomic"
	"time"

	"github.com/go-chi/chi/v5"
	"github.com/go-chi/chi/v5/middleware"

	"github.com/baton-dev/baton/agui"
	"github.com/baton-dev/baton/coordinator"
)

// Config configures the HTTP surface.
type Config struct {
	Engine *coordinator.Engine
	// MaxBodyBytes caps request bodies; default 1 MiB.
	MaxBodyBytes int64
	// AuthTokens enables bearer-token auth when non-empty.
	AuthTokens []string
	// PingInterval is the SSE keep-alive period while a stream is idle; default 15 s.
	PingInterval time.Duration
	// WriteTimeout bounds each write to a streaming client (server.stream_write_timeout);
	// a client that does not take a frame in time is disconnected. Default 30 s.
	WriteTimeout time.Duration
	// ReadyChecks are the dependencies GET /readyz reports (see ReadyCheck). No checks
	// means ready.
	ReadyChecks []ReadyCheck
	// Draining reports that the process is shutting down: /readyz answers 503 "draining"
	// from the moment it returns true. Nil means never.
	Draining func() bool
	// Page serves GET / (the chat page); nil serves a short plain-text notice.
	Page http.Handler
	// Metrics serves GET /metrics (Prometheus); nil leaves the path unrouted. It is not
	// behind the bearer-token auth: scrapers reach it from the operator's network.
	Metrics http.Handler
	Logger  *slog.Logger
	// AllowedOrigins are Origins, besides the request's own, that may POST when auth is
	// off (server.allowed_origins), such as "https://app.example.com".
	AllowedOrigins []string
	// ListenAddr is the listen address; a loopback one turns on the DNS-rebinding guard
	// (only loopback names in Host).
	ListenAddr string
	// MaxActiveRuns caps concurrent runs (server.max_active_runs); beyond it POST /agui
	// answers 503 with Retry-After. Default 1000; negative means no cap.
	MaxActiveRuns int
	// BodyReadTimeout bounds reading a request body; default 30 s.
	BodyReadTimeout time.Duration
	// Streams tracks the event streams that took over their connection (HTTP/1.x), which
	// http.Server.Shutdown does not wait for: the process waits for them with
	// Streams.Wait. Nil: a registry of the server's own, that nobody waits for.
	Streams *Streams
	// TakeOverAfter is how long an HTTP/1.1 run stream goes through net/http before it
	// takes over its connection (design/sse-hijack.md). Negative (the default): at once,
	// before the status line, which then says Connection: close. Positive: a short run
	// keeps its keep-alive connection, but a stream taken over later closes a connection
	// whose head did not announce it, and a client that reuses it at once for a POST gets
	// an error (Go's client does not retry a POST it has written): use it only with
	// clients that open a connection per stream. 0 means DefaultTakeOverAfter.
	TakeOverAfter time.Duration
	// SignIn serves the OAuth endpoints for MCP servers in auth mode user; nil (or a nil
	// Store) leaves them answering that sign-in is not configured.
	SignIn *SignIn
}

type server struct {
	cfg      Config
	log      *slog.Logger
	tokens   [][32]byte
	origins  map[string]struct{}
	loopback bool
	starting atomic.Int64
	ready    *readiness
	streams  *Streams
}

// New returns the HTTP handler of the coordinator.
func New(cfg Config) http.Handler {
	if cfg.MaxBodyBytes <= 0 {
		cfg.MaxBodyBytes = 1 << 20
	}
	if cfg.PingInterval <= 0 {
		cfg.PingInterval = 15 * time.Second
	}
	if cfg.WriteTimeout <= 0 {
		cfg.WriteTimeout = DefaultWriteTimeout
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.MaxActiveRuns == 0 {
		cfg.MaxActiveRuns = DefaultMaxActiveRuns
	}
	if cfg.BodyReadTimeout <= 0 {
		cfg.BodyReadTimeout = DefaultBodyReadTimeout
	}
	if cfg.Streams == nil {
		cfg.Streams = NewStreams()
	}
	if cfg.TakeOverAfter == 0 {
		cfg.TakeOverAfter = DefaultTakeOverAfter
	}
	s := &server{cfg: cfg, log: cfg.Logger, origins: map[string]struct{}{}, loopback: IsLoopbackListen(cfg.ListenAddr), streams: cfg.Streams}
	s.ready = &readiness{s: s, last: map[string]string{}}
	for _, t := range cfg.AuthTokens {
		if t = strings.TrimSpace(t); t != "" {
			s.tokens = append(s.tokens, sha256.Sum256([]byte(t)))
		}
	}
	for _, o := range cfg.AllowedOrigins {
		if n, ok := normOrigin(o); ok {
			s.origins[n] = struct{}{}
		}
	}
	r := chi.NewRouter()
	r.Use(middleware.Recoverer)
	r.Use(s.guard)
	r.Post("/agui", s.handleRun)
	r.Post("/agui/threads/{threadId}/runs/{runId}/stop", s.handleStop)
	r.Get("/agui/threads/{threadId}/runs/{runId}/events", s.handleRunEvents)
	r.Get("/agui/threads", s.handleListThreads)
	r.Get("/agui/threads/{threadId}", s.handleGetThread)
	r.Delete("/agui/threads/{threadId}", s.handleDeleteThread)
	s.routeSignIn(r)
	r.Get("/healthz", func(w http.ResponseWriter, _ *http.Request) {
		writeJSON(w, http.StatusOK, map[string]string{"status": "ok"})
	})
	r.Get("/readyz", s.handleReady)
	if cfg.Metrics != nil {
		r.Method(http.MethodGet, "/metrics", cfg.Metrics)
	}
	if cfg.Page != nil {
		r.Handle("/*", cfg.Page)
	} else {
		r.Get("/", func(w http.ResponseWriter, _ *http.Request) {
			w.Header().Set("Content-Type", "text/plain; charset=utf-8")
			_, _ = w.Write([]byte("Baton coordinator. POST AG-UI runs to /agui.\n"))
		})
	}
	return r
}

// principal authenticates the request. Without configured tokens everyone is "".
// The principal is a hash of the token, so that tokens never sit in memory maps or logs.
func (s *server) principal(r *http.Request) (string, bool) {
	if len(s.tokens) == 0 {
		return "", true
	}
	// The scheme is case-insensitive (RFC 9110 §11.1).
	scheme, tok, ok := strings.Cut(strings.TrimSpace(r.Header.Get("Authorization")), " ")
	tok = strings.TrimSpace(tok)
	if !ok || !strings.EqualFold(scheme, "Bearer") || tok == "" {
		return "", false
	}
	sum := sha256.Sum256([]byte(tok))
	for _, t := range s.tokens {
		if subtle.ConstantTimeCompare(sum[:], t[:]) == 1 {
			return hex.EncodeToString(sum[:8]), true
		}
	}
	return "", false
}

func (s *server) handleRun(w http.ResponseWriter, r *http.Request) {
	who, ok := s.principal(r)
	if !ok {
		writeError(w, http.StatusUnauthorized, "UNAUTHORIZED", "A valid bearer token is required.")
		return
	}
	if !jsonContentType(r) {
		writeError(w, http.StatusUnsupportedMediaType, "UNSUPPORTED_MEDIA_TYPE", "The body must be sent as Content-Type: application/json.")
		return
	}
	// The body is kept (bounded: the decoder reads at most MaxBodyBytes) in case the resume
	// must be forwarded to another replica.
	var raw bytes.Buffer
	in, err := agui.DecodeRunAgentInput(io.TeeReader(r.Body, &raw), s.cfg.MaxBodyBytes)
	if err != nil {
		agui.WriteInputError(w, err)
		return
	}
	bodyRead(w)
	if s.forwardResume(w, r, in, who, raw.Bytes()) {
		return
	}
	release, ok := s.reserveRun()
	if !ok {
		w.Header().Set("Retry-After", retryAfterBusy)
		writeError(w, http.StatusServiceUnavailable, "TOO_MANY_RUNS", "Too many runs are active; try again shortly.")
		return
	}
	// The request's trace context (telemetry.Extract) parents the run; only the span
	// context is kept, the run outlives the request.
	run, err := s.cfg.Engine.StartContext(r.Context(), in, who)
	release()
	if err != nil {
		s.writeEngineError(w, err)
		return
	}
	// The browser may have to sign in to an MCP server during this run (oauth.go).
	s.setSignInCookie(w, r, who)
	// HTTP/1.1 streams take over their connection (design/sse-hijack.md): at once when
	// so configured, else once they have run for TakeOverAfter (stream); the others
	// stream through net/http.
	if s.cfg.TakeOverAfter < 0 && s.hijackRun(w, r, run, false) {
		return
	}
	s.stream(w, r, run)
}

// DefaultTakeOverAfter is Config.TakeOverAfter's default: streams take over at once, so
// that every taken-over response announces its close.
const DefaultTakeOverAfter = -1

// DefaultWriteTimeout bounds each write to a streaming client when Config.WriteTimeout is 0.
const DefaultWriteTimeout = 30 * time.Second

// stream relays the run's events as SSE until the terminal event or a disconnect.
//
// A client that does not keep up is disconnected two ways (design/stream-backpressure.md):
// a write it does not take within WriteTimeout fails, and a client that lets more than the
// run's stream buffer pile up is dropped by the run (run.Dropped), which also aborts a
// write in progress. Both count as the client gone (Run.ClientGone): the run is cancelled
// (server.on_disconnect: cancel) or detached for the reconnect grace (detach); other runs
// are not slowed.
func (s *server) stream(w http.ResponseWriter, r *http.Request, run *coordinator.Run) {
	sse := agui.NewSSEWriter(w)
	sse.SetWriteTimeout(s.cfg.WriteTimeout)
	clean, handedOver := false, false
	defer func() {
		if handedOver {
			return
		}
		if clean {
			sse.Close()
			return
		}
		// A broken stream must not end like a complete one, nor hold this goroutine on
		// a client that reads nothing: the final flush fails at once and the
		// connection is closed.
		sse.Abort()
	}()
	// A dropped client may hold this goroutine in a write: the drop aborts the writer.
	stopAbort := run.AfterDropped(sse.Abort)
	defer func() { stopAbort() }()
	ping := time.NewTicker(s.cfg.PingInterval)
	defer ping.Stop()
	// A stream still open after TakeOverAfter takes over its connection (HTTP/1.1 only):
	// the events go on in the same chunked response, written by Baton.
	var late <-chan time.Time
	if s.cfg.TakeOverAfter > 0 && canTakeOver(r) {
		t := time.NewTimer(s.cfg.TakeOverAfter)
		defer t.Stop()
		late = t.C
	}
	for {
		first, events, ended := run.NextFrom()
		select {
		case <-run.Dropped():
			// The run has been told already (ClientGone(ErrClientTooSlow)); the
			// connection is closed without a terminal event, as for any broken stream.
			return
		default:
		}
		if ended {
			// The thread is freed before the client can see the terminal event, so a
			// client that posts its next run on RUN_FINISHED is never refused with 409.
			<-run.Released()
		}
		// Each frame carries its sequence number in the run as its SSE id (DESIGN §3).
		if err := sse.WriteEventsFrom(first, events); err != nil {
			run.ClientGone(coordinator.ErrClientGone)
			return
		}
		if ended {
			clean = true
			return
		}
		select {
		case <-run.Wake():
		case <-late:
			late = nil
			// Nothing is buffered (every write is flushed); the writer's deadline and
			// its drop hook are released before the connection changes hands.
			stopAbort()
			sse.Close()
			if s.hijackRun(w, r, run, true) {
				handedOver = true
				return
			}
			stopAbort = run.AfterDropped(sse.Abort)
		case <-ping.C:
			if err := sse.Ping(); err != nil {
				run.ClientGone(coordinator.ErrClientGone)
				return
			}
		case <-r.Context().Done():
			run.ClientGone(coordinator.ErrClientGone)
			return
		}
	}
}

func (s *server) handleStop(w http.ResponseWriter, r *http.Request) {
	who, ok := s.principal(r)
	if !ok {
		writeError(w, http.StatusUnauthorized, "UNAUTHORIZED", "A valid bearer token is required.")
		return
	}
	threadID, runID := pathID(r, "threadId"), pathID(r, "runId")
	if !agui.ValidID(threadID) || !agui.ValidID(runID) {
		writeError(w, http.StatusNotFound, "RUN_NOT_FOUND", "No such run.")
		return
	}
	err := s.cfg.Engine.Stop(threadID, runID, who)
	if errors.Is(err, coordinator.ErrForbidden) {
		// Another principal's thread reads as an unknown one: a stop must not reveal
		// which threads exist.
		err = coordinator.ErrRunNotFound
	}
	if err != nil {
		s.writeEngineError(w, err)
		return
	}
	writeJSON(w, http.StatusAccepted, map[string]string{"status": "stopping"})
}

// pathID returns a path parameter, percent-decoded: chi routes on the raw path when the
// client escaped a character, and an escaped ':' is still a valid id.
func pathID(r *http.Request, name string) string {
	v := chi.URLParam(r, name)
	if u, err := url.PathUnescape(v); err == nil {
		return u
	}
	return v
}

func (s *server) writeEngineError(w http.ResponseWriter, err error) {
	switch {
	case errors.Is(err, coordinator.ErrThreadBusy):
		writeError(w, http.StatusConflict, "THREAD_BUSY", "This thread already has an active run.")
	case errors.Is(err, coordinator.ErrRunFinished):
		writeError(w, http.StatusConflict, "RUN_FINISHED", "That run has already finished.")
	case errors.Is(err, coordinator.ErrRunNotFound):
		writeError(w, http.StatusNotFound, "RUN_NOT_FOUND", "No such run.")
	case errors.Is(err, coordinator.ErrForbidden):
		writeError(w, http.StatusForbidden, "FORBIDDEN", "This thread belongs to another user.")
	case errors.Is(err, coordinator.ErrShuttingDown):
		w.Header().Set("Retry-After", "5")
		writeError(w, http.StatusServiceUnavailable, "SHUTTING_DOWN", "The coordinator is shutting down.")
	default:
		s.log.Error("engine error", "err", err)
		writeError(w, http.StatusInternalServerError, "INTERNAL", "Internal error.")
	}
}

func writeError(w http.ResponseWriter, status int, code, msg string) {
	writeJSON(w, status, map[string]string{"error": code, "message": msg})
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}
