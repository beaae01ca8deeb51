package mcpserver

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/auth"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/baton-dev/baton/agui"
	"github.com/baton-dev/baton/cancel"
	"github.com/baton-dev/baton/internal/principal"
)

// Engine is what the MCP surface needs of Baton's run engine.
type Engine interface {
	// Start begins a run of the model loop for in on behalf of principal. Errors wrap
	// ErrBusy, ErrForbidden or ErrShuttingDown when they are one of those.
	Start(ctx context.Context, in *agui.RunAgentInput, principal string) (Run, error)
	// Delegate begins a run whose single step is one call of the sub-agent tool agent (the
	// engine's name for it) with the text of in's user message as its prompt, no model in
	// between; a resume of such a run (in.Resume) goes through Delegate too. Errors as Start's.
	Delegate(ctx context.Context, agent string, in *agui.RunAgentInput, principal string) (Run, error)
	// Stop cancels the active run (threadID, runID) of principal.
	Stop(threadID, runID, principal string) error
}

// Run is one run of the engine, as the MCP surface reads it.
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

// Errors an Engine's Start reports, so that the caller gets a matching MCP error.
var (
	ErrBusy         = errors.New("mcpserver: busy")
	ErrForbidden    = errors.New("mcpserver: forbidden")
	ErrShuttingDown = errors.New("mcpserver: shutting down")
	// ErrRefused is wrapped by a refusal the caller can act on (a budget spent, too deep a
	// nesting, too many threads): the call's result says so with the error's message.
	ErrRefused = errors.New("mcpserver: refused")
)

// Agent is a sub-agent offered as an MCP tool.
type Agent struct {
	// Name is the tool's name: the agent's configured name.
	Name string
	// Target is the engine's tool name of the agent (what Engine.Delegate takes).
	Target string
	// Describe returns the agent's current description (from its card); nil or "": a
	// generic one.
	Describe func() string
}

// Config configures the MCP surface.
type Config struct {
	Engine Engine
	// Name and Version are the server's implementation info in the initialize result.
	Name, Version string
	// Agents are the sub-agents offered as tools (mcp_server.agents).
	Agents []Agent
	// CoordinatorTool is the name of the tool that runs the whole coordinator
	// (mcp_server.coordinator_tool); "": none.
	CoordinatorTool string
	// MaxPromptBytes caps a call's prompt (server.max_body_bytes); default 1 MiB.
	MaxPromptBytes int
	// Anonymous is the principal of a call that carries none: "" over HTTP without auth,
	// the local user over stdio.
	Anonymous string
	// CancelHorizon bounds how long a cancelled call waits for its downstream cancels to
	// be confirmed (limits.cancel_horizon); default 2 min.
	CancelHorizon time.Duration
	// ProgressInterval is the shortest time between two progress notifications of one
	// call; default 100 ms (at most ten a second).
	ProgressInterval time.Duration
	// TaskTTL is how long a finished task of the tasks extension stays readable
	// (mcp_server.task_ttl); 0: as long as its thread.
	TaskTTL time.Duration
	// KeepOnDisconnect keeps a call's run going when the client drops the HTTP request that
	// carries the call (server.on_disconnect: detach); by default the drop cancels it.
	KeepOnDisconnect bool
	Logger           *slog.Logger
}

// Server is the MCP surface.
type Server struct {
	cfg Config
	srv *mcp.Server
	// posts are the HTTP requests in flight, by the nonce their callHeader carries, so that
	// a call's handler can follow the request that carries it (go-sdk's handler context
	// follows the session).
	posts sync.Map // string → context.Context
	// tools are the tools by name; tasks reads runs for the tasks extension (nil: the
	// engine cannot, and the extension is not offered).
	tools map[string]tool
	tasks TaskEngine
	// byTag are the tools by the tag their threads' ids carry (tasks/list).
	byTag map[string]tool
}

// callHeader carries, from Handler to the tool handler (go-sdk passes each request's
// headers as RequestExtra.Header), the nonce of the HTTP request that carries a call. A
// client's own value is replaced.
const callHeader = "X-Baton-Mcp-Request"

// protocolVersionHeader names a request's MCP protocol version (streamable HTTP), and
// statelessVersion is the first version served without sessions.
const (
	protocolVersionHeader = "Mcp-Protocol-Version"
	statelessVersion      = "2026-07-28"
)

// sessionTimeout closes an idle MCP session.
const sessionTimeout = 30 * time.Minute

// principalPrefix marks the user ids the HTTP handler gives go-sdk (auth.TokenInfo), so
// that an empty principal is never confused with "no token info".
const principalPrefix = "baton:"

// New returns the MCP surface with its tools, or an error when two tools would have one
// name.
func New(cfg Config) (*Server, error) {
	if cfg.Engine == nil {
		return nil, errors.New("mcpserver: no engine")
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.MaxPromptBytes <= 0 {
		cfg.MaxPromptBytes = 1 << 20
	}
	if cfg.CancelHorizon <= 0 {
		cfg.CancelHorizon = 2 * time.Minute
	}
	if cfg.ProgressInterval <= 0 {
		cfg.ProgressInterval = 100 * time.Millisecond
	}
	if cfg.Name == "" {
		cfg.Name = "baton"
	}
	s := &Server{cfg: cfg, tools: map[string]tool{}}
	opts := &mcp.ServerOptions{Logger: sdkLogger(cfg.Logger)}
	if _, ok := cfg.Engine.(TaskEngine); ok {
		opts.Capabilities = &mcp.ServerCapabilities{Extensions: map[string]any{tasksExtension: map[string]any{}}}
	}
	// Tools are listed with their descriptions at the time; a card read later changes the
	// description with the next tools/list (refreshDescriptions).
	s.srv = mcp.NewServer(&mcp.Implementation{Name: cfg.Name, Version: cfg.Version}, opts)
	seen := map[string]bool{}
	if cfg.CoordinatorTool != "" {
		seen[cfg.CoordinatorTool] = true
		s.srv.AddTool(&mcp.Tool{
			Name: cfg.CoordinatorTool,
			Description: "Ask Baton, the coordinator: a model that delegates to its A2A agents and MCP tools " +
				"and answers with the result. Input: the request as \"prompt\".",
			InputSchema: inputSchemaJSON,
		}, s.handler(newTool(cfg.CoordinatorTool, "")))
		s.tools[cfg.CoordinatorTool] = newTool(cfg.CoordinatorTool, "")
	}
	for _, a := range cfg.Agents {
		if seen[a.Name] {
			return nil, fmt.Errorf("mcpserver: two tools are named %q (mcp_server.coordinator_tool and an agent)", a.Name)
		}
		seen[a.Name] = true
		s.srv.AddTool(&mcp.Tool{Name: a.Name, Description: agentDescription(a), InputSchema: inputSchemaJSON},
			s.handler(newTool(a.Name, a.Target)))
		s.tools[a.Name] = newTool(a.Name, a.Target)
	}
	s.srv.AddReceivingMiddleware(s.refreshDescriptions)
	if err := s.registerTasks(); err != nil {
		return nil, fmt.Errorf("mcpserver: tasks extension: %w", err)
	}
	return s, nil
}

// Serve serves one session over transport (mcp.StdioTransport for --mcp-stdio) until the
// client goes away or ctx ends.
func (s *Server) Serve(ctx context.Context, transport mcp.Transport) error {
	return s.srv.Run(ctx, transport)
}

// HTTPOptions configures the streamable HTTP handler.
type HTTPOptions struct {
	// MaxBodyBytes caps a request body; it must leave room for a prompt of MaxPromptBytes
	// (a larger prompt then gets an MCP error, not a 413). Default: twice MaxPromptBytes.
	MaxBodyBytes int64
}

// Handler returns the streamable HTTP handler. Mount it behind the server's
// authentication, which puts the caller's principal in the request context (package
// internal/principal); a request without one is refused.
func (s *Server) Handler(opts HTTPOptions) http.Handler {
	if opts.MaxBodyBytes <= 0 {
		opts.MaxBodyBytes = 2 * int64(s.cfg.MaxPromptBytes)
	}
	server := func(*http.Request) *mcp.Server { return s.srv }
	// A stateful handler serves 2025-11-25 and older (go-sdk negotiates sessions at
	// 2025-11-25); a stateless one serves 2026-07-28, whose requests each carry their
	// protocol version (SEP-2575). Requests are routed by that version.
	stateful := mcp.NewStreamableHTTPHandler(server, &mcp.StreamableHTTPOptions{
		Logger:              sdkLogger(s.cfg.Logger),
		MaxRequestBodyBytes: opts.MaxBodyBytes,
		// A session its client abandoned is closed after this long idle (go-sdk keeps
		// stateful sessions, and their goroutines, until then).
		SessionTimeout: sessionTimeout,
	})
	stateless := mcp.NewStreamableHTTPHandler(server, &mcp.StreamableHTTPOptions{
		Logger:              sdkLogger(s.cfg.Logger),
		MaxRequestBodyBytes: opts.MaxBodyBytes,
		Stateless:           true,
		// A call whose POST is closed is cancelled.
		PropagateRequestCancellation: true,
	})
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get(protocolVersionHeader) >= statelessVersion {
			stateless.ServeHTTP(w, r)
			return
		}
		stateful.ServeHTTP(w, r)
	})
	// go-sdk binds a session to the user of its first request (auth.TokenInfo.UserID) and
	// hands the token info to each call: the principal travels that way.
	bound := auth.RequireBearerToken(func(ctx context.Context, _ string, r *http.Request) (*auth.TokenInfo, error) {
		who, _ := principal.From(r.Context())
		return &auth.TokenInfo{UserID: principalPrefix + who}, nil
	}, &auth.RequireBearerTokenOptions{AllowMissingExpiration: true})(h)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		who, ok := principal.From(r.Context())
		if !ok {
			http.Error(w, "unauthenticated", http.StatusUnauthorized)
			return
		}
		r.Header.Del(callHeader)
		if r.Method == http.MethodPost {
			nonce := newID("")
			s.posts.Store(nonce, r.Context())
			defer s.posts.Delete(nonce)
			r.Header.Set(callHeader, nonce)
		}
		if who == "" {
			// No auth: there is no bearer token to bind, and every caller is the
			// anonymous principal.
			h.ServeHTTP(w, r)
			return
		}
		bound.ServeHTTP(w, r)
	})
}

// followRequest returns ctx ended also when the HTTP request that carries the call ends
// (the client dropped it), unless KeepOnDisconnect; stop releases it.
func (s *Server) followRequest(ctx context.Context, req *mcp.CallToolRequest) (_ context.Context, stop func()) {
	if s.cfg.KeepOnDisconnect || req.Extra == nil || req.Extra.Header == nil {
		return ctx, func() {}
	}
	post, ok := s.posts.Load(req.Extra.Header.Get(callHeader))
	if !ok {
		return ctx, func() {}
	}
	ctx, cancel := context.WithCancel(ctx)
	unhook := context.AfterFunc(post.(context.Context), cancel)
	return ctx, func() { unhook(); cancel() }
}

// principalOf returns the principal of a call: the HTTP request's, else the anonymous one.
func (s *Server) principalOf(req *mcp.CallToolRequest) string {
	if req.Extra != nil && req.Extra.TokenInfo != nil {
		if who, ok := cutPrefix(req.Extra.TokenInfo.UserID, principalPrefix); ok {
			return who
		}
	}
	return s.cfg.Anonymous
}

func cutPrefix(s, prefix string) (string, bool) {
	if len(s) < len(prefix) || s[:len(prefix)] != prefix {
		return "", false
	}
	return s[len(prefix):], true
}

// refreshDescriptions re-adds an agent tool whose card description changed since it was
// listed (a card read after the start), before tools/list answers.
func (s *Server) refreshDescriptions(next mcp.MethodHandler) mcp.MethodHandler {
	described := map[string]string{}
	for _, a := range s.cfg.Agents {
		described[a.Name] = agentDescription(a)
	}
	var mu sync.Mutex
	return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
		if method == "tools/list" {
			mu.Lock()
			for _, a := range s.cfg.Agents {
				if d := agentDescription(a); d != described[a.Name] {
					described[a.Name] = d
					s.srv.AddTool(&mcp.Tool{Name: a.Name, Description: d, InputSchema: inputSchemaJSON},
						s.handler(newTool(a.Name, a.Target)))
				}
			}
			mu.Unlock()
		}
		return next(ctx, method, req)
	}
}

// agentDescription is an agent tool's description: its card's, or a generic one.
func agentDescription(a Agent) string {
	if a.Describe != nil {
		if d := a.Describe(); d != "" {
			return d
		}
	}
	return fmt.Sprintf("Delegate one task to the A2A agent %q. Input: what it should do, as \"prompt\".", a.Name)
}

// inputSchemaJSON is inputSchema encoded once. go-sdk marshals a tool's input schema on
// every tools/list and, at 2026-07-28, on every tools/call over HTTP (it looks for
// x-mcp-header annotations): encoded JSON costs it a copy, where a map of maps costs a walk
// with sorted keys each time (BenchmarkInputSchemaMarshal).
var inputSchemaJSON = json.RawMessage(mustJSON(inputSchema()))

// inputSchema is every tool's input: the prompt, and the answer to a question the call
// asked (DESIGN §9d).
func inputSchema() map[string]any {
	return map[string]any{
		"type": "object",
		"properties": map[string]any{
			"prompt": map[string]any{"type": "string", "description": "What to do. With \"resume\": may be empty."},
			"resume": map[string]any{
				"type":        "object",
				"description": "The answer to a question a previous call returned with status input_required.",
				"properties": map[string]any{
					"interruptId": map[string]any{"type": "string", "description": "The interruptId of that result."},
					"payload":     map[string]any{"description": "The answer, matching the question's responseSchema."},
				},
				"required":             []string{"interruptId"},
				"additionalProperties": false,
			},
		},
		"required":             []string{"prompt"},
		"additionalProperties": false,
	}
}

// sdkLogger is the logger given to go-sdk: warnings and errors only (it logs every session
// at info, and a 2026-07-28 request is a session of its own).
func sdkLogger(l *slog.Logger) *slog.Logger { return slog.New(warnOnly{l.Handler()}) }

type warnOnly struct{ slog.Handler }

func (w warnOnly) Enabled(ctx context.Context, lv slog.Level) bool {
	return lv >= slog.LevelWarn && w.Handler.Enabled(ctx, lv)
}

func (w warnOnly) WithAttrs(as []slog.Attr) slog.Handler { return warnOnly{w.Handler.WithAttrs(as)} }
func (w warnOnly) WithGroup(g string) slog.Handler       { return warnOnly{w.Handler.WithGroup(g)} }
