// Package tokenstore keeps OAuth grants and pending sign-ins (signin.Store) in Baton's
// store, sealed: every value is encrypted with the key ring from server.secrets_key_env
// before it reaches the store, and bound by its additional data to what it belongs to (a
// grant to its principal and server, a pending sign-in to its state), so that a row copied
// under another principal or state does not open. The store sees only opaque bytes and
// the lookup keys. See design/signin-engine.md.
package tokenstore

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"time"

	"github.com/baton-dev/baton/internal/seal"
	"github.com/baton-dev/baton/signin"
	"github.com/baton-dev/baton/store"
)

// Kinds of the values in store.Secrets.
const (
	kindGrant      = "oauth-grant"
	kindPending    = "oauth-pending"
	kindPendingFor = "oauth-pending-for"
)

// AAD purposes: each kind of value opens only as itself.
const (
	aadGrant      = "baton-oauth-grant"
	aadPending    = "baton-oauth-pending"
	aadPendingFor = "baton-oauth-pending-for"
)

// Config configures a Store.
type Config struct {
	// Secrets is where the sealed values go (Baton's store).
	Secrets store.Secrets
	// Ring seals and opens them.
	Ring *seal.Ring
	// Logger receives warnings (a value that no key opens); never a value. Default
	// slog.Default().
	Logger *slog.Logger
}

// Store implements signin.Store on store.Secrets. It is safe for concurrent use.
type Store struct {
	sec  store.Secrets
	ring *seal.Ring
	log  *slog.Logger
}

var _ signin.Store = (*Store)(nil)

// ErrConfig is returned by New when Secrets or Ring is missing.
var ErrConfig = errors.New("tokenstore: Secrets and Ring are required")

// New returns a Store.
func New(cfg Config) (*Store, error) {
	if cfg.Secrets == nil || cfg.Ring == nil {
		return nil, ErrConfig
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	return &Store{sec: cfg.Secrets, ring: cfg.Ring, log: cfg.Logger}, nil
}

// pairKey is the lookup key of a (principal, server) pair; the escaping keeps pairs apart
// whatever the names contain.
func pairKey(principal, server string) string {
	return "p=" + url.QueryEscape(principal) + "&s=" + url.QueryEscape(server)
}

// PutPending seals p under its state and records it as the pending sign-in of its
// principal and server, both until p.Expires.
func (s *Store) PutPending(ctx context.Context, p *signin.Pending) error {
	if p == nil || p.State == "" || p.Server == "" {
		return errors.New("tokenstore: put pending: state and server are required")
	}
	if p.Expires.IsZero() {
		return errors.New("tokenstore: put pending: a pending sign-in must expire")
	}
	b, err := json.Marshal(p)
	if err != nil {
		return fmt.Errorf("tokenstore: put pending: %w", err)
	}
	if err := s.sec.PutSecret(ctx, kindPending, p.State, s.ring.Seal(b, seal.AAD(aadPending, p.State)), p.Expires); err != nil {
		return fmt.Errorf("tokenstore: put pending: %w", err)
	}
	ref := s.ring.Seal([]byte(p.State), seal.AAD(aadPendingFor, p.Principal, p.Server))
	if err := s.sec.PutSecret(ctx, kindPendingFor, pairKey(p.Principal, p.Server), ref, p.Expires); err != nil {
		return fmt.Errorf("tokenstore: put pending: %w", err)
	}
	return nil
}

// PendingFor returns the unexpired pending sign-in of (principal, server), or nil.
func (s *Store) PendingFor(ctx context.Context, principal, server string) (*signin.Pending, error) {
	ref, err := s.sec.GetSecret(ctx, kindPendingFor, pairKey(principal, server))
	if errors.Is(err, store.ErrNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("tokenstore: pending sign-in: %w", err)
	}
	state, _, err := s.ring.Open(ref, seal.AAD(aadPendingFor, principal, server))
	if err != nil {
		s.log.Warn("a stored pending sign-in does not open with the configured keys; ignored", "server", server)
		return nil, nil
	}
	b, err := s.sec.GetSecret(ctx, kindPending, string(state))
	if errors.Is(err, store.ErrNotFound) {
		return nil, nil // taken by the callback, or expired
	}
	if err != nil {
		return nil, fmt.Errorf("tokenstore: pending sign-in: %w", err)
	}
	p, err := s.openPending(b, string(state))
	if err != nil || p.Principal != principal || p.Server != server {
		return nil, nil
	}
	return p, nil
}

// TakePending removes and returns the pending sign-in of state when principal started it:
// single use, across replicas (store.Secrets.TakeSecret). Another principal's request gets
// signin.ErrWrongPrincipal and leaves the record in place: the record is read first, and
// its principal never changes for a state, so the check cannot race with the take.
func (s *Store) TakePending(ctx context.Context, state, principal string) (*signin.Pending, error) {
	if state == "" || len(state) > store.MaxSecretKeyBytes {
		return nil, signin.ErrUnknownState
	}
	peek, err := s.sec.GetSecret(ctx, kindPending, state)
	if errors.Is(err, store.ErrNotFound) || errors.Is(err, store.ErrBadSecret) {
		return nil, signin.ErrUnknownState
	}
	if err != nil {
		return nil, fmt.Errorf("tokenstore: take pending sign-in: %w", err)
	}
	if p, err := s.openPending(peek, state); err != nil {
		return nil, signin.ErrUnknownState
	} else if p.Principal != principal {
		return nil, signin.ErrWrongPrincipal
	}
	b, err := s.sec.TakeSecret(ctx, kindPending, state)
	if errors.Is(err, store.ErrNotFound) || errors.Is(err, store.ErrBadSecret) {
		return nil, signin.ErrUnknownState
	}
	if err != nil {
		return nil, fmt.Errorf("tokenstore: take pending sign-in: %w", err)
	}
	p, err := s.openPending(b, state)
	if err != nil {
		return nil, signin.ErrUnknownState
	}
	if err := s.sec.DeleteSecret(ctx, kindPendingFor, pairKey(p.Principal, p.Server)); err != nil {
		s.log.Warn("could not forget a finished sign-in's lookup; it lapses by itself", "server", p.Server, "err", err)
	}
	return p, nil
}

func (s *Store) openPending(b []byte, state string) (*signin.Pending, error) {
	pt, _, err := s.ring.Open(b, seal.AAD(aadPending, state))
	if err != nil {
		return nil, err
	}
	var p signin.Pending
	if err := json.Unmarshal(pt, &p); err != nil {
		return nil, err
	}
	if p.State != state {
		return nil, errors.New("state mismatch")
	}
	return &p, nil
}

// Grant returns the principal's grant for the server, or an error wrapping
// signin.ErrNoGrant. A grant sealed with an older key is sealed again with the current one.
// A grant that no configured key opens (the key was replaced) counts as none: the user
// signs in again.
func (s *Store) Grant(ctx context.Context, principal, server string) (*signin.Grant, error) {
	b, err := s.sec.GetSecret(ctx, kindGrant, pairKey(principal, server))
	if errors.Is(err, store.ErrNotFound) {
		return nil, fmt.Errorf("tokenstore: %s: %w", server, signin.ErrNoGrant)
	}
	if err != nil {
		return nil, fmt.Errorf("tokenstore: grant for %s: %w", server, err)
	}
	aad := seal.AAD(aadGrant, principal, server)
	pt, stale, err := s.ring.Open(b, aad)
	if err != nil {
		s.log.Warn("a stored OAuth grant does not open with the configured keys; the user must sign in again", "server", server)
		return nil, fmt.Errorf("tokenstore: %s: %w", server, signin.ErrNoGrant)
	}
	var g signin.Grant
	if err := json.Unmarshal(pt, &g); err != nil {
		return nil, fmt.Errorf("tokenstore: %s: %w", server, signin.ErrNoGrant)
	}
	if stale {
		if err := s.sec.PutSecret(ctx, kindGrant, pairKey(principal, server), s.ring.Seal(pt, aad), time.Time{}); err != nil {
			s.log.Warn("could not re-seal a grant with the current key", "server", server, "err", err)
		}
	}
	return &g, nil
}

// PutGrant seals and stores the principal's grant for the server.
func (s *Store) PutGrant(ctx context.Context, principal, server string, g *signin.Grant) error {
	if g == nil || server == "" {
		return errors.New("tokenstore: put grant: grant and server are required")
	}
	b, err := json.Marshal(g)
	if err != nil {
		return fmt.Errorf("tokenstore: put grant: %w", err)
	}
	if err := s.sec.PutSecret(ctx, kindGrant, pairKey(principal, server), s.ring.Seal(b, seal.AAD(aadGrant, principal, server)), time.Time{}); err != nil {
		return fmt.Errorf("tokenstore: put grant for %s: %w", server, err)
	}
	return nil
}

// DeleteGrant forgets the principal's grant for the server.
func (s *Store) DeleteGrant(ctx context.Context, principal, server string) error {
	if err := s.sec.DeleteSecret(ctx, kindGrant, pairKey(principal, server)); err != nil {
		return fmt.Errorf("tokenstore: delete grant for %s: %w", server, err)
	}
	return nil
}
