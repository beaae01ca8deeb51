package main

import (
	"context"
	"net"
	"net/http"
	"strings"
	"sync/atomic"
	"time"

	"github.com/modelcontextprotocol/go-sdk/auth"

	"github.com/baton-dev/baton/internal/config"
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
	hc  *http.Client
	ts  *tokenstore.Store // set by open, before the server starts
	// public is the base URL for the callback; set once the listener is bound.
	public atomic.Pointer[string]
}

func newSignIn(cfg *config.Config, env *config.SignInEnv) *signInWiring {
	// Discovery, registration, exchange and refresh: a client of its own, with a timeout
	// (metadata and token requests are short) and the default dialer, so loopback and
	// private authorization servers are reachable (go-sdk refuses private addresses
	// otherwise).
	hc := &http.Client{Transport: http.DefaultTransport.(*http.Transport).Clone(), Timeout: 30 * time.Second}
	return &signInWiring{cfg: cfg, env: env, hc: hc}
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
					Scopes: s.Auth.Scopes, ClientName: "Baton", HTTPClient: w.hc,
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
			ClientSecret: w.env.ClientSecrets[s.Name], Scopes: s.Auth.Scopes, HTTPClient: w.hc,
		})
		return &mcpclient.Auth{Handler: func(string) auth.OAuthHandler { return h }}
	}
	return nil
}

// endpoints configures the server's OAuth endpoints; nil when no server signs users in.
func (w *signInWiring) endpoints(registry *mcpclient.Registry) *server.SignIn {
	if w.ts == nil {
		return nil
	}
	var names []string
	for _, s := range w.cfg.MCPServers {
		if s.Auth.Mode == config.MCPAuthUser {
			names = append(names, s.Name)
		}
	}
	si := &server.SignIn{Store: w.ts, HTTPClient: w.hc, PublicURL: w.publicURL, Servers: names, Ring: w.env.Ring}
	if registry != nil {
		si.Forget = func(principal, name string) { registry.Forget(principal, name) }
	}
	return si
}
