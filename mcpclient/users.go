package mcpclient

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/auth"

	"github.com/baton-dev/baton/signin"
)

// Auth is how Baton authorises itself to an OAuth-protected streamable HTTP server.
//
// With PerPrincipal (config auth.mode user), every principal gets a session of its own,
// with its own handler: a token belongs to one user, and go-sdk servers bind a session to
// the user of its first token (another user's token gets 403). The sessions are bounded
// (Options.MaxUserSessions, Options.UserSessionIdle). Nobody can list the tools before
// someone has signed in, so until then the catalog offers one tool, "<server>__sign_in",
// whose call signs the caller in; the first principal that connects lists the tools for
// everyone (the catalog is per server, as for other servers), and each principal is still
// asked to sign in at their own first call. Prepare lists them at a run's start when its
// principal has signed in before (after a restart, for instance).
//
// Without PerPrincipal (mode service) the server has one session and Handler("") supplies
// its token (client credentials).
type Auth struct {
	PerPrincipal bool
	// Handler returns the OAuth handler of one principal ("" without PerPrincipal). Its
	// Authorize may return *signin.NeedsSignIn, which ends the call with that error.
	Handler func(principal string) auth.OAuthHandler
	// HasGrant reports whether a principal has signed in to the server; Prepare connects
	// only such principals. Nil: Prepare does nothing.
	HasGrant func(ctx context.Context, principal string) bool
}

// ErrAuthRequired is wrapped by an OAuth handler's error when the user's own credentials for
// the server could not be obtained (a refused token exchange, no identity-provider token of
// the user): the call is not sent, and its result says so (StatusAuthRequired) instead of
// reading as a refusal by the server. Use *AuthRequiredError to carry a reason.
var ErrAuthRequired = errors.New("the user's credentials for the server could not be obtained")

// AuthRequiredError is an ErrAuthRequired with a plain reason for the model and the user
// (what happened, what can be done); it must hold no token material.
type AuthRequiredError struct{ Reason string }

func (e *AuthRequiredError) Error() string { return ErrAuthRequired.Error() + ": " + e.Reason }

// Is makes errors.Is(err, ErrAuthRequired) true.
func (e *AuthRequiredError) Is(target error) bool { return target == ErrAuthRequired }

// SignInTool is the server's own name of the tool offered by a PerPrincipal server whose
// tools are not known yet.
const SignInTool = "sign_in"

// errNoPrincipal: a PerPrincipal server's own session was asked for; only its principals'
// sessions exist.
var errNoPrincipal = errors.New("this MCP server signs each user in: a call needs a principal")

// prepareTimeout bounds Prepare's wait for a principal's first connection.
const prepareTimeout = 10 * time.Second

func (s *server) perUser() bool { return s.users != nil }

// perPrincipalChild reports whether s is one principal's session of a PerPrincipal server.
func (s *server) perPrincipalChild() bool { return s.parent != nil }

// catalogServer is the server whose catalog a session's tool list fills.
func (s *server) catalogServer() *server {
	if s.parent != nil {
		return s.parent
	}
	return s
}

// signInEntry is the placeholder tool of a PerPrincipal server whose tools are unknown.
func signInEntry(s *server) *entry {
	return &entry{
		Tool: Tool{
			Server:   s.cfg.Name,
			ToolName: SignInTool,
			Description: fmt.Sprintf("Sign the user in to %s, whose tools are offered once someone has signed in. "+
				"Call it when the user's request needs %s; the user is asked to sign in if needed, and the result lists its tools.", s.cfg.Name, s.cfg.Name),
			InputSchema: map[string]any{"type": "object", "properties": map[string]any{}},
			Idempotent:  true, ReadOnly: true,
		},
		srv:    s,
		signIn: true,
	}
}

// userSessions are a PerPrincipal server's sessions, one per principal.
type userSessions struct {
	mu    sync.Mutex
	byKey map[string]*userSession
}

type userSession struct {
	srv      *server
	lastUsed time.Time
}

func newUserSessions() *userSessions { return &userSessions{byKey: map[string]*userSession{}} }

// forPrincipal returns the server that carries principal's calls: s itself unless s is a
// PerPrincipal server. It evicts idle sessions, and the least recently used ones beyond
// Options.MaxUserSessions (never one with a call in flight).
func (s *server) forPrincipal(principal string) *server {
	if !s.perUser() {
		return s
	}
	u := s.users
	now := time.Now()
	u.mu.Lock()
	us, ok := u.byKey[principal]
	if !ok {
		child := newServer(s.r, s.cfg, principal, true)
		child.parent = s
		us = &userSession{srv: child}
		u.byKey[principal] = us
	}
	us.lastUsed = now
	evict := u.evictLocked(s.r.opts.MaxUserSessions, s.r.opts.UserSessionIdle, now, us)
	u.mu.Unlock()
	for _, e := range evict {
		s.r.goTracked(func() { _ = e.close() })
	}
	return us.srv
}

// evictLocked removes the sessions idle for longer than idle, then the least recently used
// beyond max, sparing keep and any with calls in flight; it returns them for closing.
func (u *userSessions) evictLocked(max int, idle time.Duration, now time.Time, keep *userSession) []*server {
	var out []*server
	var idleOnes []string
	for k, us := range u.byKey {
		if us != keep && now.Sub(us.lastUsed) > idle && !us.srv.busy() {
			idleOnes = append(idleOnes, k)
		}
	}
	for _, k := range idleOnes {
		out = append(out, u.byKey[k].srv)
		delete(u.byKey, k)
	}
	if len(u.byKey) <= max {
		return out
	}
	keys := make([]string, 0, len(u.byKey))
	for k := range u.byKey {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool { return u.byKey[keys[i]].lastUsed.Before(u.byKey[keys[j]].lastUsed) })
	for _, k := range keys {
		if len(u.byKey) <= max {
			break
		}
		us := u.byKey[k]
		if us == keep || us.srv.busy() {
			continue
		}
		out = append(out, us.srv)
		delete(u.byKey, k)
	}
	return out
}

// remove forgets principal's session and returns it (nil when there is none).
func (u *userSessions) remove(principal string) *server {
	u.mu.Lock()
	defer u.mu.Unlock()
	us, ok := u.byKey[principal]
	if !ok {
		return nil
	}
	delete(u.byKey, principal)
	return us.srv
}

func (u *userSessions) closeAll() {
	u.mu.Lock()
	all := make([]*server, 0, len(u.byKey))
	for k, us := range u.byKey {
		all = append(all, us.srv)
		delete(u.byKey, k)
	}
	u.mu.Unlock()
	for _, s := range all {
		_ = s.close()
	}
}

// busy reports whether a call is in flight on s.
func (s *server) busy() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.inflight) > 0
}

// userStatus is a PerPrincipal server's readiness. Without a principal nothing can be
// checked, and a server nobody has signed in to yet is not down: it reports connected
// unless every principal's session has failed to connect for another reason than sign-in.
func (s *server) userStatus() (connected bool, lastErr string) {
	s.users.mu.Lock()
	kids := make([]*server, 0, len(s.users.byKey))
	for _, us := range s.users.byKey {
		kids = append(kids, us.srv)
	}
	s.users.mu.Unlock()
	var failed error
	for _, k := range kids {
		k.mu.Lock()
		alive, err := k.alive(), k.lastErr
		k.mu.Unlock()
		var ns *signin.NeedsSignIn
		switch {
		case alive:
			return true, ""
		case err == nil || errors.As(err, &ns):
			return true, ""
		default:
			failed = err
		}
	}
	if failed != nil {
		return false, failed.Error()
	}
	return true, ""
}

// Prepare lists the tools of every PerPrincipal server whose tools are not known yet, as
// principal, when principal has signed in to it before (Auth.HasGrant): a run's first
// catalog then has them. It waits at most 10 s (or until ctx ends); failures are only
// logged, and the catalog keeps the sign-in tool.
func (r *Registry) Prepare(ctx context.Context, principal string) {
	for _, s := range r.servers {
		if !s.perUser() || s.cfg.Auth.HasGrant == nil {
			continue
		}
		r.mu.RLock()
		unknown := len(s.entries) == 1 && s.entries[0].signIn
		r.mu.RUnlock()
		if !unknown || !s.cfg.Auth.HasGrant(ctx, principal) {
			continue
		}
		cctx, cancel := context.WithTimeout(ctx, prepareTimeout)
		_, err := s.forPrincipal(principal).session(cctx)
		cancel()
		if err != nil {
			s.log.Debug("mcp tools not listed for a signed-in user", "error", err)
		}
	}
}

// Forget closes principal's session with the server (after the user revoked the grant), so
// that nothing signed in lingers. It reports whether the server is configured.
func (r *Registry) Forget(principal, server string) bool {
	for _, s := range r.servers {
		if s.cfg.Name != server {
			continue
		}
		if s.perUser() {
			if child := s.users.remove(principal); child != nil {
				r.goTracked(func() { _ = child.close() })
			}
		}
		return true
	}
	return false
}

// SignInRequired is the error of Call (or Resume) when the server needs the principal to
// sign in: the call was not run. It holds what is needed to call again once the user has
// signed in (the call is sent anew, exactly once), and unwraps to the *signin.NeedsSignIn.
type SignInRequired struct {
	Server   string          `json:"server"`
	Tool     string          `json:"tool"`     // the catalog name, <server>__<tool>
	ToolName string          `json:"toolName"` // the server's own name for the tool
	Args     json.RawMessage `json:"args"`
	// NeedsSignIn holds the authorization URL; it is not persisted with the call (the
	// pending sign-in is, by the signin.Store).
	NeedsSignIn *signin.NeedsSignIn `json:"-"`
}

// Error names the server.
func (e *SignInRequired) Error() string {
	return fmt.Sprintf("mcp tool %s: the user must sign in to %s", e.Tool, e.Server)
}

// Unwrap returns the *signin.NeedsSignIn.
func (e *SignInRequired) Unwrap() error { return e.NeedsSignIn }

// signInFallback finds the sign-in tool of a PerPrincipal server after its catalog
// replaced it (a call parked on sign-in before another user listed the tools).
func (r *Registry) signInFallback(name string) (*entry, bool) {
	for _, s := range r.servers {
		if s.perUser() && name == toolName(s.cfg.Name, SignInTool) {
			e := signInEntry(s)
			e.Name = name
			return e, true
		}
	}
	return nil, false
}
