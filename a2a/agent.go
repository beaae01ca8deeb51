package a2a

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"time"

	sdk "github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/a2aproject/a2a-go/v2/a2aclient"
	"github.com/a2aproject/a2a-go/v2/a2aclient/agentcard"
	"github.com/a2aproject/a2a-go/v2/a2acompat/a2av0"
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
	// URL is the agent's base URL; the card is read from URL + /.well-known/agent-card.json.
	URL string
	// Timeout bounds one delegation; enforcing it is the caller's job (it owns the context).
	Timeout time.Duration
	// Protocol forces a protocol version: "" (prefer 1.0), "1.0" or "0.3".
	Protocol string
}

// Options tunes the client side for all agents.
type Options struct {
	// HTTPClient carries every request. Default: a client with its own transport and no
	// Timeout (a client Timeout covers the whole body and would cut long streams).
	HTTPClient *http.Client
	// Logger receives diagnostics (also those of the SDK). Default: slog.Default().
	Logger *slog.Logger
	// PollInterval is the GetTask polling period after a stream cannot be resumed.
	// Default 200ms.
	PollInterval time.Duration
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
}

// Defaults of [Options].
const (
	DefaultPollInterval   = 200 * time.Millisecond
	DefaultMaxResubscribe = 3
	DefaultRetryBackoff   = 500 * time.Millisecond
	DefaultIDGrace        = 5 * time.Second

	// maxAttempts bounds the attempts of an initial send, a cancel and consecutive failed
	// polls.
	maxAttempts = 3
	// maxRetryWait caps one wait between attempts; a longer Retry-After is reported as
	// unreachable instead of slept.
	maxRetryWait = 30 * time.Second
	// cardTimeout bounds a card fetch when the caller's context has no earlier deadline.
	cardTimeout = 30 * time.Second
)

func (o Options) withDefaults() Options {
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	if o.PollInterval <= 0 {
		o.PollInterval = DefaultPollInterval
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
	return o
}

// Skill is one skill from an agent card.
type Skill struct {
	Name        string
	Description string
	Examples    []string
}

// Agent is one resolved sub-agent. It is safe for concurrent use.
type Agent struct {
	// Name is the configured name.
	Name string
	// Description comes from the agent card.
	Description string
	// Skills come from the agent card.
	Skills []Skill
	// Streaming reports whether the card allows streaming; Send streams only then.
	Streaming bool
	// ProtocolVersion is the protocol in use: "1.0" or "0.3".
	ProtocolVersion string
	// Config is the configuration the agent was resolved from.
	Config AgentConfig

	card     *sdk.AgentCard
	client   *a2aclient.Client
	http     *http.Client
	ownsHTTP bool
	opts     Options
	logger   *slog.Logger
	endpoint string
}

// Card returns the agent card as resolved (interfaces included). Do not modify it.
func (a *Agent) Card() *sdk.AgentCard { return a.card }

// Endpoint returns the URL of the interface in use.
func (a *Agent) Endpoint() string { return a.endpoint }

// Close releases the client's resources (idle connections of a transport it owns).
func (a *Agent) Close() error {
	err := a.client.Destroy()
	if a.ownsHTTP {
		a.http.CloseIdleConnections()
	}
	return err
}

// Resolve fetches the agent card at cfg.URL + /.well-known/agent-card.json and builds a
// client for it: A2A 1.0 over JSON-RPC when the card offers it, otherwise 0.3 through the
// a2av0 compat transport (cfg.Protocol can force either). Errors wrap [ErrUnreachable]
// when the card cannot be fetched and [ErrCapabilityGap] when the card offers no usable
// interface.
func Resolve(ctx context.Context, cfg AgentConfig, opts Options) (*Agent, error) {
	opts = opts.withDefaults()
	if cfg.URL == "" {
		return nil, fmt.Errorf("a2a: agent %q: no URL configured", cfg.Name)
	}
	switch cfg.Protocol {
	case "", Protocol10, Protocol03:
	default:
		return nil, fmt.Errorf("a2a: agent %q: unknown protocol %q (want \"\", %q or %q)", cfg.Name, cfg.Protocol, Protocol10, Protocol03)
	}
	hc, owns := newHTTPClient(opts.HTTPClient)

	card, err := fetchCard(ctx, hc, cfg.URL)
	if err != nil {
		if owns {
			hc.CloseIdleConnections()
		}
		if ctx.Err() != nil {
			return nil, fmt.Errorf("a2a: agent %q: resolving the card: %w", cfg.Name, ctx.Err())
		}
		return nil, fmt.Errorf("a2a: agent %q: fetching the card: %w: %w", cfg.Name, ErrUnreachable, err)
	}

	iface, version, err := pickInterface(card, cfg.Protocol)
	if err != nil {
		if owns {
			hc.CloseIdleConnections()
		}
		return nil, fmt.Errorf("a2a: agent %q: %w: %w", cfg.Name, ErrCapabilityGap, err)
	}

	// The client gets a card that lists only the chosen interface, so that the factory
	// cannot pick another one and we know which protocol is in use.
	clientCard := *card
	clientCard.SupportedInterfaces = []*sdk.AgentInterface{iface}
	transport := a2aclient.WithJSONRPCTransport(hc)
	if version == Protocol03 {
		transport = a2av0.WithJSONRPCTransport(a2av0.JSONRPCTransportConfig{Client: hc})
	}
	client, err := a2aclient.NewFromCard(ctx, &clientCard, a2aclient.WithDefaultsDisabled(), transport)
	if err != nil {
		if owns {
			hc.CloseIdleConnections()
		}
		return nil, fmt.Errorf("a2a: agent %q: creating the client: %w", cfg.Name, err)
	}

	skills := make([]Skill, 0, len(card.Skills))
	for _, s := range card.Skills {
		name := s.Name
		if name == "" {
			name = s.ID
		}
		skills = append(skills, Skill{Name: name, Description: s.Description, Examples: s.Examples})
	}
	a := &Agent{
		Name:            cfg.Name,
		Description:     card.Description,
		Skills:          skills,
		Streaming:       card.Capabilities.Streaming,
		ProtocolVersion: version,
		Config:          cfg,
		card:            card,
		client:          client,
		http:            hc,
		ownsHTTP:        owns,
		opts:            opts,
		logger:          opts.Logger.With("agent", cfg.Name),
		endpoint:        iface.URL,
	}
	a.logger.Debug("a2a agent resolved", "protocol", version, "endpoint", iface.URL, "streaming", a.Streaming)
	return a, nil
}

// newHTTPClient returns the client all requests of one agent go through: a copy of base
// (so the caller's client is not modified) whose transport records HTTP statuses for the
// retry logic. owns reports whether the underlying transport is private to this client.
func newHTTPClient(base *http.Client) (hc *http.Client, owns bool) {
	if base == nil {
		rt := http.DefaultTransport.(*http.Transport).Clone()
		return &http.Client{Transport: &recordingTransport{base: rt}}, true
	}
	cp := *base
	rt := cp.Transport
	if rt == nil {
		rt = http.DefaultTransport
	}
	cp.Transport = &recordingTransport{base: rt}
	return &cp, false
}

// fetchCard reads the card, tolerating servers that answer differently with and without
// an A2A-Version header: @a2a-js/sdk answers a header-less request with a 0.3 card (or an
// error when it has no 0.3 interface) and the v1.0 card when asked for 1.0.
func fetchCard(ctx context.Context, hc *http.Client, baseURL string) (*sdk.AgentCard, error) {
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, cardTimeout)
		defer cancel()
	}
	resolver := &agentcard.Resolver{Client: hc, CardParser: a2av0.NewAgentCardParser()}
	card, err := resolver.Resolve(ctx, baseURL)
	if err == nil && len(card.SupportedInterfaces) > 0 {
		return card, nil
	}
	if err != nil && !retryCardWithVersion(err) {
		return nil, err
	}
	card2, err2 := resolver.Resolve(ctx, baseURL, agentcard.WithRequestHeader(sdk.SvcParamVersion, string(sdk.Version)))
	if err2 != nil {
		if err != nil {
			return nil, err
		}
		return card, nil // a card without interfaces: pickInterface says so
	}
	return card2, nil
}

// retryCardWithVersion reports whether a failed card fetch got an answer from the server
// (so that asking again with a version header can help), as opposed to a network failure.
func retryCardWithVersion(err error) bool {
	var status *agentcard.ErrStatusNotOK
	if errors.As(err, &status) {
		return status.StatusCode < 500
	}
	return !isNetworkError(err) && !errors.Is(err, io.ErrUnexpectedEOF)
}

// pickInterface chooses the JSON-RPC interface to use: 1.0 first unless forced.
func pickInterface(card *sdk.AgentCard, force string) (*sdk.AgentInterface, string, error) {
	var v1, v0 *sdk.AgentInterface
	for _, iface := range card.SupportedInterfaces {
		if iface == nil || !strings.EqualFold(string(iface.ProtocolBinding), string(sdk.TransportProtocolJSONRPC)) {
			continue
		}
		switch majorVersion(string(iface.ProtocolVersion)) {
		case "1":
			if v1 == nil {
				cp := *iface
				cp.ProtocolBinding = sdk.TransportProtocolJSONRPC
				if cp.ProtocolVersion == "" {
					cp.ProtocolVersion = sdk.Version
				}
				v1 = &cp
			}
		case "0":
			if v0 == nil {
				cp := *iface
				cp.ProtocolBinding = sdk.TransportProtocolJSONRPC
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
	want := "JSON-RPC 1.0 or 0.3"
	if force != "" {
		want = "JSON-RPC " + force
	}
	return nil, "", fmt.Errorf("the card offers no %s interface (offered: [%s])", want, strings.Join(offered, ", "))
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
