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

	"github.com/baton-dev/baton/a2a"
	"github.com/baton-dev/baton/coordinator"
	"github.com/baton-dev/baton/internal/config"
	"github.com/baton-dev/baton/internal/demoagent"
	"github.com/baton-dev/baton/internal/demomcp"
	"github.com/baton-dev/baton/internal/redact"
	"github.com/baton-dev/baton/llm"
	"github.com/baton-dev/baton/llm/anthropic"
	"github.com/baton-dev/baton/llm/openai"
	"github.com/baton-dev/baton/llm/scripted"
	"github.com/baton-dev/baton/mcpclient"
	"github.com/baton-dev/baton/metrics"
	"github.com/baton-dev/baton/server"
	"github.com/baton-dev/baton/store"
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

func run(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("coordinator", flag.ContinueOnError)
	fs.SetOutput(stderr)
	configPath := fs.String("config", os.Getenv("BATON_CONFIG"), "path to the YAML config; none starts the demo stack")
	showVersion := fs.Bool("version", false, "print the version and exit")
	logFormat := fs.String("log-format", envOr("BATON_LOG_FORMAT", "text"), "log format: text or json")
	logLevel := fs.String("log-level", envOr("BATON_LOG_LEVEL", "info"), "log level: debug, info, warn, error")
	if wantsHelp(args) {
		printUsage(stdout, fs)
		return 0
	}
	// After a bad flag the flag package prints the problem, then this hint.
	fs.Usage = func() { fmt.Fprintln(stderr, "Run coordinator --help for usage.") }
	if err := fs.Parse(args); err != nil {
		return 2
	}
	switch rest := fs.Args(); {
	case len(rest) == 1 && rest[0] == "help":
		printUsage(stdout, fs)
		return 0
	case len(rest) > 0:
		fmt.Fprintf(stderr, "coordinator: unexpected argument %q (see coordinator --help)\n", rest[0])
		return 2
	}
	if *showVersion {
		bi, ok := debug.ReadBuildInfo()
		fmt.Fprintf(stdout, "coordinator %s\n", versionString(version, bi, ok))
		return 0
	}
	// Every log record goes through the redactor; the configured secrets are added to it
	// as soon as the configuration is read.
	redactor := redact.New()
	// Start-up errors printed directly (an agent's URL, say) are masked too.
	stderr = redact.Writer(stderr, redactor)
	log, err := newLogger(stderr, *logFormat, *logLevel, redactor)
	if err != nil {
		fmt.Fprintf(stderr, "coordinator: %v\n", err)
		return 2
	}
	slog.SetDefault(log)

	demo := *configPath == ""
	var cfg *config.Config
	if demo {
		cfg = config.Default()
		cfg.LLM.Provider = "scripted"
		cfg.Store = "memory:"
		if err := cfg.ApplyEnv(os.Getenv); err != nil {
			fmt.Fprintf(stderr, "coordinator: %v\n", err)
			return 2
		}
		if err := cfg.ResolveSystemPrompt(); err != nil {
			fmt.Fprintf(stderr, "coordinator: %v\n", err)
			return 2
		}
	} else {
		cfg, err = config.Load(*configPath)
		if err != nil {
			fmt.Fprintf(stderr, "coordinator: %v\n", err)
			return 2
		}
	}
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
	if err := modelProblem(cfg.LLM); err != nil {
		log.Warn("the model cannot be called until this is fixed; /readyz reports it", "problem", err.Error())
	}

	redactor.Add(cfg.Secrets(os.Getenv)...)

	// Auth fails closed: a named token variable that holds nothing stops the start.
	tokens, err := cfg.Server.AuthTokens(os.Getenv)
	if err != nil {
		fmt.Fprintf(stderr, "coordinator: %v\n", err)
		return 2
	}
	// OAuth fails closed too: mode user without a usable secrets key stops the start.
	signInEnv, err := cfg.SignIn(os.Getenv)
	if err != nil {
		fmt.Fprintf(stderr, "coordinator: %v\n", err)
		return 2
	}
	signIns := newSignIn(cfg, signInEnv)
	defer signIns.hc.CloseIdleConnections()
	defer signIns.private.CloseIdleConnections()

	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()

	var users server.TokenVerifier
	if cfg.Server.OIDC != nil {
		v, err := newOIDC(ctx, *cfg.Server.OIDC)
		if err != nil {
			fmt.Fprintf(stderr, "coordinator: server.oidc: %v\n", err)
			return 1
		}
		defer v.Close()
		users = signIns.recordSubjects(v)
	}

	// Tracing is off unless an OTLP endpoint is configured; its shutdown runs last, after
	// the runs have ended, and exports what is still buffered.
	tel, err := telemetry.Setup(ctx, telemetry.Config{
		Endpoint:       cfg.Telemetry.OTLPEndpoint,
		Protocol:       cfg.Telemetry.OTLPProtocol,
		ServiceName:    cfg.Telemetry.ServiceName,
		ServiceVersion: version,
		Logger:         log,
	})
	if err != nil {
		fmt.Fprintf(stderr, "coordinator: telemetry: %v\n", err)
		return 2
	}
	defer func() {
		sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := tel.Shutdown(sctx); err != nil {
			log.Warn("telemetry shutdown", "err", err)
		}
	}()
	// One HTTP client for the peers and the model: it sends the W3C trace context of each
	// request's span (A2A, MCP streamable HTTP, the model provider).
	peerHTTP := telemetry.Client()
	defer peerHTTP.CloseIdleConnections()
	// Demo peers and MCP sessions live until the process is done, after the graceful drain.
	peersCtx, stopPeers := context.WithCancel(context.Background())
	defer stopPeers()

	if demo {
		if err := startDemoStack(peersCtx, cfg, log); err != nil {
			fmt.Fprintf(stderr, "coordinator: demo stack: %v\n", err)
			return 1
		}
	}

	model, prober, err := newModel(cfg, peerHTTP)
	if err != nil {
		fmt.Fprintf(stderr, "coordinator: %v\n", err)
		return 2
	}
	// The model's readiness is probed in the background (its models endpoint, with the
	// key), unless the key is missing: that is reported as it is.
	var probe *modelProbe
	if prober != nil && modelProblem(cfg.LLM) == nil {
		probe = newModelProbe(prober, cfg.LLM.Model, log)
		probe.Start()
		defer probe.Stop()
	}
	// The MCP servers connect while the agents' cards are read: both waits overlap.
	// In-session MCP elicitations reach the engine through this elicitor.
	sessions := coordinator.NewSessionElicitor()
	var tools coordinator.ToolServer
	var registry *mcpclient.Registry
	onToolError := map[string]string{}
	if len(cfg.MCPServers) > 0 {
		var servers []mcpclient.ServerConfig
		for _, s := range cfg.MCPServers {
			servers = append(servers, mcpclient.ServerConfig{Name: s.Name, Command: s.Command, URL: s.URL, Headers: s.Headers, Env: s.Env, Auth: signIns.auth(s)})
			onToolError[s.Name] = s.OnToolError
		}
		registry, err = mcpclient.New(peersCtx, servers, mcpclient.Options{
			Logger: log, Elicitor: sessions, StartWait: time.Nanosecond, HTTPClient: peerHTTP,
			SendingMiddleware: func(server, transport string) mcp.Middleware {
				return telemetry.MCPMiddleware(tel.Tracer(), server, transport)
			},
		})
		if err != nil {
			fmt.Fprintf(stderr, "coordinator: %v\n", err)
			return 1
		}
		defer registry.Close()
		// Runs first: questions still waiting in-session are answered "cancel", so the
		// registry's sessions can close.
		defer sessions.Close()
		tools = registry
	}
	mcpStarted := time.Now()

	// The agents get a transport of their own, with small connection buffers (an open
	// delegation holds its connection for the whole stream).
	agentHTTP := &http.Client{Transport: telemetry.Transport(a2a.NewHTTPTransport())}
	defer agentHTTP.CloseIdleConnections()
	agents, err := resolveAgents(ctx, cfg, log, agentHTTP)
	if err != nil {
		fmt.Fprintf(stderr, "coordinator: %v\n", err)
		return 1
	}
	for _, a := range agents {
		if c, ok := a.Client.(io.Closer); ok {
			defer c.Close()
		}
	}
	if registry != nil {
		wctx, cancel := context.WithDeadline(ctx, mcpStarted.Add(mcpStartWait))
		registry.WaitStarted(wctx)
		cancel()
	}
	st, err := store.Open(ctx, cfg.Store)
	if err != nil {
		if !strings.HasPrefix(err.Error(), "store") {
			err = fmt.Errorf("store: %w", err)
		}
		fmt.Fprintf(stderr, "coordinator: %v\n", err)
		return 1
	}
	defer st.Close()
	if registry != nil {
		// Sessions close before the store: an OAuth session reads its token from the store
		// to say goodbye (Close is idempotent; the earlier defers find nothing left).
		defer registry.Close()
		defer sessions.Close()
	}
	if err := signIns.open(st); err != nil {
		fmt.Fprintf(stderr, "coordinator: %v\n", err)
		return 1
	}
	metricsReg := metrics.New()
	// The tool-call metrics are labelled with configured names only.
	var agentNames, serverNames []string
	for _, a := range agents {
		agentNames = append(agentNames, a.Name)
	}
	for _, s := range cfg.MCPServers {
		serverNames = append(serverNames, s.Name)
	}
	metricsReg.SetToolTargets(agentNames, serverNames)
	rateLimits := make([]coordinator.RateLimit, 0, len(cfg.Policy.RateLimits))
	for _, rl := range cfg.Policy.RateLimits {
		rateLimits = append(rateLimits, coordinator.RateLimit{Tool: rl.Tool, MaxCalls: rl.MaxCalls, Per: time.Duration(rl.Per)})
	}
	engine, err := coordinator.New(coordinator.Config{
		Metrics:      metricsReg,
		Model:        model,
		SystemPrompt: cfg.LLM.SystemPrompt,
		Agents:       agents,
		Tools:        tools,
		// Agents whose card declares an OAuth flow sign users in (cmd/coordinator/signin.go).
		A2ASignIn: signIns.a2a(agents),
		// What a tool error of each MCP server does to the run: the engine decides.
		OnToolError: onToolError,
		Limits: coordinator.Limits{
			MaxIterations: cfg.Limits.MaxIterations,
			MaxRunTime:    time.Duration(cfg.Limits.MaxRunSeconds) * time.Second,
			ToolTimeout:   time.Duration(cfg.Limits.ToolTimeout),
		},
		CancelHorizon:  time.Duration(cfg.Limits.CancelHorizon),
		Logger:         log,
		Tracing:        coordinator.Tracing{Tracer: tel.Tracer(), Provider: cfg.LLM.Provider, Model: modelName(cfg)},
		Store:          st,
		Sessions:       sessions,
		InterruptTTL:   time.Duration(cfg.Interrupts.TTL),
		ExpiryInterval: expiryInterval(time.Duration(cfg.Interrupts.TTL)),
		Heartbeat:      time.Duration(cfg.Replication.Heartbeat),
		Lease:          time.Duration(cfg.Replication.Lease),
		AdvertiseURL:   cfg.Replication.AdvertiseURL,
		EventRetention: time.Duration(cfg.Server.EventRetention),
		Guard: coordinator.GuardPolicy{
			Agents:     coordinator.AccessList(cfg.Policy.Agents),
			Tools:      coordinator.AccessList(cfg.Policy.Tools),
			RateLimits: rateLimits,
			Budget:     coordinator.Budget(cfg.Policy.Budget),
		},
		Approvals: coordinator.ApprovalPolicy{
			Tools:       cfg.Approvals.Tools,
			Agents:      cfg.Approvals.Agents,
			Destructive: cfg.Approvals.Destructive,
		},
		Loop: coordinator.LoopConfig{
			SoftThreshold: cfg.Loop.SoftThreshold,
			HardThreshold: cfg.Loop.HardThreshold,
			StallTurns:    cfg.Loop.StallTurns,
		},
		StreamBufferBytes: int(cfg.Server.StreamBufferBytes),
		MaxEventsPerRun:   cfg.Server.MaxEventsPerRun,
		OnDisconnect:      disconnectPolicy(cfg.Server.OnDisconnect),
		ReconnectGrace:    time.Duration(cfg.Server.ReconnectGrace),
		Handoff:           cfg.ShutdownMode() == config.OnShutdownHandoff,
		// Not shared (SQLite): the runs a previous process left running are this one's.
		TakeOverAtStart: !cfg.SharedStore(),
	})
	if err != nil {
		fmt.Fprintf(stderr, "coordinator: %v\n", err)
		return 1
	}
	// draining turns /readyz to 503 the moment a shutdown signal arrives, before the drain.
	var draining atomic.Bool
	handler := telemetry.Extract(server.New(server.Config{
		Engine:             engine,
		MaxBodyBytes:       cfg.Server.MaxBodyBytes,
		AuthTokens:         tokens,
		OIDC:               users,
		AllowedOrigins:     cfg.Server.AllowedOrigins,
		ListenAddr:         cfg.Listen,
		MaxActiveRuns:      cfg.Server.MaxActiveRuns,
		Page:               web.New(web.Options{Suggestions: func() []string { return suggestions(cfg, agents, registry) }}),
		ReadyChecks:        readyChecks(cfg, st, agents, registry, probe, log),
		Draining:           draining.Load,
		Metrics:            metricsReg.Handler(),
		Logger:             log,
		WriteTimeout:       time.Duration(cfg.Server.StreamWriteTimeout),
		MaxFollowersPerRun: cfg.Server.MaxFollowersPerRun,
		SignIn:             signIns.endpoints(registry, agents),
		A2A:                newA2AServer(cfg, engine, len(tokens) > 0 || cfg.Server.OIDC != nil, log),
	}))

	ln, err := net.Listen("tcp", cfg.Listen)
	if err != nil {
		fmt.Fprintf(stderr, "coordinator: listen %s: %v\n", cfg.Listen, err)
		return 1
	}
	// Body reads are bounded per request by the server package (a run's stream outlives
	// any whole-request ReadTimeout); idle keep-alive connections are closed.
	signIns.bound(ln.Addr())
	srv := &http.Server{Handler: handler, ReadHeaderTimeout: server.ReadHeaderTimeout, IdleTimeout: server.IdleTimeout}
	serveErr := make(chan error, 1)
	go func() { serveErr <- srv.Serve(ln) }()
	url := displayURL(ln.Addr())
	if demo {
		fmt.Fprintf(stdout, "Baton demo stack (offline demo model) listening on %s\n", url)
	} else {
		fmt.Fprintf(stdout, "Baton coordinator listening on %s\n", url)
	}
	log.Info("listening", "url", url, "version", version, "agents", len(agents), "demo", demo,
		"auth", authState(tokens, cfg.Server.OIDC), "loopback_only", server.IsLoopbackListen(cfg.Listen))

	select {
	case <-ctx.Done():
	case err := <-serveErr:
		log.Error("http server failed", "err", err)
		return 1
	}
	draining.Store(true)
	stop()
	grace := time.Duration(cfg.Server.ShutdownGrace)
	log.Info("shutting down", "grace", grace.String(), "active_runs", engine.Active())
	gctx, cancel := context.WithTimeout(context.Background(), grace)
	defer cancel()
	_ = engine.Shutdown(gctx)
	hctx, hcancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer hcancel()
	// The streams of the runs that ended carry their terminal events out (Shutdown waits
	// for their handlers); what is still open at the deadline is cut.
	if err := srv.Shutdown(hctx); err != nil {
		log.Warn("http shutdown", "err", err)
		_ = srv.Close()
	}
	log.Info("stopped")
	return 0
}

// startDemoStack starts the demo agents and the demo MCP server on loopback and adds them
// to cfg.
func startDemoStack(ctx context.Context, cfg *config.Config, log *slog.Logger) error {
	for _, kind := range []string{"travel", "research"} {
		url, _, err := demoagent.Start(ctx, "127.0.0.1:0", demoagent.Options{Kind: kind, Logger: log.With("demo_agent", kind)})
		if err != nil {
			return fmt.Errorf("agent %s: %w", kind, err)
		}
		cfg.Agents = append(cfg.Agents, config.Agent{Name: kind, URL: url, Timeout: config.Duration(120 * time.Second), InputRequired: "ask_user"})
	}
	url, err := demomcp.Start(ctx, "127.0.0.1:0")
	if err != nil {
		return fmt.Errorf("mcp server: %w", err)
	}
	cfg.MCPServers = append(cfg.MCPServers, config.MCPServer{Name: "demo", URL: url, OnToolError: "retry"})
	if cfg.Approvals.Empty() {
		// The demo asks before its destructive tool (DESIGN §11).
		cfg.Approvals.Tools = []string{"demo__" + demomcp.ToolDelete}
	}
	return nil
}

// newModel builds the configured provider, and its prober for readiness (nil for the
// scripted model). The prober has a plain HTTP client of its own: its periodic GETs are
// not traced.
func newModel(cfg *config.Config, hc *http.Client) (llm.Model, modelProber, error) {
	probeHTTP := &http.Client{}
	switch cfg.LLM.Provider {
	case "scripted":
		return scripted.New(scripted.Config{}), nil, nil
	case "openai":
		c := openai.Config{BaseURL: cfg.LLM.BaseURL, Model: cfg.LLM.Model, APIKey: cfg.LLM.APIKey(), HTTPClient: hc}
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
		c := anthropic.Config{BaseURL: cfg.LLM.BaseURL, Model: cfg.LLM.Model, APIKey: cfg.LLM.APIKey(), HTTPClient: hc}
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
		return nil, nil, fmt.Errorf("llm.provider %q is not available in this build", cfg.LLM.Provider)
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
	var started []*a2a.Agent
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
		ag, err := a2a.New(a2a.AgentConfig{
			Name:           ac.Name,
			URL:            ac.URL,
			CardURL:        ac.CardURL,
			Headers:        ac.Headers,
			AllowedOrigins: ac.AllowedOrigins,
			Timeout:        time.Duration(ac.Timeout),
			CardTTL:        time.Duration(ac.CardTTL),
		}, a2a.Options{Logger: log, IDGrace: -1, HTTPClient: hc})
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
