package demoagent

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/a2aproject/a2a-go/v2/a2acompat/a2av0"
	"github.com/a2aproject/a2a-go/v2/a2asrv"
	"github.com/a2aproject/a2a-go/v2/log"

	"github.com/baton-dev/baton/internal/a2aqueue"
)

// Agent kinds accepted in Options.Kind.
const (
	kindTravel   = "travel"
	kindResearch = "research"
)

// Paths served by a demo agent, relative to its base URL.
const (
	PathV1 = "/a2a"    // A2A 1.0 JSON-RPC
	PathV0 = "/a2a/v0" // A2A 0.3 JSON-RPC
)

const (
	defaultChunkDelay = 20 * time.Millisecond
	defaultSlowStep   = 500 * time.Millisecond
	shutdownGrace     = 5 * time.Second
	keepAlive         = 15 * time.Second
)

// ErrBadOptions is returned for an unknown kind or an unusable base URL.
var ErrBadOptions = errors.New("demoagent: bad options")

// Options configures one demo agent.
type Options struct {
	// Kind is "travel" or "research".
	Kind string
	// BaseURL is the public base URL written into the agent card, e.g.
	// http://127.0.0.1:41241. Required by NewHandler; Start defaults it to the listener.
	BaseURL string
	// Logger receives the agent's own logs; the SDK's logs go to it at debug level,
	// because a2a-go reports expected client mistakes at ERROR. Nil discards everything.
	Logger *slog.Logger
	// ChunkDelay paces the research report chunks; zero means 20ms.
	ChunkDelay time.Duration
	// SlowStep is the duration of each of the 20 steps of research's slow mode; zero
	// means 500ms.
	SlowStep time.Duration
	// Recorder, when set, observes the calls received and the states emitted.
	Recorder *Recorder
}

// server is the http.Handler returned by NewHandler.
type server struct {
	mux  *http.ServeMux
	exec *executor
	sdk  *slog.Logger
}

// ServeHTTP implements http.Handler. The SDK's transports log through the request
// context's logger (slog.Default otherwise), so the quiet logger is attached here.
func (s *server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	s.mux.ServeHTTP(w, r.WithContext(log.AttachLogger(r.Context(), s.sdk)))
}

// Close ends every running or parked execution with a canceled status, so open streams
// finish and no goroutine stays behind. It implements io.Closer.
func (s *server) Close() error {
	s.exec.close()
	return nil
}

// NewHandler serves one demo agent: its union agent card (1.0 supportedInterfaces plus the
// 0.3 fields) at /.well-known/agent-card.json, A2A 1.0 JSON-RPC at /a2a and A2A 0.3
// JSON-RPC at /a2a/v0. The returned handler also implements io.Closer; Close ends running
// and parked executions (Start calls it on shutdown).
func NewHandler(opts Options) (http.Handler, error) {
	if opts.Kind != kindTravel && opts.Kind != kindResearch {
		return nil, fmt.Errorf("%w: kind must be %q or %q (got %q)", ErrBadOptions, kindTravel, kindResearch, opts.Kind)
	}
	base, err := normaliseBaseURL(opts.BaseURL)
	if err != nil {
		return nil, err
	}
	if opts.ChunkDelay <= 0 {
		opts.ChunkDelay = defaultChunkDelay
	}
	if opts.SlowStep <= 0 {
		opts.SlowStep = defaultSlowStep
	}
	logger := opts.Logger
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	sdkLogger := slog.New(demoteHandler{logger.Handler()})

	exec := newExecutor(opts.Kind, opts.ChunkDelay, opts.SlowStep, opts.Recorder, logger)
	sdkHandler := a2asrv.NewHandler(exec, a2asrv.WithLogger(sdkLogger), a2asrv.WithEventQueueManager(a2aqueue.New()))
	// The recorder wraps the resumer, so it sees the calls exactly as clients made them.
	var h a2asrv.RequestHandler = &a2asrv.InterceptedHandler{
		Handler:      &resumer{RequestHandler: sdkHandler, exec: exec},
		Interceptors: []a2asrv.CallInterceptor{recordingInterceptor{rec: opts.Recorder}},
		Logger:       sdkLogger,
	}

	card := agentCard(opts.Kind, base)
	mux := http.NewServeMux()
	mux.Handle(a2asrv.WellKnownAgentCardPath, a2asrv.NewAgentCardHandler(a2av0.NewStaticAgentCardProducer(card)))
	mux.Handle(PathV1, a2asrv.NewJSONRPCHandler(h, a2asrv.WithTransportKeepAlive(keepAlive)))
	mux.Handle(PathV0, a2av0.NewJSONRPCHandler(h, a2asrv.WithTransportKeepAlive(keepAlive)))
	return &server{mux: mux, exec: exec, sdk: sdkLogger}, nil
}

// Start listens on addr ("127.0.0.1:0" picks a free port) and serves the agent until ctx
// is done. It returns the base URL (opts.BaseURL, or http://<listener address>) and a
// channel that receives the serving error (nil after a clean shutdown) once everything has
// stopped, and is then closed.
func Start(ctx context.Context, addr string, opts Options) (baseURL string, done <-chan error, err error) {
	var lc net.ListenConfig
	ln, err := lc.Listen(ctx, "tcp", addr)
	if err != nil {
		return "", nil, fmt.Errorf("demoagent: listen %s: %w", addr, err)
	}
	if opts.BaseURL == "" {
		opts.BaseURL = "http://" + ln.Addr().String()
	}
	h, err := NewHandler(opts)
	if err != nil {
		_ = ln.Close()
		return "", nil, err
	}
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second}

	serveErr := make(chan error, 1)
	go func() { serveErr <- srv.Serve(ln) }()

	out := make(chan error, 1)
	go func() {
		defer close(out)
		var err error
		select {
		case err = <-serveErr:
			_ = h.(*server).Close()
		case <-ctx.Done():
			// Ending the executions first lets open streams finish, so Shutdown need not wait.
			_ = h.(*server).Close()
			sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), shutdownGrace)
			err = srv.Shutdown(sctx)
			cancel()
			if err != nil {
				_ = srv.Close()
			}
			if e := <-serveErr; err == nil && !errors.Is(e, http.ErrServerClosed) {
				err = e
			}
		}
		if errors.Is(err, http.ErrServerClosed) {
			err = nil
		}
		out <- err
	}()
	return strings.TrimRight(opts.BaseURL, "/"), out, nil
}

func normaliseBaseURL(raw string) (string, error) {
	u, err := url.Parse(raw)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return "", fmt.Errorf("%w: base URL must be an absolute http(s) URL (got %q)", ErrBadOptions, raw)
	}
	return strings.TrimRight(raw, "/"), nil
}

func agentCard(kind, base string) *a2a.AgentCard {
	card := &a2a.AgentCard{
		Name:    kind,
		Version: "0.1.0",
		SupportedInterfaces: []*a2a.AgentInterface{
			a2a.NewAgentInterface(base+PathV1, a2a.TransportProtocolJSONRPC),
			{URL: base + PathV0, ProtocolBinding: a2a.TransportProtocolJSONRPC, ProtocolVersion: a2av0.Version},
		},
		Capabilities:       a2a.AgentCapabilities{Streaming: true},
		DefaultInputModes:  []string{"text/plain"},
		DefaultOutputModes: []string{"text/plain"},
		Provider:           &a2a.AgentProvider{Org: "Baton demo", URL: base},
	}
	switch kind {
	case kindTravel:
		card.Description = "Demo travel agent: books a trip. Asks for the travel dates when the request does not give them."
		card.Skills = []a2a.AgentSkill{{
			ID:          "book_trip",
			Name:        "Book a trip",
			Description: "Books a trip to a destination for the given dates; asks for the dates if they are missing.",
			Tags:        []string{"travel", "booking"},
			Examples:    []string{"Book a trip to Lisbon", "Book a trip to Lisbon for 12–19 May"},
		}}
	default:
		card.Description = "Demo research agent: researches a technical topic and returns a short report, streamed in chunks."
		card.Skills = []a2a.AgentSkill{{
			ID:          "research",
			Name:        "Research a topic",
			Description: "Researches a technical topic and writes a short report with findings and a conclusion.",
			Tags:        []string{"research", "report"},
			Examples:    []string{"Research the history of the Go scheduler", "Summarise the state of the art in CRDTs"},
		}}
	}
	return card
}

// demoteHandler logs the SDK's records at debug level: a2a-go logs expected client errors
// (unknown task, cancel of a finished task) at ERROR, which is noise for a demo agent.
type demoteHandler struct{ inner slog.Handler }

func (h demoteHandler) Enabled(ctx context.Context, _ slog.Level) bool {
	return h.inner.Enabled(ctx, slog.LevelDebug)
}

func (h demoteHandler) Handle(ctx context.Context, r slog.Record) error {
	r.Level = slog.LevelDebug
	return h.inner.Handle(ctx, r)
}

func (h demoteHandler) WithAttrs(attrs []slog.Attr) slog.Handler {
	return demoteHandler{h.inner.WithAttrs(attrs)}
}

func (h demoteHandler) WithGroup(name string) slog.Handler {
	return demoteHandler{h.inner.WithGroup(name)}
}
