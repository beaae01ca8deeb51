package main

import (
	"context"
	"net"
	"net/http"
	"strings"
	"sync/atomic"
	"time"

	sdk "github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/a2aproject/a2a-go/v2/a2aclient"
	"github.com/modelcontextprotocol/go-sdk/auth"

	"github.com/baton-dev/baton/a2aauth"
	"github.com/baton-dev/baton/coordinator"
	"github.com/baton-dev/baton/internal/config"
	"github.com/baton-dev/baton/internal/egress"
	"github.com/baton-dev/baton/mcpclient"
	"github.com/baton-dev/baton/server"
	"github.com/baton-dev/baton/signin"
	"github.com/baton-dev/baton/store"
	"github.com/baton-dev/baton/tokenstore"
)

// signInWiring connects OAuth for MCP servers (design/signin-engine.md): the handlers the
// registry builds per principal, the sealed token store, and the HTTP endpoints. The
// registry is built before the store is open and the listener bound, so its handlers read
// the token store and the public URL when a call first needs them.
type signInWiring struct {
	cfg *config.Config
	env *config.SignInEnv
	// hc is the client of requests that belong to no configured peer: public addresses only.
	hc *http.Client
	// private is the client of peers configured on a loopback or private address.
	private *http.Client
	ts      *tokenstore.Store // set by open, before the server starts
	// public is the base URL for the callback; set once the listener is bound.
	public atomic.Pointer[string]
	// ex is the token-exchange wiring (exchange.go), made on first use.
	ex *exchangeWiring
}

func newSignIn(cfg *config.Config, env *config.SignInEnv) *signInWiring {
	// Discovery, registration, exchange and refresh: clients of their own, with a timeout
	// (metadata and token requests are short). Their endpoints are named by peers, so every
	// dial and every redirect hop is guarded (internal/egress): never link-local (cloud
	// metadata) addresses, never https to http, and loopback or private ones only for a peer
	// the operator configured there (per peer: one private peer does not open private
	// addresses to every other peer's metadata).
	return &signInWiring{cfg: cfg, env: env,
		hc:      egress.NewClient(egress.Policy{}, egress.ClientOptions{}),
		private: egress.NewClient(egress.Policy{AllowPrivate: true}, egress.ClientOptions{})}
}

// clientFor returns the client of the peer configured at these URLs.
func (w *signInWiring) clientFor(urls ...string) *http.Client {
	if egress.ForPeer(urls...).AllowPrivate {
		return w.private
	}
	return w.hc
}

// serverClient returns the client of a sign-in's server: an MCP server's name or
// a2aauth.ServerName(agent). An unknown name gets the public-only client.
func (w *signInWiring) serverClient(name string) *http.Client {
	for _, s := range w.cfg.MCPServers {
		if s.Name == name {
			return w.clientFor(s.URL)
		}
	}
	return w.agentClient(strings.TrimPrefix(name, a2aauth.ServerName("")))
}

// agentClient returns the client of an agent's sign-in requests.
func (w *signInWiring) agentClient(agent string) *http.Client {
	for _, a := range w.cfg.Agents {
		if a.Name == agent {
			return w.clientFor(a.URL, a.CardURL)
		}
	}
	return w.hc
}

// open makes the sealed token store; nil when no server signs users in.
func (w *signInWiring) open(st store.Store) error {
	if w.env.Ring == nil {
		return nil
	}
	ts, err := tokenstore.New(tokenstore.Config{Secrets: st, Ring: w.env.Ring})
	if err != nil {
		return err
	}
	w.ts = ts
	w.exchange().open()
	return nil
}

// bound records the public URL: server.public_url, else the listener's address.
func (w *signInWiring) bound(addr net.Addr) {
	u := strings.TrimSuffix(w.cfg.Server.PublicURL, "/")
	if u == "" {
		u = displayURL(addr)
	}
	w.public.Store(&u)
}

func (w *signInWiring) publicURL() string {
	if p := w.public.Load(); p != nil {
		return *p
	}
	return ""
}

// auth returns the mcpclient.Auth of a configured server, nil for mode none.
func (w *signInWiring) auth(s config.MCPServer) *mcpclient.Auth {
	switch s.Auth.Mode {
	case config.MCPAuthUser:
		return &mcpclient.Auth{
			PerPrincipal: true,
			Handler: func(principal string) auth.OAuthHandler {
				base := w.publicURL()
				cimd := ""
				if strings.HasPrefix(base, "https://") {
					// A Client ID Metadata Document must be served over https.
					cimd = base + server.ClientMetadataPath
				}
				return signin.NewHandler(signin.HandlerConfig{
					Store: w.ts, Principal: principal, Server: s.Name, ServerURL: s.URL,
					RedirectURL: base + server.CallbackPath, ClientMetadataURL: cimd,
					ClientID: s.Auth.ClientID, ClientSecret: w.env.ClientSecrets[s.Name],
					Scopes: s.Auth.Scopes, ClientName: "Baton", HTTPClient: w.clientFor(s.URL),
				})
			},
			HasGrant: func(ctx context.Context, principal string) bool {
				_, err := w.ts.Grant(ctx, principal, s.Name)
				return err == nil
			},
		}
	case config.MCPAuthService:
		h := signin.NewServiceHandler(signin.ServiceConfig{
			Server: s.Name, ServerURL: s.URL, ClientID: s.Auth.ClientID,
			ClientSecret: w.env.ClientSecrets[s.Name], Scopes: s.Auth.Scopes, HTTPClient: w.clientFor(s.URL),
		})
		return &mcpclient.Auth{Handler: func(string) auth.OAuthHandler { return h }}
	case config.AuthExchange:
		return w.exchange().mcpAuth(s)
	}
	return nil
}

// SignedIn tells the A2A surface (a2aserver.SignIns) when a principal's sign-in to an MCP
// server is done: the callback used up the pending sign-in and stored a grant. A grant
// alone is not enough: an older one may be the very one the server refused. The token
// store is read when asked: it opens after the A2A surface is built.
func (w *signInWiring) SignedIn(ctx context.Context, principal, server string) bool {
	if w == nil || w.ts == nil {
		return false
	}
	if p, err := w.ts.PendingFor(ctx, principal, server); err != nil || p != nil {
		return false
	}
	_, err := w.ts.Grant(ctx, principal, server)
	return err == nil
}

// endpoints configures the server's OAuth endpoints. Without a token store (no secrets
// key, so nobody signs in) the client metadata document is still served and the callback
// and connections endpoints answer that sign-in is not configured.
func (w *signInWiring) endpoints(registry *mcpclient.Registry, agents []coordinator.Agent) *server.SignIn {
	if w.ts == nil {
		return &server.SignIn{PublicURL: w.publicURL}
	}
	var names []string
	for _, s := range w.cfg.MCPServers {
		if s.Auth.Mode == config.MCPAuthUser {
			names = append(names, s.Name)
		}
	}
	si := &server.SignIn{Store: w.ts, HTTPClient: w.hc, ClientFor: w.serverClient, PublicURL: w.publicURL, Servers: names, Ring: w.env.Ring}
	for _, a := range agents {
		si.Agents = append(si.Agents, a.Name)
	}
	if registry != nil {
		si.Forget = func(principal, name string) { registry.Forget(principal, name) }
	}
	return si
}

// a2aSignIn implements coordinator.A2ASignIn: agents whose card declares an OAuth 2
// authorization-code flow sign users in through the same callback and store as MCP servers.
type a2aSignIn struct {
	starter *a2aauth.Starter
	cards   map[string]func() *sdk.AgentCard
	// ex authorises the agents in auth mode exchange; nil when there are none.
	ex *a2aauth.Exchange
}

// a2a returns the engine's A2A sign-in; nil without a token store (no secrets key).
func (w *signInWiring) a2a(agents []coordinator.Agent) coordinator.A2ASignIn {
	if w.ts == nil {
		return nil
	}
	cards := map[string]func() *sdk.AgentCard{}
	for _, a := range agents {
		if c, ok := a.Client.(interface{ Card() *sdk.AgentCard }); ok {
			cards[a.Name] = c.Card
		}
	}
	ex := w.exchange().agentExchange()
	if len(cards) == 0 && ex == nil {
		return nil
	}
	return &a2aSignIn{ex: ex, cards: cards, starter: a2aauth.New(a2aauth.Config{
		Store:       w.ts,
		RedirectURL: func() string { return w.publicURL() + server.CallbackPath },
		ClientMetadataURL: func() string {
			if base := w.publicURL(); strings.HasPrefix(base, "https://") {
				return base + server.ClientMetadataPath
			}
			return ""
		},
		HTTPClient: w.hc,
		ClientFor:  w.agentClient,
	})}
}

func (s *a2aSignIn) flow(agent string) *a2aauth.Flow {
	if card := s.cards[agent]; card != nil {
		return a2aauth.FlowOf(card())
	}
	return nil
}

func (s *a2aSignIn) Start(ctx context.Context, principal, agent, threadID, interruptID string) (string, time.Time, error) {
	if s.ex.Has(agent) {
		// The user's identity comes from their OIDC sign-in to Baton, not from a sign-in
		// to the agent.
		return "", time.Time{}, nil
	}
	fl := s.flow(agent)
	if fl == nil {
		return "", time.Time{}, nil
	}
	return s.starter.Start(ctx, principal, agent, fl, threadID, interruptID)
}

// Authorize attaches the principal's bearer token as a service parameter: the A2A client
// sends it as an HTTP header to the agent's endpoint only.
func (s *a2aSignIn) Authorize(ctx context.Context, principal, agent string) context.Context {
	if s.ex.Has(agent) {
		return s.ex.Authorize(ctx, principal, agent)
	}
	if s.flow(agent) == nil {
		return ctx
	}
	tok, ok := s.starter.Token(ctx, principal, agent)
	if !ok {
		return ctx
	}
	return a2aclient.AttachServiceParams(ctx, a2aclient.ServiceParams{"Authorization": {"Bearer " + tok}})
}
