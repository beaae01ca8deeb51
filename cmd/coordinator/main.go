// Command coordinator runs Baton: an AG-UI server whose LLM delegates to A2A sub-agents and
// MCP tools.
//
//	coordinator --config baton.yaml   # a configured deployment
//	coordinator                       # the embedded demo stack on loopback
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"runtime/debug"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/baton-dev/baton/coordinator"
	"github.com/baton-dev/baton/failure"
	"github.com/baton-dev/baton/history"
	"github.com/baton-dev/baton/internal/config"
	"github.com/baton-dev/baton/internal/demoagent"
	"github.com/baton-dev/baton/internal/demomcp"
	"github.com/baton-dev/baton/internal/followers"
	"github.com/baton-dev/baton/internal/redact"
	"github.com/baton-dev/baton/llm"
	"github.com/baton-dev/baton/llm/anthropic"
	"github.com/baton-dev/baton/llm/openai"
	"github.com/baton-dev/baton/llm/scripted"
	"github.com/baton-dev/baton/mcpclient"
	"github.com/baton-dev/baton/mcpserver"
	"github.com/baton-dev/baton/metrics"
	"github.com/baton-dev/baton/server"
	"github.com/baton-dev/baton/spend"
	"github.com/baton-dev/baton/store"
	"github.com/baton-dev/baton/subagent"
	"github.com/baton-dev/baton/telemetry"
	"github.com/baton-dev/baton/web"
)

// version may be stamped at build time with -ldflags "-X main.version=…"; otherwise
// --version reports the module version and VCS revision from the build info.
var version = "dev"

// mcpStartWait bounds how long the start waits for MCP servers' first connections, in
// parallel with the agents' first card reads (1 s): the listener must open within 2 s
// whatever they do; slower servers join when they connect.
const mcpStartWait = 500 * time.Millisecond

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

// run starts the coordinator and serves until SIGINT or SIGTERM, then drains. It returns the
// exit code: 2 for a bad command line or configuration, 1 for a start that failed.
func run(args []string, stdout, stderr io.Writer) int {
	fl, code, done := parseFlags(args, stdout, stderr)
	if done {
		return code
	}
	a := &app{flags: fl, stdout: stdout, stderr: stderr}
	defer a.cleanup()
	steps := []func() error{
		a.setupLogging,
		a.loadConfig,
		a.setupAuth,
		a.setupSignals,
		a.setupOIDC,
		a.setupTelemetry,
		a.startDemo,
		a.setupModel,
		a.startMCP,
		a.startAgents,
		a.openStore,
		a.buildEngine,
		a.startServices,
		a.startServer,
	}
	for i, step := range steps {
		if fl.mcpStdio && i == len(steps)-1 {
			break // stdout carries MCP: no listener
		}
		if err := step(); err != nil {
			fmt.Fprintf(a.stderr, "coordinator: %v\n", err)
			var ee *exitError
			if errors.As(err, &ee) {
				return ee.code
			}
			return 1
		}
	}
	if fl.mcpStdio {
		return a.serveStdio()
	}
	return a.serveUntilSignal()
}

// exitError is a start-up failure and the exit code it ends the process with.
type exitError struct {
	code int
	err  error
}

func (e *exitError) Error() string { return e.err.Error() }
func (e *exitError) Unwrap() error { return e.err }

// badInput is a failure of the command line or configuration (exit code 2).
func badInput(err error) error { return &exitError{code: 2, err: err} }

// startFailed is a failure to start with a valid configuration (exit code 1).
func startFailed(err error) error { return &exitError{code: 1, err: err} }

// cliFlags are the command line's settings.
type cliFlags struct {
	configPath, logFormat, logLevel string
	// mcpStdio serves MCP over stdin and stdout instead of listening (--mcp-stdio).
	mcpStdio bool
}

// parseFlags reads the command line. done says the process ends now with code (help,
// --version, or a bad flag or argument).
func parseFlags(args []string, stdout, stderr io.Writer) (fl cliFlags, code int, done bool) {
	fs := flag.NewFlagSet("coordinator", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&fl.configPath, "config", os.Getenv("BATON_CONFIG"), "path to the YAML config; none starts the demo stack")
	showVersion := fs.Bool("version", false, "print the version and exit")
	fs.BoolVar(&fl.mcpStdio, "mcp-stdio", false, "serve MCP over stdin and stdout (for MCP clients that launch a command) instead of listening")
	fs.StringVar(&fl.logFormat, "log-format", envOr("BATON_LOG_FORMAT", "text"), "log format: text or json")
	fs.StringVar(&fl.logLevel, "log-level", envOr("BATON_LOG_LEVEL", "info"), "log level: debug, info, warn, error")
	if wantsHelp(args) {
		printUsage(stdout, fs)
		return fl, 0, true
	}
	// After a bad flag the flag package prints the problem, then this hint.
	fs.Usage = func() { fmt.Fprintln(stderr, "Run coordinator --help for usage.") }
	if err := fs.Parse(args); err != nil {
		return fl, 2, true
	}
	switch rest := fs.Args(); {
	case len(rest) == 1 && rest[0] == "help":
		printUsage(stdout, fs)
		return fl, 0, true
	case len(rest) > 0:
		fmt.Fprintf(stderr, "coordinator: unexpected argument %q (see coordinator --help)\n", rest[0])
		return fl, 2, true
	}
	if *showVersion {
		bi, ok := debug.ReadBuildInfo()
		fmt.Fprintf(stdout, "coordinator %s\n", versionString(version, bi, ok))
		return fl, 0, true
	}
	return fl, 0, false
}

// app is the process being wired: each start-up step fills in its part, and registers
// what must be undone at exit. Cleanups run in reverse order of registration, as the
// defers of one function would.
type app struct {
	flags          cliFlags
	stdout, stderr io.Writer
	cleanups       []func()

	log      *slog.Logger
	redactor *redact.Redactor
	cfg      *config.Config
	demo     bool
	tokens   []string
	signIns  *signInWiring
	users    server.TokenVerifier
	// pageSignIn makes the chat page sign its user in (server.oidc.client_id); nil: it does not.
	pageSignIn *web.SignIn

	// ctx ends on SIGINT or SIGTERM; stop releases the signal handler.
	ctx  context.Context
	stop context.CancelFunc
	// peersCtx ends at exit: demo peers and MCP sessions live until after the drain.
	peersCtx context.Context
	tel      *telemetry.Provider
	peerHTTP *http.Client

	model llm.Model
	probe *modelProbe
	// fallbacks are the readiness probes of llm.fallback's models.
	fallbacks   []fallbackProbe
	sessions    *coordinator.SessionElicitor
	tools       coordinator.ToolServer
	registry    *mcpclient.Registry
	onToolError map[string]string
	mcpStarted  time.Time
	agents      []coordinator.Agent
	st          store.Store
	metrics     *metrics.Metrics
	engine      *coordinator.Engine
	sweeper     *server.ThreadSweeper // nil: threads are kept
	// followers counts the follow streams of every surface (server.max_followers_per_*).
	followers *followers.Counter
	// runs is the engine's port for the surfaces.
	runs *coordinator.Runs
	// servicesStopped: stopServices has run (it runs once).
	servicesStopped bool

	// draining turns /readyz to 503 the moment a shutdown signal arrives, before the drain.
	draining atomic.Bool
	srv      *http.Server
	serveErr chan error
}

// onExit registers f to run at exit, before everything registered earlier.
func (a *app) onExit(f func()) { a.cleanups = append(a.cleanups, f) }

func (a *app) cleanup() {
	for i := len(a.cleanups) - 1; i >= 0; i-- {
		a.cleanups[i]()
	}
}

// setupLogging builds the logger. Every log record goes through the redactor; the
// configured secrets are added to it as soon as the configuration is read.
func (a *app) setupLogging() error {
	a.redactor = redact.New()
	// Start-up errors printed directly (an agent's URL, say) are masked too.
	a.stderr = redact.Writer(a.stderr, a.redactor)
	log, err := newLogger(a.stderr, a.flags.logFormat, a.flags.logLevel, a.redactor)
	if err != nil {
		return badInput(err)
	}
	a.log = log
	slog.SetDefault(log)
	return nil
}

// loadConfig reads the configuration (the demo stack's without --config), warns about
// what it ignores, and adds its secrets to the redactor.
func (a *app) loadConfig() error {
	a.demo = a.flags.configPath == ""
	if a.demo {
		a.cfg = config.Default()
		a.cfg.LLM.Provider = "scripted"
		// The demo keeps its threads where a configured Baton does (config.DefaultStore,
		// SQLite under ./data, or BATON_STORE), so that a chat's link still opens it after
		// a restart.
		if err := a.cfg.ApplyEnv(os.Getenv); err != nil {
			return badInput(err)
		}
		if err := a.cfg.ResolveSystemPrompt(); err != nil {
			return badInput(err)
		}
	} else {
		cfg, err := config.Load(a.flags.configPath)
		if err != nil {
			return badInput(err)
		}
		a.cfg = cfg
	}
	a.warnIgnoredEnv()
	if err := modelProblem(a.cfg.LLM); err != nil {
		a.log.Warn("the model cannot be called until this is fixed; /readyz reports it", "problem", err.Error())
	}
	a.redactor.Add(a.cfg.Secrets(os.Getenv)...)
	return nil
}

// warnIgnoredEnv warns about BATON_ variables no key reads, and about token variables no
// configuration names.
func (a *app) warnIgnoredEnv() {
	cfg, log := a.cfg, a.log
	for _, v := range cfg.UnknownEnv(os.Environ()) {
		if v.Suggest != "" {
			log.Warn("unknown environment variable ignored; did you mean "+v.Suggest+"?", "name", v.Name)
		} else {
			log.Warn("unknown environment variable ignored", "name", v.Name)
		}
	}
	for _, name := range cfg.UnreadAuthTokens(os.Environ()) {
		if cfg.Server.AuthTokensEnv == "" {
			log.Warn(name+" is set, but no configuration names it: bearer-token auth is OFF; set server.auth_tokens_env: "+name+" (or BATON_SERVER_AUTH_TOKENS_ENV="+name+") to turn it on",
				"name", name)
		} else {
			log.Warn(name+" is set, but server.auth_tokens_env names "+cfg.Server.AuthTokensEnv+": its tokens are not accepted",
				"name", name, "auth_tokens_env", cfg.Server.AuthTokensEnv)
		}
	}
}

// setupAuth reads the bearer tokens and the sign-in settings. Both fail closed: a named
// token variable that holds nothing, or mode user without a usable secrets key, stops
// the start.
func (a *app) setupAuth() error {
	tokens, err := a.cfg.Server.AuthTokens(os.Getenv)
	if err != nil {
		return badInput(a.inConfigFile(err))
	}
	a.tokens = tokens
	signInEnv, err := a.cfg.SignIn(os.Getenv)
	if err != nil {
		return badInput(a.inConfigFile(err))
	}
	a.signIns = newSignIn(a.cfg, signInEnv)
	a.onExit(a.signIns.hc.CloseIdleConnections)
	a.onExit(a.signIns.private.CloseIdleConnections)
	return nil
}

// inConfigFile prefixes err, which names a key, with the config file that set it, as the
// loader's own errors are ("baton.yaml: server.auth_tokens_env …").
func (a *app) inConfigFile(err error) error {
	if a.cfg.Source == "" {
		return err
	}
	return fmt.Errorf("%s: %w", a.cfg.Source, err)
}

// setupSignals makes a.ctx end on SIGINT or SIGTERM.
func (a *app) setupSignals() error {
	a.ctx, a.stop = signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	a.onExit(a.stop)
	return nil
}

// setupOIDC discovers the OpenID provider that signs users' tokens, when one is configured.
func (a *app) setupOIDC() error {
	if a.cfg.Server.OIDC == nil {
		return nil
	}
	v, err := newOIDC(a.ctx, *a.cfg.Server.OIDC)
	if err != nil {
		return startFailed(fmt.Errorf("server.oidc: %w", err))
	}
	a.onExit(v.Close)
	a.users = a.signIns.recordSubjects(v)
	if id := a.cfg.Server.OIDC.ClientID; id != "" {
		if a.pageSignIn, err = web.NewSignIn(a.cfg.Server.OIDC.Issuer, id); err != nil {
			return startFailed(fmt.Errorf("server.oidc.client_id: %w", err))
		}
	}
	return nil
}

// setupTelemetry starts tracing (off unless an OTLP endpoint is configured) and the HTTP
// client of the peers and the model.
func (a *app) setupTelemetry() error {
	tel, err := telemetry.Setup(a.ctx, telemetry.Config{
		Endpoint:       a.cfg.Telemetry.OTLPEndpoint,
		Protocol:       a.cfg.Telemetry.OTLPProtocol,
		ServiceName:    a.cfg.Telemetry.ServiceName,
		ServiceVersion: version,
		Logger:         a.log,
	})
	if err != nil {
		return badInput(fmt.Errorf("telemetry: %w", err))
	}
	a.tel = tel
	// Its shutdown runs last, after the runs have ended, and exports what is still
	// buffered. The signal context has ended by then: the export gets a context of its own.
	a.onExit(func() {
		sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := tel.Shutdown(sctx); err != nil {
			a.log.Warn("telemetry shutdown", "err", err)
		}
	})
	// One HTTP client for the peers and the model: it sends the W3C trace context of each
	// request's span (A2A, MCP streamable HTTP, the model provider).
	a.peerHTTP = telemetry.Client()
	a.onExit(a.peerHTTP.CloseIdleConnections)
	// Demo peers and MCP sessions live until the process is done, after the graceful
	// drain, so their context is not the signal's.
	peersCtx, stopPeers := context.WithCancel(context.Background())
	a.peersCtx = peersCtx
	a.onExit(stopPeers)
	return nil
}

// startDemo starts the demo agents and MCP server when no configuration was given.
func (a *app) startDemo() error {
	if !a.demo {
		return nil
	}
	if err := startDemoStack(a.peersCtx, a.cfg, a.log); err != nil {
		return startFailed(fmt.Errorf("demo stack: %w", err))
	}
	return nil
}

// setupModel builds the model and, unless its key is missing (reported as it is), the probe
// of its readiness (its models endpoint, with the key), started with the other services.
func (a *app) setupModel() error {
	model, prober, err := newModel(a.cfg, a.peerHTTP)
	if err != nil {
		return badInput(err)
	}
	a.model = model
	if prober != nil && modelProblem(a.cfg.LLM) == nil {
		a.probe = newModelProbe(prober, a.cfg.LLM.Model, a.log)
	}
	a.fallbacks = newFallbackProbes(a.cfg, a.log)
	return nil
}

// startMCP connects the MCP servers without waiting: they connect while the agents' cards
// are read, so both waits overlap. In-session MCP elicitations reach the engine through
// a.sessions.
func (a *app) startMCP() error {
	a.sessions = coordinator.NewSessionElicitor()
	a.onToolError = map[string]string{}
	defer func() { a.mcpStarted = time.Now() }()
	if len(a.cfg.MCPServers) == 0 {
		return nil
	}
	var servers []mcpclient.ServerConfig
	for _, s := range a.cfg.MCPServers {
		servers = append(servers, mcpclient.ServerConfig{Name: s.Name, Command: s.Command, URL: s.URL, Headers: s.Headers, Env: s.Env, Auth: a.signIns.auth(s)})
		a.onToolError[s.Name] = s.OnToolError
	}
	registry, err := mcpclient.New(a.peersCtx, servers, mcpclient.Options{
		Logger: a.log, Elicitor: a.sessions, StartWait: time.Nanosecond, HTTPClient: a.peerHTTP,
		SendingMiddleware: func(server, transport string) mcp.Middleware {
			return telemetry.MCPMiddleware(a.tel.Tracer(), server, transport)
		},
	})
	if err != nil {
		return startFailed(err)
	}
	a.registry = registry
	a.onExit(a.closeSessions)
	a.tools = registry
	return nil
}

// closeSessions closes the MCP sessions: questions still waiting in-session are answered
// "cancel" first, so the registry's sessions can close. Both closes are idempotent.
func (a *app) closeSessions() {
	a.sessions.Close()
	a.registry.Close()
}

// startAgents builds the A2A agents (their cards are read in the background), then waits
// what is left of the MCP servers' start.
func (a *app) startAgents() error {
	// The agents get a transport of their own, with small connection buffers (an open
	// delegation holds its connection for the whole stream).
	agentHTTP := &http.Client{Transport: telemetry.Transport(subagent.NewHTTPTransport())}
	a.onExit(agentHTTP.CloseIdleConnections)
	agents, err := resolveAgents(a.ctx, a.cfg, a.log, agentHTTP)
	if err != nil {
		return startFailed(err)
	}
	a.agents = agents
	for _, ag := range agents {
		if c, ok := ag.Client.(io.Closer); ok {
			a.onExit(func() { _ = c.Close() })
		}
	}
	if a.registry != nil {
		wctx, cancel := context.WithDeadline(a.ctx, a.mcpStarted.Add(mcpStartWait))
		a.registry.WaitStarted(wctx)
		cancel()
	}
	return nil
}

// openStore opens the store and the sign-in token store kept in it.
func (a *app) openStore() error {
	st, err := store.Open(a.ctx, a.cfg.Store)
	if err != nil {
		if !strings.HasPrefix(err.Error(), "store") {
			err = fmt.Errorf("store: %w", err)
		}
		return startFailed(err)
	}
	a.st = st
	a.onExit(func() { _ = st.Close() })
	if a.registry != nil {
		// Sessions close before the store: an OAuth session reads its token from the store
		// to say goodbye (Close is idempotent; the earlier cleanup finds nothing left).
		a.onExit(a.closeSessions)
	}
	if err := a.signIns.open(st); err != nil {
		return startFailed(err)
	}
	return nil
}

// buildEngine builds the engine, with the tool-call metrics labelled with configured
// names only, and the thread sweeper; startServices starts them.
func (a *app) buildEngine() error {
	a.metrics = metrics.New()
	var agentNames, serverNames []string
	for _, ag := range a.agents {
		agentNames = append(agentNames, ag.Name)
	}
	for _, s := range a.cfg.MCPServers {
		serverNames = append(serverNames, s.Name)
	}
	a.metrics.SetToolTargets(agentNames, serverNames)
	engine, err := coordinator.New(a.engineConfig())
	if err != nil {
		return startFailed(err)
	}
	a.engine = engine
	a.followers = followers.New(a.cfg.Server.MaxFollowersPerPrincipalOrDefault())
	agents := map[string]bool{} // by the engine's name for them, as pending cancels name them
	for _, ag := range a.cfg.Agents {
		agents[coordinator.ToolName(ag.Name)] = true
	}
	// Every surface reaches the engine through this one port.
	a.runs = coordinator.NewRuns(engine, coordinator.RunsConfig{
		Followers:          a.followers,
		MaxFollowersPerRun: a.cfg.Server.MaxFollowersPerRun,
		// A downstream cancel of an agent removed from the configuration cannot be
		// confirmed from here (its pending record is dropped at start).
		AgentConfigured: func(name string) bool { return agents[name] },
	})
	// Threads untouched past server.thread_retention go (0: kept).
	if ret := time.Duration(a.cfg.Server.ThreadRetention); ret > 0 {
		a.sweeper = server.NewThreadSweeper(a.st, ret, a.log)
	}
	return nil
}

// startServices starts the background services, in order: the engine (the cancels an
// earlier process left pending go on; its jobs start: heartbeat, takeover, sweeps,
// interrupt expiry), the thread sweeper, the model probe. stopServices stops them.
func (a *app) startServices() error {
	// Registered first: a start that fails from here on stops what had started, before the
	// store closes (cleanups run last first).
	a.onExit(a.stopServices)
	// The services outlive the signal context: the drain that follows a signal needs the
	// engine's heartbeat (the leases of the runs still here) and the probe's readiness.
	ctx := context.WithoutCancel(a.ctx)
	if err := a.engine.Start(ctx); err != nil {
		return startFailed(err)
	}
	if a.sweeper != nil {
		a.sweeper.Start(ctx)
	}
	if a.probe != nil {
		a.probe.Start(ctx)
	}
	for _, fb := range a.fallbacks {
		if fb.probe != nil {
			fb.probe.Start(ctx)
		}
	}
	return nil
}

// stopServices stops the services in reverse order of their start: the model probe (its
// last answer stays /readyz's), the thread sweeper, then the engine, whose runs get
// server.shutdown_grace to end (or are handed off) before they are cancelled. Only its
// first call stops: serveUntilSignal calls it before the HTTP server's shutdown, the exit's
// cleanup otherwise (a start that failed later, an HTTP server that failed).
func (a *app) stopServices() {
	if a.servicesStopped {
		return
	}
	a.servicesStopped = true
	// The signal context has ended: the deadlines are measured from now. The probe and the
	// sweeper cancel the call in flight, so waiting for them is short.
	if a.probe != nil {
		_ = a.probe.Stop(context.Background())
	}
	for _, fb := range a.fallbacks {
		if fb.probe != nil {
			_ = fb.probe.Stop(context.Background())
		}
	}
	if a.sweeper != nil {
		_ = a.sweeper.Stop(context.Background())
	}
	gctx, cancel := context.WithTimeout(context.Background(), time.Duration(a.cfg.Server.ShutdownGrace))
	defer cancel()
	_ = a.engine.Stop(gctx)
}

// engineConfig is the engine's configuration, from the file's and the wiring's.
func (a *app) engineConfig() coordinator.Config {
	cfg := a.cfg
	return coordinator.Config{
		Metrics:      a.metrics,
		Model:        a.engineModel(),
		Spend:        spendMeter(cfg, a.st),
		SystemPrompt: cfg.LLM.SystemPrompt,
		Agents:       a.agents,
		Tools:        a.tools,
		// Agents whose card declares an OAuth flow sign users in (cmd/coordinator/signin.go).
		A2ASignIn: a.signIns.a2a(a.agents),
		// What a tool error of each MCP server does to the run: the engine decides.
		OnToolError: a.onToolError,
		Limits: coordinator.Limits{
			MaxIterations: cfg.Limits.MaxIterations,
			MaxRunTime:    time.Duration(cfg.Limits.MaxRunSeconds) * time.Second,
			ToolTimeout:   time.Duration(cfg.Limits.ToolTimeout),
		},
		CancelHorizon:  time.Duration(cfg.Limits.CancelHorizon),
		Logger:         a.log,
		Tracing:        coordinator.Tracing{Tracer: a.tel.Tracer(), Provider: cfg.LLM.Provider, Model: modelName(cfg)},
		Store:          a.st,
		Sessions:       a.sessions,
		InterruptTTL:   time.Duration(cfg.Interrupts.TTL),
		ExpiryInterval: expiryInterval(time.Duration(cfg.Interrupts.TTL)),
		Heartbeat:      time.Duration(cfg.Replication.Heartbeat),
		Lease:          time.Duration(cfg.Replication.Lease),
		AdvertiseURL:   cfg.Replication.AdvertiseURL,
		EventRetention: time.Duration(cfg.Server.EventRetention),
		History:        historyOptions(cfg),
		Guard:          guardPolicy(cfg),
		Approvals: coordinator.ApprovalPolicy{
			Tools:       cfg.Approvals.Tools,
			Agents:      cfg.Approvals.Agents,
			Destructive: cfg.Approvals.Destructive,
		},
		Loop: failure.LoopConfig{
			SoftThreshold: cfg.Loop.SoftThreshold,
			HardThreshold: cfg.Loop.HardThreshold,
			StallTurns:    cfg.Loop.StallTurns,
		},
		StreamBufferBytes:      int(cfg.Server.StreamBufferBytes),
		MaxEventsPerRun:        cfg.Server.MaxEventsPerRun,
		MaxThreadsPerPrincipal: cfg.Server.MaxThreadsPerPrincipal,
		MaxDepth:               cfg.Server.MaxDepthOrDefault(),
		OnDisconnect:           disconnectPolicy(cfg.Server.OnDisconnect),
		ReconnectGrace:         time.Duration(cfg.Server.ReconnectGrace),
		Handoff:                cfg.ShutdownMode() == config.OnShutdownHandoff,
		// Not shared (SQLite): the runs a previous process left running are this one's.
		TakeOverAtStart: !cfg.SharedStore(),
	}
}

// guardPolicy is the engine's access lists, rate limits and budget from policy.
func guardPolicy(cfg *config.Config) failure.GuardPolicy {
	rateLimits := make([]failure.RateLimit, 0, len(cfg.Policy.RateLimits))
	for _, rl := range cfg.Policy.RateLimits {
		rateLimits = append(rateLimits, failure.RateLimit{Tool: rl.Tool, MaxCalls: rl.MaxCalls, Per: time.Duration(rl.Per)})
	}
	return failure.GuardPolicy{
		Agents:     failure.AccessList(cfg.Policy.Agents),
		Tools:      failure.AccessList(cfg.Policy.Tools),
		RateLimits: rateLimits,
		Budget: failure.Budget{MaxToolCalls: cfg.Policy.Budget.MaxToolCalls, MaxTokens: cfg.Policy.Budget.MaxTokens,
			MaxCostUSD: cfg.Policy.Budget.MaxCostUSD, WarnAt: cfg.Policy.Budget.WarnAt},
	}
}

// spendMeter prices model calls (llm.prices, the fallbacks') and keeps the principals'
// days in the store (policy.principal_budget).
func spendMeter(cfg *config.Config, st store.Store) *spend.Meter {
	ledger, _ := st.(spend.Ledger)
	pb := cfg.Policy.PrincipalBudget
	return spend.NewMeter(spend.MeterConfig{Pricer: spend.NewPricer(cfg.LLM), Ledger: ledger,
		Daily: spend.Limits{Tokens: pb.DailyTokens, CostUSD: pb.DailyCostUSD}, WarnAt: pb.WarnAt})
}

// serverConfig is the HTTP server's configuration.
func (a *app) serverConfig() server.Config {
	cfg := a.cfg
	return server.Config{
		Engine:         a.runs,
		MaxBodyBytes:   cfg.Server.MaxBodyBytes,
		AuthTokens:     a.tokens,
		OIDC:           a.users,
		AllowedOrigins: cfg.Server.AllowedOrigins,
		ListenAddr:     cfg.Listen,
		MaxActiveRuns:  cfg.Server.MaxActiveRuns,
		Page:           web.New(web.Options{Suggestions: func() []string { return suggestions(cfg, a.agents, a.registry) }, SignIn: a.pageSignIn, MCP: a.cfg.MCPServe.Enabled}),
		ReadyChecks:    readyChecks(cfg, a.st, a.agents, a.registry, a.probe, a.fallbacks, a.log),
		Draining:       a.draining.Load,
		Metrics:        a.metrics.Handler(),
		Logger:         a.log,
		WriteTimeout:   time.Duration(cfg.Server.StreamWriteTimeout),
		SignIn:         a.signIns.endpoints(a.registry, a.agents),
		A2A:            newA2AServer(cfg, a.runs, a.signIns, len(a.tokens) > 0 || cfg.Server.OIDC != nil, a.followers, a.log),
	}
}

// engineModel is the configured model, with runs of one delegation (MCP agent tools)
// driven without it when Baton serves MCP.
func (a *app) engineModel() llm.Model {
	if a.mcpServing() {
		if c, ok := a.model.(*llm.Chain); ok {
			// The run calls the chain's links itself (it stays on the one it switched
			// to), so each link is wrapped, not only the chain.
			return directChain{directModel: directModel{next: c}, chain: c}
		}
		return directModel{next: a.model}
	}
	return a.model
}

// startServer binds the listener and serves in the background.
func (a *app) startServer() error {
	cfg := a.serverConfig()
	mcpSrv, err := a.mcpHTTP()
	if err != nil {
		return badInput(fmt.Errorf("mcp_server: %w", err))
	}
	if mcpSrv != nil {
		cfg.MCP = mcpSrv.Handler(mcpserver.HTTPOptions{MaxBodyBytes: mcpBodyLimit(a.cfg)})
		if a.cfg.Server.OIDC != nil {
			cfg.MCPIssuer = a.cfg.Server.OIDC.Issuer
		}
	}
	handler := telemetry.Extract(server.New(cfg))
	ln, err := net.Listen("tcp", a.cfg.Listen)
	if err != nil {
		return startFailed(fmt.Errorf("listen %s: %w", a.cfg.Listen, err))
	}
	a.signIns.bound(ln.Addr())
	// Body reads are bounded per request by the server package (a run's stream outlives
	// any whole-request ReadTimeout); idle keep-alive connections are closed.
	a.srv = &http.Server{Handler: handler, ReadHeaderTimeout: server.ReadHeaderTimeout, IdleTimeout: server.IdleTimeout}
	a.serveErr = make(chan error, 1)
	go func() { a.serveErr <- a.srv.Serve(ln) }()
	url := displayURL(ln.Addr())
	if a.demo {
		fmt.Fprintf(a.stdout, "Baton demo stack (offline demo model) listening on %s\n", url)
		fmt.Fprintf(a.stdout, "Threads are kept in %s (BATON_STORE changes it)\n", storeWhere(a.cfg.Store))
	} else {
		fmt.Fprintf(a.stdout, "Baton coordinator listening on %s\n", url)
	}
	a.log.Info("listening", "url", url, "version", version, "agents", len(a.agents), "demo", a.demo,
		"auth", authState(a.tokens, a.cfg.Server.OIDC), "loopback_only", server.IsLoopbackListen(a.cfg.Listen))
	return nil
}

// serveUntilSignal serves until a shutdown signal, then drains: /readyz turns 503, the
// runs get server.shutdown_grace to end (or are handed off), and the streams of the runs
// that ended carry their terminal events out.
func (a *app) serveUntilSignal() int {
	select {
	case <-a.ctx.Done():
	case err := <-a.serveErr:
		a.log.Error("http server failed", "err", err)
		return 1
	}
	a.draining.Store(true)
	a.stop()
	grace := time.Duration(a.cfg.Server.ShutdownGrace)
	a.log.Info("shutting down", "grace", grace.String(), "active_runs", a.engine.Active())
	a.stopServices()
	hctx, hcancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer hcancel()
	// Shutdown waits for the handlers of the streams still open; what is open at the
	// deadline is cut.
	if err := a.srv.Shutdown(hctx); err != nil {
		a.log.Warn("http shutdown", "err", err)
		_ = a.srv.Close()
	}
	a.log.Info("stopped")
	return 0
}

// storeWhere says where a store keeps its data, for people: a SQLite file's path, or the
// kind of store. A PostgreSQL DSN is never printed (it may hold a password).
func storeWhere(dsn string) string {
	switch {
	case strings.HasPrefix(dsn, "sqlite:"):
		return strings.TrimPrefix(dsn, "sqlite:")
	case strings.HasPrefix(dsn, "memory:"):
		return "memory only (forgotten at exit)"
	default:
		return "PostgreSQL"
	}
}

// startDemoStack starts the demo agents and the demo MCP server on loopback and adds them
// to cfg.
func startDemoStack(ctx context.Context, cfg *config.Config, log *slog.Logger) error {
	for _, kind := range []string{"travel", "research"} {
		url, _, err := demoagent.Start(ctx, "127.0.0.1:0", demoagent.Options{Kind: kind, Logger: log.With("demo_agent", kind)})
		if err != nil {
			return fmt.Errorf("agent %s: %w", kind, err)
		}
		cfg.Agents = append(cfg.Agents, config.Agent{Name: kind, URL: url, Timeout: config.DefaultAgentTimeout, InputRequired: config.InputRequiredAskUser})
	}
	url, err := demomcp.Start(ctx, "127.0.0.1:0")
	if err != nil {
		return fmt.Errorf("mcp server: %w", err)
	}
	cfg.MCPServers = append(cfg.MCPServers, config.MCPServer{Name: "demo", URL: url, OnToolError: config.OnToolErrorRetry})
	if cfg.Approvals.Empty() {
		// The demo asks before its destructive tool (DESIGN §11).
		cfg.Approvals.Tools = []string{"demo__" + demomcp.ToolDelete}
	}
	return nil
}

// newModel builds the configured provider, and its prober for readiness (nil for the
// scripted model). The prober has a plain HTTP client of its own: its periodic GETs are
// not traced. With llm.fallback the model is an llm.Chain of it and its fallbacks, which
// the engine switches along (design/spend.md).
func newModel(cfg *config.Config, hc *http.Client) (llm.Model, modelProber, error) {
	primary, prober, err := newProvider(cfg, cfg.LLM.Provider, cfg.LLM.BaseURL, cfg.LLM.Model, cfg.LLM.APIKey(), hc)
	if err != nil || len(cfg.LLM.Fallback) == 0 {
		return primary, prober, err
	}
	var links []llm.Link
	for i, f := range cfg.LLM.Fallback {
		m, _, err := newProvider(cfg, f.Provider, f.BaseURL, f.Model, f.APIKey(), hc)
		if err != nil {
			return nil, nil, fmt.Errorf("llm.fallback[%d]: %w", i, err)
		}
		window, _ := history.Window(f.Model, f.ContextWindow)
		links = append(links, llm.Link{Provider: f.Provider, Name: fallbackName(f), Model: m, Window: window})
	}
	return llm.NewChain(llm.Link{Provider: cfg.LLM.Provider, Name: modelName(cfg), Model: primary, Window: historyOptions(cfg).Window}, links...), prober, nil
}

// newProvider builds one provider's model and its prober.
func newProvider(cfg *config.Config, provider, baseURL, model, key string, hc *http.Client) (llm.Model, modelProber, error) {
	probeHTTP := &http.Client{}
	switch provider {
	case "scripted":
		return scripted.New(scripted.Config{}), nil, nil
	case "openai":
		c := openai.Config{BaseURL: baseURL, Model: model, APIKey: key, HTTPClient: hc}
		m, err := openai.New(c)
		if err != nil {
			return nil, nil, err
		}
		c.HTTPClient = probeHTTP
		p, err := openai.New(c)
		if err != nil {
			return nil, nil, err
		}
		return withTimeouts(cfg, m), p, nil
	case "anthropic":
		c := anthropic.Config{BaseURL: baseURL, Model: model, APIKey: key, HTTPClient: hc}
		m, err := anthropic.New(c)
		if err != nil {
			return nil, nil, err
		}
		c.HTTPClient = probeHTTP
		p, err := anthropic.New(c)
		if err != nil {
			return nil, nil, err
		}
		return withTimeouts(cfg, m), p, nil
	default:
		return nil, nil, fmt.Errorf("llm.provider %q is not available in this build", provider)
	}
}

// withTimeouts bounds a provider's silence by llm.timeout and llm.idle_timeout.
func withTimeouts(cfg *config.Config, m llm.Model) llm.Model {
	return llm.WithTimeouts(m, llm.Timeouts{FirstByte: time.Duration(cfg.LLM.Timeout), Idle: time.Duration(cfg.LLM.IdleTimeout)})
}

// agentFirstReadWait bounds how long the start waits for the agents' first card reads.
const agentFirstReadWait = time.Second

// resolveAgents builds every agent without waiting for it: each card is read in the
// background (retried with backoff, logged at warn) and on the first call, so an agent
// that is down at start never holds the listener closed; until its card is read it is
// offered to the model with a placeholder description and answers [UNREACHABLE]
// (design/agent-cards.md). The coordinator holds a request open for a late task id
// itself (the run's cancel scope), so the client's own grace is disabled.
func resolveAgents(ctx context.Context, cfg *config.Config, log *slog.Logger, hc *http.Client) ([]coordinator.Agent, error) {
	var out []coordinator.Agent
	var started []*subagent.Agent
	defer func() {
		// Agents that answer at once are described by their cards from the first run;
		// the wait is short and parallel, so the start stays well within 2 s.
		wctx, cancel := context.WithTimeout(ctx, agentFirstReadWait)
		defer cancel()
		for _, ag := range started {
			if err := ag.WaitFirst(wctx); err != nil {
				log.Warn("agent not usable yet; its card is read again in the background", "agent", ag.Name, "error", err)
			}
		}
	}()
	for _, ac := range cfg.Agents {
		ag, err := subagent.New(subagent.AgentConfig{
			Name:           ac.Name,
			URL:            ac.URL,
			CardURL:        ac.CardURL,
			Headers:        ac.Headers,
			AllowedOrigins: ac.AllowedOrigins,
			Timeout:        time.Duration(ac.Timeout),
			CardTTL:        time.Duration(ac.CardTTL),
		}, subagent.Options{Logger: log, IDGrace: -1, HTTPClient: hc})
		if err != nil {
			return nil, fmt.Errorf("agents: %s: %w", ac.Name, err)
		}
		ag.Start(ctx)
		started = append(started, ag)
		out = append(out, coordinator.Agent{
			Name:          coordinator.ToolName(ac.Name),
			Timeout:       time.Duration(ac.Timeout),
			InputRequired: ac.InputRequired,
			Client:        agentClient(ac, ag), // mode exchange: no call without the user's token
		})
	}
	return out, nil
}

func newLogger(w io.Writer, format, level string, red *redact.Redactor) (*slog.Logger, error) {
	var lv slog.Level
	if err := lv.UnmarshalText([]byte(level)); err != nil {
		return nil, fmt.Errorf("--log-level: %w", err)
	}
	opts := &slog.HandlerOptions{Level: lv}
	switch format {
	case "text":
		return slog.New(telemetry.LogHandler(redact.Handler(slog.NewTextHandler(w, opts), red))), nil
	case "json":
		return slog.New(telemetry.LogHandler(redact.Handler(slog.NewJSONHandler(w, opts), red))), nil
	default:
		return nil, errors.New("--log-format must be text or json")
	}
}

// authState says, for the start-up log, whether bearer-token auth is on.
func authState(tokens []string, oidc *config.OIDC) string {
	switch {
	case oidc != nil:
		return fmt.Sprintf("on (%d bearer tokens, OpenID provider %s)", len(tokens), oidc.Issuer)
	case len(tokens) == 0:
		return "off (no server.auth_tokens_env or server.oidc): POSTs need Content-Type application/json and an allowed Origin"
	}
	return fmt.Sprintf("on (%d bearer tokens)", len(tokens))
}

// modelName is the model named on spans and metrics: the configured one, or the
// provider's name for the scripted demo model.
// historyOptions is the history section with the model's context window resolved:
// llm.context_window, else the built-in table of well-known models, else a conservative
// default (package history). keep_recent_turns: 0 means none.
func historyOptions(cfg *config.Config) history.Options {
	window, _ := history.Window(cfg.LLM.Model, cfg.LLM.ContextWindow)
	keep := cfg.History.KeepRecentTurns
	if keep == 0 {
		keep = -1
	}
	return history.Options{Window: window, CompactAt: cfg.History.CompactAt, KeepRecentTurns: keep, MaxToolResultBytes: cfg.History.MaxToolResultBytes}
}

func modelName(cfg *config.Config) string {
	if cfg.LLM.Model != "" {
		return cfg.LLM.Model
	}
	return cfg.LLM.Provider
}

func envOr(key, def string) string {
	if v := os.Getenv(key); v != "" {
		return v
	}
	return def
}

// disconnectPolicy maps server.on_disconnect (validated) to the engine's policy.
func disconnectPolicy(v string) coordinator.DisconnectPolicy {
	if v == config.OnDisconnectDetach {
		return coordinator.DisconnectDetach
	}
	return coordinator.DisconnectCancel
}

// expiryInterval is how often expired interrupts are swept: a quarter of the interrupt TTL,
// between 1 s and 15 s, so that a short TTL is honoured about on time and the default
// (30 min) costs one indexed query every 15 s per replica. A resume that arrives after the
// sweep still gets INTERRUPT_EXPIRED (the swept ids are remembered).
func expiryInterval(ttl time.Duration) time.Duration {
	return min(max(ttl/4, time.Second), 15*time.Second)
}
