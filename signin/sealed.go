package signin

import (
	"encoding/json"
	"errors"
	"fmt"

	"github.com/baton-dev/baton/internal/seal"
)

// ErrSealed is returned when a sealed record cannot be opened: wrong key, tampered, or
// copied to another owner's row. Stores treat it as "no such record" after logging it
// (without the value).
var ErrSealed = errors.New("signin: sealed record cannot be opened")

// Additional-data purposes: a value sealed for one use never opens as another.
const (
	purposeGrant   = "baton-signin-grant"
	purposePending = "baton-signin-pending"
)

// SealGrant encrypts a grant for storage, bound to its principal and server: a sealed grant
// copied to another principal's (or server's) row does not open.
func SealGrant(r *seal.Ring, principal, server string, g *Grant) ([]byte, error) {
	b, err := json.Marshal(g)
	if err != nil {
		return nil, fmt.Errorf("signin: encoding a grant: %w", err)
	}
	return r.Seal(b, seal.AAD(purposeGrant, principal, server)), nil
}

// OpenGrant decrypts a grant sealed by SealGrant for the same principal and server. stale
// reports a value sealed with an older key: the store should seal it again and write it back.
func OpenGrant(r *seal.Ring, principal, server string, sealed []byte) (g *Grant, stale bool, err error) {
	b, stale, err := r.Open(sealed, seal.AAD(purposeGrant, principal, server))
	if err != nil {
		return nil, false, ErrSealed
	}
	g = &Grant{}
	if err := json.Unmarshal(b, g); err != nil {
		return nil, false, ErrSealed
	}
	return g, stale, nil
}

// SealPending encrypts a pending sign-in (its PKCE verifier, client secret and DPoP key are
// secrets), bound to its state, principal and server.
func SealPending(r *seal.Ring, p *Pending) ([]byte, error) {
	b, err := json.Marshal(p)
	if err != nil {
		return nil, fmt.Errorf("signin: encoding a pending sign-in: %w", err)
	}
	return r.Seal(b, seal.AAD(purposePending, p.State, p.Principal, p.Server)), nil
}

// OpenPending decrypts a pending sign-in sealed by SealPending; the store passes the state,
// principal and server of the row it read.
func OpenPending(r *seal.Ring, state, principal, server string, sealed []byte) (*Pending, error) {
	b, _, err := r.Open(sealed, seal.AAD(purposePending, state, principal, server))
	if err != nil {
		return nil, ErrSealed
	}
	p := &Pending{}
	if err := json.Unmarshal(b, p); err != nil {
		return nil, ErrSealed
	}
	return p, nil
}
