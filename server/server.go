// Package server is Baton's HTTP surface (DESIGN §3): the AG-UI endpoint, the producer-side
// stop endpoint, health and readiness, and the chat page.
//
// Input is validated completely before a stream starts, so that a bad request gets a 4xx
// JSON error and changes nothing; once the stream has started, errors travel as AG-UI
// events. The stream only relays a run's events: a client that disconnects cancels the run,
// or under server.on_disconnect: detach leaves it running for a reconnect.
package server

import (
	"encoding/json"
	"errors"
	"log/slog"
	"math"
	"net/http"
	"net/url"
	"strconv"
	"time"

	"github.com/go-chi/chi/v5"
	"github.com/go-chi/chi/v5/middleware"

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

// DefaultWriteTimeout bounds each write to a streaming client when Config.WriteTimeout is 0.
const DefaultWriteTimeout = time.Duration(config.DefaultStreamWriteTimeout)

// New returns the HTTP handler of the runs: it builds one handler per route group, each
// holding only what its routes use, behind the one guard and authn.
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
	auth := newAuthn(cfg.AuthTokens, cfg.OIDC)
	signIn := newSignInHandler(cfg.SignIn, auth, cfg.Logger)
	run := &runHandler{engine: cfg.Engine, auth: auth, signIn: signIn, log: cfg.Logger, maxBodyBytes: cfg.MaxBodyBytes,
		maxActiveRuns: cfg.MaxActiveRuns, pingInterval: cfg.PingInterval, writeTimeout: cfg.WriteTimeout}
	threads := &threadHandler{engine: cfg.Engine, auth: auth, log: cfg.Logger, pingInterval: cfg.PingInterval, writeTimeout: cfg.WriteTimeout}
	ready := newReadiness(cfg.ReadyChecks, cfg.Draining, cfg.Logger)
	r := chi.NewRouter()
	r.Use(middleware.Recoverer)
	r.Use(newGuard(auth, cfg.ListenAddr, cfg.AllowedOrigins, cfg.BodyReadTimeout).wrap)
	r.Post("/agui", run.handleRun)
	r.Post("/agui/threads/{threadId}/runs/{runId}/stop", run.handleStop)
	r.Get("/agui/threads/{threadId}/runs/{runId}/events", threads.handleRunEvents)
	r.Get("/agui/threads", threads.handleListThreads)
	r.Get("/agui/threads/{threadId}", threads.handleGetThread)
	r.Delete("/agui/threads/{threadId}", threads.handleDeleteThread)
	r.Get("/agui/threads/{threadId}/journal", threads.handleJournal)
	signIn.route(r)
	routeA2A(r, cfg.A2A, auth, cfg.MaxBodyBytes)
	routeMCP(r, cfg.MCP, cfg.MCPIssuer, auth, cfg.MaxBodyBytes)
	r.Get("/healthz", func(w http.ResponseWriter, _ *http.Request) {
		writeJSON(w, http.StatusOK, map[string]string{"status": "ok"})
	})
	r.Get("/readyz", ready.handleReady)
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

// writeEngineError answers a request the engine's port refused; log takes what is not the
// client's to know (a store or internal error).
func writeEngineError(log *slog.Logger, w http.ResponseWriter, err error) {
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
		storeDown(log, w, "engine", err)
	case errors.Is(err, runs.ErrShuttingDown):
		w.Header().Set("Retry-After", "5")
		writeError(w, http.StatusServiceUnavailable, "SHUTTING_DOWN", "The coordinator is shutting down.")
	default:
		log.Error("engine error", "err", err)
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
