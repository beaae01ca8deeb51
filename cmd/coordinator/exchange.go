package main

import (
	"context"
	"errors"
	"fmt"
	"net/http"

	"github.com/modelcontextprotocol/go-sdk/auth"
	"golang.org/x/oauth2"

	"github.com/baton-dev/baton/a2aauth"
	"github.com/baton-dev/baton/coordinator"
	"github.com/baton-dev/baton/internal/config"
	"github.com/baton-dev/baton/mcpclient"
	"github.com/baton-dev/baton/oidcauth"
	"github.com/baton-dev/baton/server"
	"github.com/baton-dev/baton/signin"
	"github.com/baton-dev/baton/subagent"
	"github.com/baton-dev/baton/tokenexchange"
	"github.com/baton-dev/baton/tokenstore"
)

// exchangeWiring connects RFC 8693 token exchange (design/token-exchange.md): inbound OIDC
// tokens are recorded, sealed, as subjects; agents and MCP servers in auth mode exchange
// get the caller's token exchanged per call. Built only when some peer uses mode exchange
// (which config validation ties to server.oidc and server.secrets_key_env).
type exchangeWiring struct {
	w *signInWiring
	x *tokenexchange.Exchanger
	// rec is set by open, once the token store exists.
	rec *tokenexchange.Recorder
}

// Subject implements tokenexchange.Subjects from the token store, read when asked: the
// store opens after the registry is built.
func (w *signInWiring) Subject(ctx context.Context, principal string) (string, error) {
	if w.ts == nil {
		return "", tokenexchange.ErrNoSubject
	}
	tok, err := w.ts.Subject(ctx, principal)
	if errors.Is(err, tokenstore.ErrNoSubject) {
		return "", tokenexchange.ErrNoSubject
	}
	return tok, err
}

// exchange returns the exchange wiring, nil when no peer uses mode exchange.
func (w *signInWiring) exchange() *exchangeWiring {
	if !config.UsesExchange(w.cfg) {
		return nil
	}
	if w.ex == nil {
		w.ex = &exchangeWiring{w: w, x: tokenexchange.New(tokenexchange.Config{Subjects: w})}
	}
	return w.ex
}

// target is the exchange settings of a peer at peerURL: the request goes through the
// egress policy of the token endpoint (private addresses only when it is on one).
func (e *exchangeWiring) target(name, secret string, a config.AgentAuth) *tokenexchange.Target {
	return &tokenexchange.Target{Name: name, TokenURL: a.TokenURL, Audience: a.Audience, Scopes: a.Scopes,
		ClientID: a.ClientID, ClientSecret: secret, HTTPClient: e.w.clientFor(a.TokenURL)}
}

// recordSubjects wraps the OIDC verifier so that each verified token is stored (sealed,
// once per token) as its user's subject for later exchanges. v itself when no peer uses
// mode exchange.
func (w *signInWiring) recordSubjects(v *oidcauth.Verifier) server.TokenVerifier {
	if w.exchange() == nil {
		return v
	}
	return recordingVerifier{v: v, e: w.ex}
}

type recordingVerifier struct {
	v *oidcauth.Verifier
	e *exchangeWiring
}

func (r recordingVerifier) Verify(ctx context.Context, raw string) (*oidcauth.Identity, error) {
	id, err := r.v.Verify(ctx, raw)
	if err == nil && r.e.rec != nil {
		r.e.rec.Record(ctx, id.Principal, raw, id.Expiry)
	}
	return id, err
}

// open starts recording subjects into the token store.
func (e *exchangeWiring) open() {
	if e != nil && e.w.ts != nil {
		e.rec = tokenexchange.NewRecorder(e.w.ts, 0, nil)
	}
}

// agentClient is the engine's client of a configured agent: for mode exchange, one that
// stops a call whose exchange failed before anything is sent (a2aauth.Guarded).
func agentClient(ac config.Agent, ag *subagent.Agent) coordinator.Delegate {
	if ac.Auth.Mode == config.AuthExchange {
		return a2aauth.Guarded{Agent: ag}
	}
	return ag
}

// agentExchange returns the a2aauth.Exchange of the agents in mode exchange, nil if none.
func (e *exchangeWiring) agentExchange() *a2aauth.Exchange {
	if e == nil {
		return nil
	}
	targets := map[string]*tokenexchange.Target{}
	for _, ac := range e.w.cfg.Agents {
		if ac.Auth.Mode == config.AuthExchange {
			targets[coordinator.ToolName(ac.Name)] = e.target("agent "+ac.Name, e.w.env.AgentClientSecrets[ac.Name], ac.Auth)
		}
	}
	if len(targets) == 0 {
		return nil
	}
	return a2aauth.NewExchange(e.x, targets)
}

// mcpAuth is the mcpclient.Auth of an MCP server in mode exchange: a session per
// principal (a token belongs to one user), whose token is the principal's exchanged one.
func (e *exchangeWiring) mcpAuth(s config.MCPServer) *mcpclient.Auth {
	t := e.target("mcp server "+s.Name, e.w.env.ClientSecrets[s.Name], config.AgentAuth{
		TokenURL: s.Auth.TokenURL, Audience: s.Auth.Audience, Scopes: s.Auth.Scopes, ClientID: s.Auth.ClientID})
	return &mcpclient.Auth{
		PerPrincipal: true,
		Handler: func(principal string) auth.OAuthHandler {
			return &exchangeHandler{x: e.x, principal: principal, t: t}
		},
		HasGrant: func(ctx context.Context, principal string) bool {
			_, err := e.w.Subject(ctx, principal)
			return err == nil
		},
	}
}

// exchangeHandler is go-sdk's OAuth handler of one principal's session with an MCP server
// in mode exchange.
type exchangeHandler struct {
	x         *tokenexchange.Exchanger
	principal string
	t         *tokenexchange.Target
}

// TokenSource hands out the principal's exchanged token. A failed exchange ends the call
// (nothing is sent without the user's identity) with an mcpclient.AuthRequiredError: the
// model sees [AUTH_REQUIRED] and the reason.
func (h *exchangeHandler) TokenSource(ctx context.Context) (oauth2.TokenSource, error) {
	return exchangeSource{ctx: ctx, h: h}, nil
}

// Authorize is called when the server refused the token (401 or 403): the cached token is
// dropped so that the next call exchanges again, and this call ends as a refusal.
func (h *exchangeHandler) Authorize(_ context.Context, _ *http.Request, resp *http.Response) error {
	if resp != nil && resp.Body != nil {
		resp.Body.Close()
	}
	h.x.Forget(h.principal)
	return fmt.Errorf("%w: the server refused the user's exchanged token", signin.ErrForbidden)
}

type exchangeSource struct {
	ctx context.Context
	h   *exchangeHandler
}

func (s exchangeSource) Token() (*oauth2.Token, error) {
	tok, err := s.h.x.Token(s.ctx, s.h.principal, s.h.t)
	if err != nil {
		return nil, &mcpclient.AuthRequiredError{Reason: tokenexchange.Reason(err)}
	}
	return &oauth2.Token{AccessToken: tok, TokenType: "Bearer"}, nil
}
