package subagent

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"time"

	sdk "github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/a2aproject/a2a-go/v2/a2aclient"
)

// Protocol versions an [Agent] can speak.
const (
	Protocol10 = "1.0"
	Protocol03 = "0.3"
)

// AgentConfig is the configuration of one sub-agent.
type AgentConfig struct {
	// Name is the configured name of the agent (also its tool name).
	Name string
	// URL is the agent's base URL; the card is read from URL + /.well-known/agent-card.json
	// unless CardURL is set. Userinfo in it is sent (basic auth) but never logged.
	URL string
	// CardURL is the full URL of the card, for agents that publish it elsewhere.
	CardURL string
	// Headers are added to every request to a configured origin (that of URL or CardURL),
	// and never to any other origin. Values are secrets: they are never logged.
	Headers map[string]string
	// AllowedOrigins are the origins besides the configured ones that the card may point
	// the client to. An interface on any other origin is ignored.
	AllowedOrigins []string
	// Timeout bounds one delegation; enforcing it is the caller's job (it owns the context).
	Timeout time.Duration
	// CardTTL is how long a card is used before it is read again; default 10m. A protocol
	// error or an unreachable agent also makes the next call read it again.
	CardTTL time.Duration
	// Protocol forces a protocol version: "" (prefer 1.0), "1.0" or "0.3".
	Protocol string
}

// Options tunes the client side for all agents.
type Options struct {
	// HTTPClient carries every request. Default: a client with its own transport
	// ([NewHTTPTransport]) and no Timeout (a client Timeout covers the whole body and
	// would cut long streams).
	HTTPClient *http.Client
	// Logger receives diagnostics (also those of the SDK). Default: slog.Default().
	Logger *slog.Logger
	// PollInterval is the GetTask polling period after a stream cannot be resumed.
	// Default 200ms.
	PollInterval time.Duration
	// MaxPollInterval caps the polling period, which grows from PollInterval while the
	// task does not change. Default 2s.
	MaxPollInterval time.Duration
	// MaxResubscribe is how many SubscribeToTask attempts a dropped stream gets before
	// polling. Default 3; negative means poll at once.
	MaxResubscribe int
	// RetryBackoff is the first delay between attempts of an initial send; it doubles per
	// attempt. Default 500ms. A Retry-After header replaces it.
	RetryBackoff time.Duration
	// IDGrace is how long Send keeps its initial request open after ctx is done, when the
	// task id is not known yet, to learn it (so that the caller can cancel the task). Some
	// servers send nothing, not even headers, before the first event. Default 5s; negative
	// disables it.
	IDGrace time.Duration
	// MaxResultText caps the text a [Result] keeps (per artifact and overall): the text
	// reported through [Observer.Text] is streamed through whole, but a delegation holds
	// at most this much, whatever the agent sends. Default 1 MiB.
	MaxResultText int
	// RetryStart is the first delay between background attempts to read a card that
	// could not be read ([Agent.Start]); it doubles up to RetryMax. Defaults 1s and 30s.
	RetryStart, RetryMax time.Duration
	// StatusInterval is the least time between two status messages of a task at work
	// reported through [Observer.Text]: those that come faster replace each other, the
	// latest winning, and the one held back is reported before any other text of the
	// task and before Send returns. Default 100ms; negative reports every one.
	StatusInterval time.Duration
}

// Defaults of [Options].
const (
	DefaultPollInterval    = 200 * time.Millisecond
	DefaultMaxPollInterval = 2 * time.Second
	DefaultMaxResubscribe  = 3
	DefaultRetryBackoff    = 500 * time.Millisecond
	DefaultIDGrace         = 5 * time.Second
	DefaultStatusInterval  = 100 * time.Millisecond

	// maxAttempts bounds the attempts of an initial send, a cancel and consecutive failed
	// polls.
	maxAttempts = 3
	// maxRetryWait caps one wait between attempts; a longer Retry-After is reported as
	// unreachable instead of slept.
	maxRetryWait = 30 * time.Second
	// cardTimeout bounds a card fetch (both requests when a version header is needed).
	cardTimeout = 10 * time.Second
	// DefaultCardTTL is the default of AgentConfig.CardTTL.
	DefaultCardTTL = 10 * time.Minute
	// DefaultMaxResultText is the default of Options.MaxResultText.
	DefaultMaxResultText = 1 << 20
)

func (o Options) withDefaults() Options {
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	if o.PollInterval <= 0 {
		o.PollInterval = DefaultPollInterval
	}
	if o.MaxPollInterval <= 0 {
		o.MaxPollInterval = DefaultMaxPollInterval
	}
	if o.MaxResubscribe == 0 {
		o.MaxResubscribe = DefaultMaxResubscribe
	}
	if o.RetryBackoff <= 0 {
		o.RetryBackoff = DefaultRetryBackoff
	}
	if o.IDGrace == 0 {
		o.IDGrace = DefaultIDGrace
	}
	if o.MaxResultText <= 0 {
		o.MaxResultText = DefaultMaxResultText
	}
	if o.StatusInterval == 0 {
		o.StatusInterval = DefaultStatusInterval
	}
	if o.RetryStart <= 0 {
		o.RetryStart = time.Second
	}
	if o.RetryMax <= 0 {
		o.RetryMax = 30 * time.Second
	}
	return o
}

// Skill is one skill from an agent card.
type Skill struct {
	Name        string
	Description string
	Examples    []string
}

// Agent is one sub-agent. Its card is read lazily and again when it is stale (CardTTL) or
// after a protocol error, so an agent that is down at start, moves its interface or
// changes its skills is picked up without a restart. It is safe for concurrent use.
type Agent struct {
	// Name is the configured name.
	Name string
	// Description, Skills, Streaming and ProtocolVersion are those of the card as first
	// read by [Resolve] (empty for an agent from [New]); [Agent.Info] has the current ones.
	Description     string
	Skills          []Skill
	Streaming       bool
	ProtocolVersion string
	// Config is the configuration the agent was built from.
	Config AgentConfig

	http *http.Client
	// releaseHTTP closes the idle connections the agent owns (nil: none).
	releaseHTTP func()
	opts        Options
	logger      *slog.Logger
	origins     originSet       // where requests may go
	life        context.Context // ends with Close
	kill        context.CancelFunc
	wg          sync.WaitGroup
	// first is closed when the first background card read has ended (see WaitFirst).
	first     chan struct{}
	firstOnce sync.Once

	mu       sync.Mutex
	cur      *binding      // nil until a card was read
	stale    bool          // read the card again before the next call
	lastErr  error         // why the last card read failed (nil after a success)
	reading  chan struct{} // closed when the card read in progress ends
	lastRead time.Time     // start of the last card read (success or not)
	// rereadGap is the shortest interval between re-reads caused by errors (minReread;
	// tests set it to 0).
	rereadGap time.Duration
}

// binding is what one card read yields: the client for the chosen interface.
type binding struct {
	card     *sdk.AgentCard
	client   *a2aclient.Client
	endpoint string
	info     Info
	readAt   time.Time
}

// Info describes an agent as its current card does.
type Info struct {
	Description     string
	Skills          []Skill
	Streaming       bool
	ProtocolVersion string
	// Binding is the protocol binding in use: "JSONRPC" or "HTTP+JSON".
	Binding string
}

// New validates cfg and returns an agent whose card is not read yet: the first call (or
// [Agent.Start]) reads it. It does no I/O.
func New(cfg AgentConfig, opts Options) (*Agent, error) {
	opts = opts.withDefaults()
	if cfg.URL == "" {
		return nil, fmt.Errorf("a2a: agent %q: no URL configured", cfg.Name)
	}
	switch cfg.Protocol {
	case "", Protocol10, Protocol03:
	default:
		return nil, fmt.Errorf("a2a: agent %q: unknown protocol %q (want \"\", %q or %q)", cfg.Name, cfg.Protocol, Protocol10, Protocol03)
	}
	if cfg.CardTTL <= 0 {
		cfg.CardTTL = DefaultCardTTL
	}
	home, err := newOriginSet(cfg.URL, cfg.CardURL)
	if err != nil {
		return nil, fmt.Errorf("a2a: agent %q: %w", cfg.Name, err)
	}
	allowed, err := newOriginSet(cfg.AllowedOrigins...)
	if err != nil {
		return nil, fmt.Errorf("a2a: agent %q: allowed origins: %w", cfg.Name, err)
	}
	logger := opts.Logger.With("agent", cfg.Name)
	// life bounds the agent's background work (card refresh, cancels) and ends with Close,
	// not with the context of the call that built the agent.
	life, kill := context.WithCancel(context.Background())
	hc, release := newHTTPClient(opts.HTTPClient, cfg.Headers, home, logger)
	a := &Agent{
		Name:        cfg.Name,
		Config:      cfg,
		http:        hc,
		releaseHTTP: release,
		opts:        opts,
		logger:      logger,
		origins:     home.union(allowed),
		life:        life,
		kill:        kill,
		first:       make(chan struct{}),
		rereadGap:   minReread,
	}
	return a, nil
}

// Resolve is [New] followed by a first card read: it fails when the card cannot be read.
// Errors wrap [ErrUnreachable] when the card cannot be fetched and [ErrCapabilityGap] when
// the card offers no usable interface.
func Resolve(ctx context.Context, cfg AgentConfig, opts Options) (*Agent, error) {
	a, err := New(cfg, opts)
	if err != nil {
		return nil, err
	}
	b, err := a.current(ctx)
	if err != nil {
		_ = a.Close()
		return nil, err
	}
	a.Description, a.Skills, a.Streaming, a.ProtocolVersion = b.info.Description, b.info.Skills, b.info.Streaming, b.info.ProtocolVersion
	return a, nil
}

// Start reads the card in the background until it is read, with backoff (Options.RetryStart
// doubling up to RetryMax), logging each failure at warn with its cause. It returns at once;
// the attempts stop with ctx or [Agent.Close].
func (a *Agent) Start(ctx context.Context) {
	a.wg.Add(1)
	go func() {
		defer a.wg.Done()
		ctx, cancel := context.WithCancel(ctx)
		defer cancel()
		stop := context.AfterFunc(a.life, cancel)
		defer stop()
		wait := a.opts.RetryStart
		for first := true; ; first = false {
			_, err := a.current(ctx)
			if first {
				a.firstOnce.Do(func() { close(a.first) })
			}
			if err == nil || ctx.Err() != nil {
				return
			}
			a.logger.Warn("a2a agent card not available; retrying in the background", "retry_in", wait.String(), "error", err)
			if sleep(ctx, wait) != nil {
				return
			}
			wait = min(wait*2, a.opts.RetryMax)
		}
	}()
}

// WaitFirst waits until the first card read of [Agent.Start] has ended, successfully or
// not, or ctx is done, and returns [Agent.Ready]. A caller that wants agents described
// by their cards from its first request gives them a short, bounded wait with this.
func (a *Agent) WaitFirst(ctx context.Context) error {
	select {
	case <-a.first:
	case <-ctx.Done():
	}
	return a.Ready()
}

// Ready reports whether the agent is usable: nil once its card was read and it offers an
// interface this client speaks; otherwise the last cause (no secrets: URLs are redacted
// and headers never appear in it).
func (a *Agent) Ready() error {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.cur != nil {
		return nil
	}
	if a.lastErr != nil {
		return a.lastErr
	}
	return fmt.Errorf("a2a: agent %q: %w: the agent card has not been read yet", a.Name, ErrUnreachable)
}

// Info returns the agent as its current card describes it; ok is false while no card was
// read.
func (a *Agent) Info() (info Info, ok bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.cur == nil {
		return Info{}, false
	}
	return a.cur.info, true
}

// Card returns the current agent card as resolved (interfaces included), or nil. Do not
// modify it.
func (a *Agent) Card() *sdk.AgentCard {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.cur == nil {
		return nil
	}
	return a.cur.card
}

// Endpoint returns the URL of the interface in use, or "".
func (a *Agent) Endpoint() string {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.cur == nil {
		return ""
	}
	return a.cur.endpoint
}

// Close stops background card reads and releases the client's resources (idle connections
// of a transport it owns).
func (a *Agent) Close() error {
	a.mu.Lock() // invalidate adds to wg under mu once it has checked life
	a.kill()
	a.mu.Unlock()
	a.wg.Wait()
	a.mu.Lock()
	cur := a.cur
	a.mu.Unlock()
	var err error
	if cur != nil {
		err = cur.client.Destroy()
	}
	if a.releaseHTTP != nil {
		a.releaseHTTP()
	}
	return err
}

// minReread is the shortest interval between two card reads caused by errors, so that a
// failing agent is not flooded with card requests.
const minReread = time.Second

// invalidate makes the next call read the card again (a protocol error or an unreachable
// interface may mean the agent moved or changed).
// The card is read again in the background as soon as rereadGap allows, so that the next
// call finds it fresh.
func (a *Agent) invalidate() {
	a.mu.Lock()
	if a.stale || a.life.Err() != nil {
		a.mu.Unlock()
		return // a refresh is already due
	}
	a.stale = true
	wait := a.rereadGap - time.Since(a.lastRead)
	a.wg.Add(1)
	a.mu.Unlock()
	go func() {
		defer a.wg.Done()
		if wait > 0 && sleep(a.life, wait) != nil {
			return
		}
		ctx, cancel := context.WithTimeout(a.life, cardTimeout)
		defer cancel()
		_, _ = a.current(ctx)
	}()
}

// current returns the binding to use, reading the card first when none was read yet, or
// when the current one is stale or past its TTL. A failed re-read keeps the old binding.
func (a *Agent) current(ctx context.Context) (*binding, error) {
	for {
		a.mu.Lock()
		cur := a.cur
		due := cur == nil || a.stale || time.Since(cur.readAt) >= a.Config.CardTTL
		if cur != nil && a.stale && time.Since(a.lastRead) < a.rereadGap {
			due = false
		}
		if !due {
			a.mu.Unlock()
			return cur, nil
		}
		if wait := a.reading; wait != nil {
			stale := a.stale
			a.mu.Unlock()
			if cur != nil && !stale {
				return cur, nil // only past its TTL: it still works while someone else refreshes it
			}
			// No binding yet, or one an error just showed broken (the caller is about to
			// retry): wait for the read in flight rather than send to the old endpoint.
			select {
			case <-wait:
				a.mu.Lock()
				got, lastErr := a.cur, a.lastErr
				a.mu.Unlock()
				if got != nil {
					return got, nil // what that read found, or the binding a failed re-read kept
				}
				if lastErr != nil {
					return nil, lastErr // the read we waited for just failed: do not repeat it
				}
				continue
			case <-ctx.Done():
				return nil, fmt.Errorf("a2a: agent %q: resolving the card: %w", a.Name, ctx.Err())
			}
		}
		done := make(chan struct{})
		a.reading = done
		a.lastRead = time.Now()
		a.mu.Unlock()

		b, err := a.read(ctx)

		a.mu.Lock()
		a.reading = nil
		close(done)
		switch {
		case err == nil:
			changed := cur == nil || cur.endpoint != b.endpoint || cur.info.ProtocolVersion != b.info.ProtocolVersion || cur.info.Binding != b.info.Binding
			a.cur, a.stale, a.lastErr = b, false, nil
			a.mu.Unlock()
			if changed {
				a.logger.Info("a2a agent card read", "protocol", b.info.ProtocolVersion, "binding", b.info.Binding, "endpoint", redactURL(b.endpoint), "streaming", b.info.Streaming)
			} else {
				a.logger.Debug("a2a agent card re-read", "endpoint", redactURL(b.endpoint))
			}
			return b, nil
		case cur != nil && ctx.Err() == nil:
			// Keep using what worked; the next call tries again after minReread.
			a.stale = true
			a.mu.Unlock()
			a.logger.Warn("a2a agent card could not be re-read; keeping the previous one", "error", err)
			return cur, nil
		default:
			if ctx.Err() == nil {
				a.lastErr = err
			}
			a.mu.Unlock()
			return nil, err
		}
	}
}

// read fetches the card and builds a client for it: A2A 1.0 over JSON-RPC or HTTP+JSON
// (whichever the card lists first) when the card offers it, otherwise 0.3 over JSON-RPC
// through the a2av0 compat transport (Config.Protocol can force either version). Only
// interfaces on the configured or allowed origins are considered.
func (a *Agent) read(ctx context.Context) (*binding, error) {
	cfg := a.Config
	card, err := fetchCard(ctx, a.http, &a.Config)
	if err != nil {
		if ctx.Err() != nil {
			return nil, fmt.Errorf("a2a: agent %q: resolving the card: %w", cfg.Name, ctx.Err())
		}
		return nil, fmt.Errorf("a2a: agent %q: fetching the card: %w: %w", cfg.Name, ErrUnreachable, err)
	}
	usable, refused := a.origins.filter(card.SupportedInterfaces)
	for _, u := range refused {
		a.logger.Warn("a2a agent card points to an origin that is not allowed; interface ignored (see agents[].allowed_origins)", "interface_url", redactURL(u))
	}
	filtered := *card
	filtered.SupportedInterfaces = usable
	iface, version, err := pickInterface(&filtered, cfg.Protocol)
	if err != nil {
		if len(refused) > 0 {
			// The agent may well be fine, but not through any route the configuration
			// allows: to the model it is unreachable.
			return nil, fmt.Errorf("a2a: agent %q: %w: %w; interfaces on origins that are not allowed were ignored: %s (see agents[].allowed_origins)",
				cfg.Name, ErrUnreachable, err, strings.Join(redactAll(refused), ", "))
		}
		return nil, fmt.Errorf("a2a: agent %q: %w: %w", cfg.Name, ErrCapabilityGap, err)
	}

	// The client gets a card that lists only the chosen interface, so that the factory
	// cannot pick another one and we know which protocol is in use.
	clientCard := *card
	clientCard.SupportedInterfaces = []*sdk.AgentInterface{iface}
	var transport a2aclient.FactoryOption
	switch {
	case iface.ProtocolBinding == sdk.TransportProtocolHTTPJSON && version != Protocol03:
		transport = a2aclient.WithRESTTransport(a.http)
	default:
		// a2a-go's JSON-RPC transport, its streams read with go-sse (sse_transport.go).
		transport = sseTransportOption(a.http, version == Protocol03)
	}
	client, err := a2aclient.NewFromCard(ctx, &clientCard, a2aclient.WithDefaultsDisabled(), transport)
	if err != nil {
		return nil, fmt.Errorf("a2a: agent %q: creating the client: %w: %w", cfg.Name, ErrCapabilityGap, err)
	}
	skills := make([]Skill, 0, len(card.Skills))
	for _, s := range card.Skills {
		name := s.Name
		if name == "" {
			name = s.ID
		}
		skills = append(skills, Skill{Name: name, Description: s.Description, Examples: s.Examples})
	}
	return &binding{
		card:     card,
		client:   client,
		endpoint: iface.URL,
		readAt:   time.Now(),
		info: Info{
			Description:     card.Description,
			Skills:          skills,
			Streaming:       card.Capabilities.Streaming,
			ProtocolVersion: version,
			Binding:         string(iface.ProtocolBinding),
		},
	}, nil
}

// pickInterface chooses the interface to use. Bindings this client speaks: A2A 1.0 over
// JSON-RPC or HTTP+JSON (REST), and 0.3 over JSON-RPC. A 1.0 interface is preferred to a
// 0.3 one (unless force says otherwise); among those of one version, the card's order is
// its order of preference, as the spec says.
func pickInterface(card *sdk.AgentCard, force string) (*sdk.AgentInterface, string, error) {
	var v1, v0 *sdk.AgentInterface
	for _, iface := range card.SupportedInterfaces {
		if iface == nil {
			continue
		}
		binding, ok := knownBinding(iface.ProtocolBinding)
		if !ok {
			continue
		}
		switch majorVersion(string(iface.ProtocolVersion)) {
		case "1":
			if v1 == nil {
				cp := *iface
				cp.ProtocolBinding = binding
				if cp.ProtocolVersion == "" {
					cp.ProtocolVersion = sdk.Version
				}
				v1 = &cp
			}
		case "0":
			if v0 == nil && binding == sdk.TransportProtocolJSONRPC {
				cp := *iface
				cp.ProtocolBinding = binding
				v0 = &cp
			}
		}
	}
	switch {
	case force != Protocol03 && v1 != nil:
		return v1, Protocol10, nil
	case force != Protocol10 && v0 != nil:
		return v0, Protocol03, nil
	}
	offered := make([]string, 0, len(card.SupportedInterfaces))
	for _, iface := range card.SupportedInterfaces {
		if iface != nil {
			offered = append(offered, fmt.Sprintf("%s %s", iface.ProtocolBinding, iface.ProtocolVersion))
		}
	}
	want := "JSON-RPC 1.0, HTTP+JSON 1.0 or JSON-RPC 0.3"
	switch force {
	case Protocol10:
		want = "JSON-RPC or HTTP+JSON 1.0"
	case Protocol03:
		want = "JSON-RPC 0.3"
	}
	return nil, "", fmt.Errorf("the card offers no %s interface (offered: [%s])", want, strings.Join(offered, ", "))
}

// knownBinding returns the canonical name of a protocol binding this client speaks.
func knownBinding(b sdk.TransportProtocol) (sdk.TransportProtocol, bool) {
	for _, known := range []sdk.TransportProtocol{sdk.TransportProtocolJSONRPC, sdk.TransportProtocolHTTPJSON} {
		if strings.EqualFold(string(b), string(known)) {
			return known, true
		}
	}
	return "", false
}

// majorVersion returns the major version of "1.0", "v0.3.0", ""… An empty version counts as
// 1: version-less interfaces only appear in 1.0 cards (the 0.3 parser fills the version in).
func majorVersion(v string) string {
	v = strings.TrimPrefix(strings.TrimSpace(v), "v")
	if v == "" {
		return "1"
	}
	major, _, _ := strings.Cut(v, ".")
	return major
}
