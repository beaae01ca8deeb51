package a2aserver

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"strings"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/a2aproject/a2a-go/v2/a2acompat/a2av0"
	"github.com/a2aproject/a2a-go/v2/a2asrv"

	"github.com/baton-dev/baton/agui"
	"github.com/baton-dev/baton/cancel"
	"github.com/baton-dev/baton/internal/a2aqueue"
	"github.com/baton-dev/baton/internal/followers"
	"github.com/baton-dev/baton/internal/principal"
)

// Engine is what the A2A surface needs of Baton's run engine.
type Engine interface {
	// Start begins a run for in on behalf of principal. Errors wrap ErrBusy, ErrForbidden
	// or ErrShuttingDown when they are one of those.
	Start(ctx context.Context, in *agui.RunAgentInput, principal string) (Run, error)
	// Stop cancels the active run (threadID, runID) of principal.
	Stop(threadID, runID, principal string) error
}

// Run is one run of the engine, as the A2A surface reads it.
type Run interface {
	// NextFrom returns the events produced since the last call, and whether the run's
	// stream has ended (its terminal event is among those returned).
	NextFrom() (first int64, events []agui.Event, ended bool)
	// Wake receives when more events may be available.
	Wake() <-chan struct{}
	// Done is closed once the run has ended and its downstream work has been cancelled.
	Done() <-chan struct{}
	// Cancellations reports the downstream cancellations of the run and their results.
	Cancellations() []cancel.Report
}

// Errors an Engine's Start reports, so that the caller gets the matching A2A error.
var (
	ErrBusy         = errors.New("a2aserver: busy")
	ErrForbidden    = errors.New("a2aserver: forbidden")
	ErrShuttingDown = errors.New("a2aserver: shutting down")
)

// Paths of the bindings, below the server's root.
const (
	// PathJSONRPC is the A2A 1.0 JSON-RPC binding.
	PathJSONRPC = "/a2a"
	// PathREST is the root of the A2A 1.0 HTTP+JSON binding's routes.
	PathREST = "/a2a/v1"
	// PathJSONRPCv03 and PathRESTv03 are the A2A 0.3 bindings (a2acompat/a2av0).
	PathJSONRPCv03 = "/a2a/v0/jsonrpc"
	PathRESTv03    = "/a2a/v0/rest"
)

// Config configures the A2A surface.
type Config struct {
	// Port is the engine's port (coordinator.Runs): it sets Engine, Tasks and Log, which
	// are otherwise given apart (tests give fakes).
	Port Port
	// MaxActiveRuns caps the runs active on this process (server.max_active_runs), counted
	// by the port with every other surface's; with Port only.
	MaxActiveRuns int
	Engine        Engine
	// Tasks keeps the tasks (the engine's port, coordinator.Runs); required.
	Tasks Tasks
	// Log reads runs relayed on any replica (the engine's port, coordinator.Runs), for
	// tasks whose execution is not on this replica; nil: none.
	Log Log
	// Retention is how long a task is kept after its last change (server.event_retention:
	// its runs' event logs go too); 0: 24 h.
	Retention time.Duration
	// Card describes Baton in its agent card.
	Card CardInfo
	// CancelHorizon bounds how long a CancelTask waits for downstream cancels that were
	// not confirmed at once (limits.cancel_horizon); default 2 min.
	CancelHorizon time.Duration
	// SignIns, when set, puts a task whose run waits only for sign-ins in auth-required
	// and resumes the run once they are done (signin.go); nil: such a task is
	// input-required and the caller says when the sign-in is done.
	SignIns SignIns
	// Followers counts the streams each principal follows (SubscribeToTask), shared with
	// the other surfaces of this process (server.max_followers_per_principal); nil: a
	// counter of this server's own with the default cap. Beyond it SubscribeToTask answers
	// a server error that says to retry.
	Followers *followers.Counter
	// KeepAlive is the SSE keep-alive period of streaming calls; default 15 s.
	KeepAlive time.Duration
	Logger    *slog.Logger
}

// Server is the A2A surface: an http.Handler for the card and the bindings. Mount it at
// the server's root (server.Config.A2A), behind the server's authentication, which puts
// the caller's principal in the request context (package internal/principal).
type Server struct {
	cfg   Config
	exec  *executor
	mux   *http.ServeMux
	store *taskStore
}

// New returns the A2A surface.
func New(cfg Config) *Server {
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.CancelHorizon <= 0 {
		cfg.CancelHorizon = 2 * time.Minute
	}
	if cfg.Retention <= 0 {
		cfg.Retention = 24 * time.Hour
	}
	if cfg.KeepAlive <= 0 {
		cfg.KeepAlive = 15 * time.Second
	}
	s := &Server{cfg: cfg}
	if cfg.Port != nil {
		cfg.Engine, cfg.Tasks, cfg.Log = portEngine{port: cfg.Port, maxActive: cfg.MaxActiveRuns}, cfg.Port, cfg.Port
	}
	if cfg.Tasks == nil {
		panic("a2aserver: Config.Tasks is required")
	}
	s.exec = newExecutor(cfg.Engine, cfg.Log, cfg.CancelHorizon, cfg.Logger)
	s.exec.signIns = cfg.SignIns
	// Tasks are scoped by the caller: the store keeps each task's principal, answers
	// another principal's task as unknown, and ListTasks lists only the caller's.
	s.store = newTaskStore(cfg.Tasks, cfg.Log, cfg.Retention)
	caps := capabilities()
	var h a2asrv.RequestHandler = a2asrv.NewHandler(s.exec,
		a2asrv.WithTaskStore(s.store),
		a2asrv.WithEventQueueManager(a2aqueue.New()),
		a2asrv.WithCapabilityChecks(&caps),
		a2asrv.WithCallInterceptors(principalInterceptor{}),
		a2asrv.WithLogger(cfg.Logger),
	)
	if cfg.Followers == nil {
		cfg.Followers = followers.New(0)
	}
	h = &handler{RequestHandler: h, tasks: s.store, follows: cfg.Followers}
	panics := a2asrv.WithTransportPanicHandler(func(r any) error {
		cfg.Logger.Error("a2a server: panic in a streaming call", "panic", r)
		return a2a.ErrInternalError
	})
	keep := a2asrv.WithTransportKeepAlive(cfg.KeepAlive)
	mux := http.NewServeMux()
	mux.Handle(a2asrv.WellKnownAgentCardPath, withBase(a2asrv.NewAgentCardHandler(a2av0.NewAgentCardProducer(a2asrv.AgentCardProducerFn(s.card)))))
	mux.Handle(PathJSONRPC, a2asrv.NewJSONRPCHandler(h, keep, panics))
	mux.Handle(PathREST+"/", http.StripPrefix(PathREST, a2asrv.NewRESTHandler(h)))
	mux.Handle(PathJSONRPCv03, a2av0.NewJSONRPCHandler(h, keep, panics))
	mux.Handle(PathRESTv03+"/", http.StripPrefix(PathRESTv03, a2av0.NewRESTHandler(h)))
	s.mux = mux
	return s
}

// ServeHTTP serves the card and the bindings.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) { s.mux.ServeHTTP(w, r) }

// Close waits for nothing: runs belong to the engine, which ends them at shutdown; the
// executions relaying them end with their runs.
func (s *Server) Close() {}

// principalInterceptor makes the principal that the HTTP surface authenticated the
// a2asrv user of the call, so that the task store scopes tasks by it.
type principalInterceptor struct {
	a2asrv.PassthroughCallInterceptor
}

func (principalInterceptor) Before(ctx context.Context, callCtx *a2asrv.CallContext, _ *a2asrv.Request) (context.Context, any, error) {
	who, ok := principal.From(ctx)
	if !ok {
		return ctx, nil, a2a.ErrUnauthenticated
	}
	callCtx.User = a2asrv.NewAuthenticatedUser(userName(who), map[string]any{principalAttr: who})
	return ctx, nil, nil
}

// principalAttr is the user attribute that holds the principal id.
const principalAttr = "baton.principal"

// userName is the a2asrv user name of a principal: never empty, so that the anonymous
// principal of a deployment without auth is a user too.
func userName(who string) string { return "principal:" + who }

// principalOf returns the principal of an execution.
func principalOf(ec *a2asrv.ExecutorContext) (string, bool) {
	if ec.User == nil || !ec.User.Authenticated {
		return "", false
	}
	who, ok := ec.User.Attributes[principalAttr].(string)
	if !ok || userName(who) != ec.User.Name {
		return "", false
	}
	return who, true
}

type baseKey struct{}

// withBase puts the base URL that the request was addressed to in its context, for the
// card's interface URLs.
func withBase(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		scheme := "http"
		if r.TLS != nil || strings.EqualFold(r.Header.Get("X-Forwarded-Proto"), "https") {
			scheme = "https"
		}
		next.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), baseKey{}, scheme+"://"+r.Host)))
	})
}
