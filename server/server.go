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
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"math"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/go-chi/chi/v5"
	"github.com/go-chi/chi/v5/middleware"

	"github.com/baton-dev/baton/agui"
	"github.com/baton-dev/baton/internal/config"
	"github.com/baton-dev/baton/runs"
)

// Config configures the HTTP surface.
type Config struct {
	// Engine is the engine's port (runs.Runs): every run, thread and journal read of
	// this surface goes through it.
	Engine Engine
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
	// OIDC verifies bearer JWTs of users signed in with an OpenID provider (server.oidc),
	// beside the static AuthTokens; nil: no OIDC.
	OIDC TokenVerifier
	// SignIn serves the OAuth endpoints for MCP servers in auth mode user; nil (or a nil
	// Store) leaves them answering that sign-in is not configured.
	SignIn *SignIn
	// A2A serves Baton as an A2A agent (a2a_server.enabled): the card at A2ACardPath and
	// the bindings under A2APath, behind the same auth and limits as /agui (a2a.go). Its
	// requests carry the principal (internal/principal). Nil: none of those paths exists.
	A2A http.Handler
	// MCP serves Baton as an MCP server (mcp_server.enabled) at MCPPath, behind the same
	// auth and limits as /agui (mcp.go). Its requests carry the principal
	// (internal/principal). Nil: the path does not exist.
	MCP http.Handler
	// MCPIssuer is the OpenID issuer named in /mcp's RFC 9728 metadata (server.oidc);
	// "": no metadata is served.
	MCPIssuer string
}

type server struct {
	cfg      Config
	log      *slog.Logger
	tokens   [][32]byte
	origins  map[string]struct{}
	loopback bool
	ready    *readiness
}

// New returns the HTTP handler of the runs.
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
	s := &server{cfg: cfg, log: cfg.Logger, origins: map[string]struct{}{}, loopback: IsLoopbackListen(cfg.ListenAddr)}
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
	r.Get("/agui/threads/{threadId}/journal", s.handleJournal)
	s.routeSignIn(r)
	s.routeA2A(r)
	routeMCP(s, r)
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
			_, _ = w.Write([]byte("Baton runs. POST AG-UI runs to /agui.\n"))
		})
	}
	return r
}

func (s *server) handleRun(w http.ResponseWriter, r *http.Request) {
	who, ok := s.principal(r)
	if !ok {
		s.unauthorized(w, r)
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
	if s.staleForward(w, r, in, who) || s.forwardResume(w, r, in, who, raw.Bytes()) {
		return
	}
	// The request's trace context (telemetry.Extract) parents the run; only the span
	// context is kept, the run outlives the request. The engine admits it against
	// server.max_active_runs in one step with every other start, on every surface.
	run, err := s.cfg.Engine.Start(r.Context(), in, who, runs.StartOptions{MaxActive: s.cfg.MaxActiveRuns})
	if err != nil {
		s.writeEngineError(w, err)
		return
	}
	// The browser may have to sign in to an MCP server during this run (oauth.go).
	s.setSignInCookie(w, r, who)
	s.stream(w, r, run)
}

// DefaultWriteTimeout bounds each write to a streaming client when Config.WriteTimeout is 0.
const DefaultWriteTimeout = time.Duration(config.DefaultStreamWriteTimeout)

// stream relays the run's events as SSE until the terminal event or a disconnect
// (design/streams.md).
//
// A client that falls more than the run's stream buffer behind is not dropped: the run
// releases what is pending (NextFrom then starts beyond the last event sent) and the stream
// writes what it missed from the run's event log before the live events. Only a client that
// takes nothing for WriteTimeout is dropped: the write fails, the connection is closed
// without the response's end, so the client sees a broken stream and never a complete
// one, and the run is told (Stream.ClientGone: cancelled under server.on_disconnect: cancel,
// detached for a reconnect under detach).
func (s *server) stream(w http.ResponseWriter, r *http.Request, run *runs.Started) {
	sse := agui.NewSSEWriter(w)
	sse.SetWriteTimeout(s.cfg.WriteTimeout)
	clean := false
	defer func() {
		if clean {
			sse.Close()
			return
		}
		// A broken stream must not end like a complete one, nor hold this goroutine on
		// a client that reads nothing: the final flush fails at once and the
		// connection is closed.
		sse.Abort()
	}()
	ctx := r.Context()
	ping := time.NewTicker(s.cfg.PingInterval)
	defer ping.Stop()
	var sent int64 // the sequence number of the last event written
	for {
		first, events, ended := run.Stream.NextFrom()
		if first-1 > sent {
			if err := s.catchUp(ctx, sse, run, &sent, first-1); err != nil {
				s.clientGone(run, err)
				return
			}
		}
		if ended {
			// The thread is freed before the client can see the terminal event, so a
			// client that posts its next run on RUN_FINISHED is never refused with 409.
			<-run.Stream.Released()
		}
		// Each frame carries its sequence number in the run as its SSE id (DESIGN §3).
		if err := sse.WriteEventsFrom(first, events); err != nil {
			s.clientGone(run, err)
			return
		}
		sent = first - 1 + int64(len(events))
		if ended {
			clean = true
			return
		}
		select {
		case <-run.Stream.Wake():
		case <-ping.C:
			if err := sse.Ping(); err != nil {
				s.clientGone(run, err)
				return
			}
		case <-ctx.Done():
			run.Stream.ClientGone(runs.ErrClientGone)
			return
		}
	}
}

// backlogPage is how many events of the log a stream that fell behind reads at a time.
const backlogPage = 128

// catchUp writes the run's events after *sent up to upto from its event log: the live
// stream released them when its client fell more than the stream buffer behind.
func (s *server) catchUp(ctx context.Context, sse *agui.SSEWriter, run *runs.Started, sent *int64, upto int64) error {
	frames := make([]agui.RawFrame, 0, backlogPage)
	for *sent < upto {
		evs, err := run.Stream.Backlog(ctx, *sent, upto, backlogPage)
		if err != nil {
			return err
		}
		if len(evs) == 0 {
			// The log lost these (its writer logged why); the stream goes on after them.
			s.log.Warn("event stream: events missing from the event log were skipped", "from", *sent+1, "to", upto)
			*sent = upto
			return nil
		}
		frames = frames[:0]
		for _, ev := range evs {
			frames = append(frames, agui.RawFrame{ID: ev.Seq, Data: ev.Data})
		}
		if err := sse.WriteRaw(frames); err != nil {
			return err
		}
		*sent = evs[len(evs)-1].Seq
	}
	return nil
}

// clientGone tells the run that its stream failed with err: a client that took nothing
// for the write timeout is too slow, anything else is gone.
func (s *server) clientGone(run *runs.Started, err error) {
	cause := runs.ErrClientGone
	if errors.Is(err, os.ErrDeadlineExceeded) {
		cause = runs.ErrClientTooSlow
		s.log.Info("client dropped: it took nothing for the stream write timeout", "thread_id", run.ThreadID, "run_id", run.RunID, "timeout", s.cfg.WriteTimeout.String())
	}
	run.Stream.ClientGone(cause)
}

func (s *server) handleStop(w http.ResponseWriter, r *http.Request) {
	who, ok := s.principal(r)
	if !ok {
		s.unauthorized(w, r)
		return
	}
	threadID, runID := pathID(r, "threadId"), pathID(r, "runId")
	if !agui.ValidID(threadID) || !agui.ValidID(runID) {
		writeError(w, http.StatusNotFound, "RUN_NOT_FOUND", "No such run.")
		return
	}
	err := s.cfg.Engine.Stop(threadID, runID, who)
	if errors.Is(err, runs.ErrForbidden) {
		// Another principal's thread reads as an unknown one: a stop must not reveal
		// which threads exist.
		err = runs.ErrRunNotFound
	}
	if err != nil {
		s.writeEngineError(w, err)
		return
	}
	writeJSON(w, http.StatusAccepted, map[string]string{"status": "stopping"})
}

// pathID returns a path parameter, percent-decoded: chi routes on the raw path when the
// client escaped a character, and an escaped ':' is still a valid id. Every handler reads
// its path parameters through it (never chi.URLParam), so that an id is decoded the same
// way on every route.
func pathID(r *http.Request, name string) string {
	v := chi.URLParam(r, name)
	if u, err := url.PathUnescape(v); err == nil {
		return u
	}
	return v
}

func (s *server) writeEngineError(w http.ResponseWriter, err error) {
	var budget *runs.BudgetExceededError
	switch {
	case errors.As(err, &budget):
		w.Header().Set("Retry-After", strconv.Itoa(int(math.Ceil(time.Until(budget.ResetsAt).Seconds()))))
		writeError(w, http.StatusTooManyRequests, "BUDGET_EXCEEDED", budget.Error())
	case errors.Is(err, runs.ErrThreadBusy):
		writeError(w, http.StatusConflict, "THREAD_BUSY", "This thread already has an active run.")
	case errors.Is(err, runs.ErrRunFinished):
		writeError(w, http.StatusConflict, "RUN_FINISHED", "That run has already finished.")
	case errors.Is(err, runs.ErrRunNotFound):
		writeError(w, http.StatusNotFound, "RUN_NOT_FOUND", "No such run.")
	case errors.Is(err, runs.ErrForbidden):
		writeError(w, http.StatusForbidden, "FORBIDDEN", "This thread belongs to another user.")
	case errors.Is(err, runs.ErrTooManyRuns):
		w.Header().Set("Retry-After", retryAfterBusy)
		writeError(w, http.StatusServiceUnavailable, "TOO_MANY_RUNS", "Too many runs are active; try again shortly.")
	case errors.Is(err, runs.ErrThreadExpired):
		writeError(w, http.StatusGone, "THREAD_EXPIRED", "This thread was deleted after a period without use (thread retention); start a new thread.")
	case errors.Is(err, runs.ErrTooManyThreads):
		writeError(w, http.StatusTooManyRequests, "TOO_MANY_THREADS", "You have the most threads allowed (server.max_threads_per_principal): free some by deleting old threads (DELETE /agui/threads/{threadId}), or ask the operator to set server.thread_retention so that idle threads expire.")
	case errors.Is(err, runs.ErrUnavailable):
		s.storeDown(w, "engine", err)
	case errors.Is(err, runs.ErrShuttingDown):
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
