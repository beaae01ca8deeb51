package mcpclient

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"github.com/baton-dev/baton/internal/retry"
	"log/slog"
	"net/http"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// ErrClosed is returned by Call after Close.
var ErrClosed = errors.New("mcp registry closed")

// Values of ElicitRequest.Shape.
const (
	// ShapeMRTR: the server returned the request in the tool result
	// (2026-07-28 multi round-trip, or a -32042 URL elicitation error); the
	// call is sent again with the answer.
	ShapeMRTR = "mrtr"
	// ShapeSession: the server sent elicitation/create inside the call
	// (2025-11-25); the server waits for the answer.
	ShapeSession = "session"
)

// ServerConfig is one entry of the mcp_servers configuration.
type ServerConfig struct {
	Name string
	// Command starts a stdio server (argv). Exactly one of Command and URL is set.
	Command []string
	// URL is a streamable HTTP endpoint.
	URL string
	// Headers are sent with every HTTP request (for example Authorization).
	Headers map[string]string
	// Env holds extra environment variables for a stdio server. A stdio
	// server does not inherit Baton's environment (which holds API keys),
	// only PATH, HOME, USER, LOGNAME, SHELL, TERM, TMPDIR and the locale.
	Env map[string]string
	// Auth, when set, authorises Baton to a streamable HTTP server with OAuth
	// (see Auth); nil sends only Headers.
	Auth *Auth
}

// Options configures a Registry. The zero value is usable.
type Options struct {
	// Logger receives connection events and stdio servers' stderr (debug).
	// Default slog.Default().
	Logger *slog.Logger
	// HTTPClient is used for streamable HTTP servers. It must not set a
	// Timeout (responses stream as long as a call runs). Default: a client
	// of its own, closed with the registry.
	HTTPClient *http.Client
	// Elicitor answers elicitation requests; nil declines them, and the tool
	// result says so.
	Elicitor Elicitor
	// ReconnectBackoff is the first pause before reconnecting; it doubles
	// with every attempt, up to 5 s. Default 200 ms.
	ReconnectBackoff time.Duration
	// MaxReconnects bounds the reconnections (and resends) within one call.
	// Default 3.
	MaxReconnects int
	// SendingMiddleware, when set, builds go-sdk sending middleware for each server
	// (tracing: spans and params._meta trace context). server is the config name;
	// transport is "pipe" for stdio and "tcp" for streamable HTTP.
	SendingMiddleware func(server, transport string) mcp.Middleware
	// MaxUserSessions bounds the sessions kept open per Auth.PerPrincipal server
	// (one per principal): beyond it, the least recently used idle session is
	// closed. Default 256.
	MaxUserSessions int
	// UserSessionIdle closes a principal's session unused for this long (checked
	// when sessions are handed out). Default 15 minutes.
	UserSessionIdle time.Duration
	// StartWait bounds how long New waits for the first connections; servers
	// not connected by then go on connecting in the background and their
	// tools join the catalog when they connect. 0 waits for every first
	// attempt (each bounded by the 30 s connect timeout).
	StartWait time.Duration
}

// Elicitor is asked when an MCP server needs input from the user, in form
// or URL mode, whichever shape the server used. The returned result goes back
// to the server; an error fails the call and is returned by Call (wrapped;
// for an in-session request, when it can be attributed to the call). ctx is
// the call's context (in session: the server's request), so the time spent
// waiting counts against the tool timeout the caller set.
type Elicitor interface {
	Elicit(ctx context.Context, req ElicitRequest) (*mcp.ElicitResult, error)
}

// ElicitRequest is what a server asked for.
type ElicitRequest struct {
	Server string
	// Tool is the server's own tool name; empty when an in-session request
	// cannot be attributed to a single call.
	Tool    string
	Mode    string // "form" or "url"
	Message string
	URL     string // url mode
	Schema  any    // form mode: the requested (flat object) schema
	Shape   string // ShapeMRTR or ShapeSession
	// CallKey is CallOptions.Key of the call being asked; nil when the request cannot be
	// attributed to a single call (several calls in flight on that server).
	CallKey any
}

// Tool is one entry of the catalog offered to the LLM.
type Tool struct {
	// Name is "<server>__<tool>", sanitised to [A-Za-z0-9_-], at most 64 characters.
	Name        string
	Server      string
	ToolName    string // the server's own name for the tool
	Description string
	// InputSchema is the server's input schema (always an object schema).
	InputSchema map[string]any
	// Idempotent is true when the server annotates the tool idempotentHint
	// or readOnlyHint: such a call is sent again after a broken connection.
	Idempotent bool
	// ReadOnly is the server's readOnlyHint; Destructive is true only when the server
	// annotates destructiveHint: true explicitly (approvals.destructive asks before such
	// a tool unless it is also read-only).
	ReadOnly, Destructive bool
}

// CallOptions configures one call.
type CallOptions struct {
	// Progress is called for every progress notification of the call, also
	// for late ones that arrive after Call returned. It must not block.
	Progress func(p Progress)
	// Park: when true, 2026-07-28 input requests and -32042 URL
	// elicitation errors are not sent to the Elicitor; Call (or Resume)
	// returns ("", *InputRequired) instead, with nothing held in memory.
	// In-session requests (2025-11-25) still go to the Elicitor.
	Park bool
	// Key is handed back as ElicitRequest.CallKey when this call's server asks the user
	// in-session, so the Elicitor can tell which of its callers is being asked.
	Key any
	// Principal is on whose behalf the call runs ("" without auth): a server with
	// Auth.PerPrincipal uses that principal's session and token.
	Principal string
	// Meta is sent in the call's _meta (beside the progress token): the caller's run depth
	// (baton/depth), for a server that is another Baton.
	Meta map[string]any
}

// Progress is one progress notification.
type Progress struct {
	Progress, Total float64
	Message         string
}

// ServerStatus describes one configured server.
type ServerStatus struct {
	Name      string
	Connected bool
	Tools     int
	// LastError is the last connection error, empty when connected.
	LastError string
}

// Registry is the set of configured MCP servers and their tool catalog. It
// is safe for concurrent use.
type Registry struct {
	opts     Options
	ownHTTP  bool // opts.HTTPClient was made here, and is closed with the registry
	log      *slog.Logger
	servers  []*server
	progress progressRouter
	ask      *asker

	bgCtx    context.Context
	bgCancel context.CancelFunc
	// started is closed when every server's first connection attempt has ended.
	started chan struct{}
	wg      sync.WaitGroup
	closed  atomic.Bool

	mu      sync.RWMutex
	catalog []Tool
	// version counts the changes of catalog (ToolsVersion).
	version uint64
	byName  map[string]*entry
	// collided holds the name collisions already logged.
	collided map[string]bool
}

// entry is a catalog entry with what a call needs.
type entry struct {
	Tool
	srv    *server
	schema *schema
	// signIn marks the placeholder tool of a PerPrincipal server (users.go).
	signIn bool
}

// New connects every server (in parallel, waiting at most opts.StartWait) and
// builds the catalog. A server that cannot be connected is logged and retried
// later (its tools are absent until then, and calls of "<server>__…" names
// answer [UNREACHABLE]); it is not an error. New fails only for an invalid
// config.
func New(ctx context.Context, servers []ServerConfig, opts Options) (*Registry, error) {
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	if opts.ReconnectBackoff <= 0 {
		opts.ReconnectBackoff = 200 * time.Millisecond
	}
	if opts.MaxReconnects <= 0 {
		opts.MaxReconnects = 3
	}
	if opts.MaxUserSessions <= 0 {
		opts.MaxUserSessions = 256
	}
	if opts.UserSessionIdle <= 0 {
		opts.UserSessionIdle = 15 * time.Minute
	}
	ownHTTP := opts.HTTPClient == nil
	if ownHTTP {
		// No client timeout: SSE responses stay open as long as a call runs.
		opts.HTTPClient = &http.Client{Transport: http.DefaultTransport.(*http.Transport).Clone()}
	}
	r := &Registry{
		opts:    opts,
		ownHTTP: ownHTTP,
		log:     opts.Logger,
		ask:     &asker{elicitor: opts.Elicitor, log: opts.Logger},
		byName:  map[string]*entry{},
	}
	r.progress.live = map[string]func(Progress){}
	seen := map[string]bool{}
	for i, cfg := range servers {
		if err := validateConfig(cfg); err != nil {
			return nil, fmt.Errorf("mcp_servers[%d]: %w", i, err)
		}
		if seen[cfg.Name] {
			return nil, fmt.Errorf("mcp_servers[%d]: duplicate name %q", i, cfg.Name)
		}
		seen[cfg.Name] = true
		s := newServer(r, cfg, "", false)
		r.servers = append(r.servers, s)
		if s.perUser() {
			// No principal to list the tools as yet: offer the sign-in tool (users.go).
			r.install(s, []*entry{signInEntry(s)})
		}
	}
	r.bgCtx, r.bgCancel = context.WithCancel(context.WithoutCancel(ctx))
	r.started = make(chan struct{})
	r.connectAll(ctx)
	return r, nil
}

// connectAll makes the first connection of every server, in the background, and waits
// for them for at most opts.StartWait (or until ctx ends). A server still connecting
// after that joins the catalog when it connects: a server that never answers initialize
// must not hold the caller's start-up (design/degraded-start.md).
func (r *Registry) connectAll(ctx context.Context) {
	var wg sync.WaitGroup
	for _, s := range r.servers {
		if s.perUser() {
			continue // connected per principal, at their first call (users.go)
		}
		wg.Add(1)
		started := r.goTracked(func() {
			defer wg.Done()
			if _, err := s.session(r.bgCtx); err != nil {
				r.log.Warn("mcp server not connected; will retry", "server", s.cfg.Name, "error", err)
			}
		})
		if !started {
			wg.Done()
		}
	}
	done := r.started
	go func() {
		wg.Wait()
		close(done)
	}()
	var timeout <-chan time.Time
	if r.opts.StartWait > 0 {
		t := time.NewTimer(r.opts.StartWait)
		defer t.Stop()
		timeout = t.C
	}
	select {
	case <-done:
	case <-timeout:
	case <-ctx.Done():
	}
}

func validateConfig(cfg ServerConfig) error {
	switch {
	case cfg.Name == "":
		return errors.New("name is required")
	case len(cfg.Command) > 0 && cfg.URL != "":
		return fmt.Errorf("server %q: set either command or url, not both", cfg.Name)
	case len(cfg.Command) == 0 && cfg.URL == "":
		return fmt.Errorf("server %q: command or url is required", cfg.Name)
	case len(cfg.Command) > 0 && cfg.Command[0] == "":
		return fmt.Errorf("server %q: command is empty", cfg.Name)
	case cfg.Auth != nil && cfg.URL == "":
		return fmt.Errorf("server %q: OAuth needs a streamable HTTP server (url)", cfg.Name)
	case cfg.Auth != nil && cfg.Auth.Handler == nil:
		return fmt.Errorf("server %q: Auth.Handler is required", cfg.Name)
	}
	return nil
}

// Tools returns the catalog: the tools of every connected server, in config
// order. It also starts a background reconnection of servers that are down,
// so that their tools appear in a later catalog.
func (r *Registry) Tools() []Tool {
	for _, s := range r.servers {
		s.kick()
	}
	r.mu.RLock()
	defer r.mu.RUnlock()
	out := make([]Tool, len(r.catalog))
	for i, t := range r.catalog {
		t.InputSchema = cloneMap(t.InputSchema)
		out[i] = t
	}
	return out
}

// ToolsVersion changes whenever the catalogue Tools returns changes, so that a caller can
// build what it derives from the tools once per change. Like Tools, it starts a
// background connection to a server that is down.
func (r *Registry) ToolsVersion() uint64 {
	for _, s := range r.servers {
		s.kick()
	}
	r.mu.RLock()
	defer r.mu.RUnlock()
	return r.version
}

// Status reports the state of every configured server.
func (r *Registry) Status() []ServerStatus {
	out := make([]ServerStatus, 0, len(r.servers))
	r.mu.RLock()
	counts := map[*server]int{}
	for _, e := range r.byName {
		counts[e.srv]++
	}
	r.mu.RUnlock()
	for _, s := range r.servers {
		st := ServerStatus{Name: s.cfg.Name, Tools: counts[s]}
		if s.perUser() {
			st.Connected, st.LastError = s.userStatus()
			out = append(out, st)
			continue
		}
		s.mu.Lock()
		st.Connected = s.alive()
		if !st.Connected && s.lastErr != nil {
			st.LastError = s.lastErr.Error()
		}
		s.mu.Unlock()
		out = append(out, st)
	}
	return out
}

// Close closes every session (stdio servers are stopped) and waits for the
// registry's goroutines. Calls in flight fail.
func (r *Registry) Close() error {
	if r.closed.Swap(true) {
		return nil
	}
	r.bgCancel()
	var errs []error
	var mu sync.Mutex
	var wg sync.WaitGroup
	for _, s := range r.servers {
		wg.Go(func() {
			if err := s.close(); err != nil {
				mu.Lock()
				errs = append(errs, fmt.Errorf("closing %s: %w", s.cfg.Name, err))
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	r.wg.Wait()
	if r.ownHTTP {
		r.opts.HTTPClient.CloseIdleConnections()
	}
	return errors.Join(errs...)
}

// setTools replaces the tools of s in the catalog.
func (r *Registry) setTools(s *server, tools []*mcp.Tool) {
	entries := make([]*entry, 0, len(tools))
	for _, t := range tools {
		sch, err := compileSchema(t.InputSchema)
		if err != nil {
			r.log.Warn("mcp tool schema not checked on the client", "server", s.cfg.Name, "tool", t.Name, "error", err)
		}
		idem, readOnly, destructive := false, false, false
		if a := t.Annotations; a != nil {
			idem = a.IdempotentHint || a.ReadOnlyHint
			readOnly = a.ReadOnlyHint
			destructive = a.DestructiveHint != nil && *a.DestructiveHint
		}
		entries = append(entries, &entry{
			Tool: Tool{
				Server:      s.cfg.Name,
				ToolName:    t.Name,
				Description: t.Description,
				InputSchema: objectSchema(t.InputSchema),
				Idempotent:  idem,
				ReadOnly:    readOnly,
				Destructive: destructive,
			},
			srv:    s,
			schema: sch,
		})
	}
	r.install(s, entries)
}

// install replaces the catalog entries of s.
func (r *Registry) install(s *server, entries []*entry) {
	r.mu.Lock()
	defer r.mu.Unlock()
	// s.entries are templates without names; the catalog gets named copies,
	// so that an entry a call holds is never written again.
	s.entries = entries
	catalog := make([]Tool, 0, len(r.catalog)+len(entries))
	byName := map[string]*entry{}
	var raws []rawName
	for _, srv := range r.servers {
		for _, tmpl := range srv.entries {
			raws = append(raws, rawName{srv.cfg.Name, tmpl.ToolName})
		}
	}
	names, collisions := catalogNames(raws)
	r.logCollisions(collisions)
	i := 0
	for _, srv := range r.servers {
		for _, tmpl := range srv.entries {
			e := *tmpl
			e.Name = names[i]
			i++
			if _, dup := byName[e.Name]; dup {
				continue // one server listing the same tool twice
			}
			byName[e.Name] = &e
			catalog = append(catalog, e.Tool)
		}
	}
	r.catalog, r.byName = catalog, byName
	r.version++
}

// logCollisions logs, once per name and set of raw names, tools whose names sanitise
// alike and were told apart by a hash. It runs under r.mu.
func (r *Registry) logCollisions(collisions map[string][]rawName) {
	for name, raws := range collisions {
		parts := make([]string, 0, len(raws))
		for _, raw := range raws {
			parts = append(parts, fmt.Sprintf("%s/%s", raw.server, raw.tool))
		}
		sort.Strings(parts)
		key := name + "\x00" + strings.Join(parts, "\x00")
		if r.collided[key] {
			continue
		}
		if r.collided == nil {
			r.collided = map[string]bool{}
		}
		r.collided[key] = true
		r.log.Warn("mcp tool names collide; each gets a stable hash suffix", "name", name, "tools", strings.Join(parts, ", "))
	}
}

// Call runs the tool name (a catalog name) with args (a JSON object; empty
// or null means {}). It returns the tagged string the LLM reads. A non-nil
// error means the run must end: the server's on_tool_error is "error" and the
// tool failed (the error wraps ErrToolFailed; the string still holds the
// [ERROR] result), ctx was cancelled (the error wraps ctx.Err()), an
// Elicitor failed, or the registry is closed. Error messages are safe to show
// to the user.
//
// With opts.Park, a call that needs the user's input (2026-07-28 input
// requests, or a -32042 URL elicitation error) returns ("", *InputRequired);
// see Resume.
//
// The deadline of ctx is the tool timeout: when it passes, the call is
// cancelled on the server and the result is [RETRY:action_timeout].
func (r *Registry) Call(ctx context.Context, name string, args json.RawMessage, opts CallOptions) (Result, error) {
	e, ok := r.lookup(name)
	if !ok {
		e, ok = r.signInFallback(name)
	}
	if !ok {
		if res, down := r.Unreachable(name); down {
			return res, nil
		}
		return Result{Status: StatusUnknownTool, Tool: name, Message: "There is no tool with this name."}, nil
	}
	argMap, aerr := decodeArgs(args)
	if aerr == nil {
		aerr = e.schema.check(argMap)
	}
	if aerr != nil {
		return Result{Status: StatusInvalidArguments, Tool: e.Name, Server: e.Server, ToolName: e.ToolName,
			Invalid: &InvalidArgs{Reason: aerr.reason, Field: aerr.field, Got: aerr.got}}, nil
	}
	c := r.newCall(ctx, e, argMap, opts)
	defer r.progress.finish(c.token)
	return c.run(ctx)
}

// newCall prepares a call of e; the caller finishes its progress token.
func (r *Registry) newCall(ctx context.Context, e *entry, args map[string]any, opts CallOptions) *call {
	c := &call{r: r, e: e, srv: e.srv.forPrincipal(opts.Principal), args: args, park: opts.Park, key: opts.Key, meta: opts.Meta, logCtx: ctx}
	if dl, ok := ctx.Deadline(); ok {
		c.timeout = time.Until(dl)
	}
	c.token = r.progress.register(opts.Progress)
	return c
}

func (r *Registry) lookup(name string) (*entry, bool) {
	r.mu.RLock()
	defer r.mu.RUnlock()
	e, ok := r.byName[name]
	return e, ok
}

// Unreachable tells a call of a tool that is missing from the catalog because its server
// is down apart from a call of a tool that does not exist. A server's tools are offered
// once it has connected (a server never connected has no catalog to offer) and stay
// offered, as last listed, while it is disconnected; a name of the form "<server>__…"
// for a configured server that is not connected gets a StatusUnreachable result (and a
// background reconnection), so that the model is told to try later or elsewhere rather
// than that it misspelled the tool. ok is false when the name belongs to no down server.
func (r *Registry) Unreachable(name string) (res Result, ok bool) {
	for _, s := range r.servers {
		prefix := toolName(s.cfg.Name, "")
		if !strings.HasPrefix(name, prefix) || len(name) == len(prefix) {
			continue
		}
		if s.perUser() {
			// Connected per principal: a name missing from its catalog is unknown.
			return Result{}, false
		}
		s.mu.Lock()
		alive := s.alive()
		s.mu.Unlock()
		if alive {
			return Result{}, false
		}
		s.kick()
		tool := strings.TrimPrefix(name, prefix)
		if len(tool) > 64 {
			tool = tool[:64]
		}
		return Result{Status: StatusUnreachable, Tool: name, Server: s.cfg.Name, ToolName: tool,
			Message: "The server is not connected."}, true
	}
	return Result{}, false
}

// goTracked runs f in a goroutine that Close waits for; it returns false
// (and does nothing) once the registry is closed. Callers hold the lock of
// a server, which orders them before Close's pass over that server.
func (r *Registry) goTracked(f func()) bool {
	if r.closed.Load() {
		return false
	}
	r.wg.Go(f)
	return true
}

// backoff is the pause before reconnection attempt n (0-based).
func (r *Registry) backoff(n int) time.Duration {
	return retry.Backoff(r.opts.ReconnectBackoff, 5*time.Second, n+1)
}

// objectSchema returns a copy of the server's input schema as a map, made
// an object schema with properties (what LLM providers require).
func objectSchema(v any) map[string]any {
	m := map[string]any{}
	if v != nil {
		if b, err := json.Marshal(v); err == nil {
			_ = json.Unmarshal(b, &m)
		}
	}
	if m == nil {
		m = map[string]any{}
	}
	if _, ok := m["type"]; !ok {
		m["type"] = "object"
	}
	if _, ok := m["properties"]; !ok {
		m["properties"] = map[string]any{}
	}
	return m
}

func cloneMap(m map[string]any) map[string]any {
	if m == nil {
		return nil
	}
	b, err := json.Marshal(m)
	if err != nil {
		return m
	}
	var out map[string]any
	if json.Unmarshal(b, &out) != nil {
		return m
	}
	return out
}

// WaitStarted waits until every server's first connection attempt has ended (connected
// or failed) or ctx is done. A caller that created the registry with a short StartWait,
// to overlap its other start-up work, uses it to give the servers the rest of the wait.
func (r *Registry) WaitStarted(ctx context.Context) {
	select {
	case <-r.started:
	case <-ctx.Done():
	}
}
