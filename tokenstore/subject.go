package tokenstore

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/baton-dev/baton/internal/seal"
	"github.com/baton-dev/baton/store"
)

// ErrNoSubject is wrapped by Subject's error when no live subject token is stored for the
// principal (never stored, expired, or sealed with a key that is no longer configured).
var ErrNoSubject = errors.New("tokenstore: no subject token for this user")

const (
	kindSubject = "oidc-subject"
	aadSubject  = "baton-oidc-subject"
)

// PutSubject seals and stores the principal's inbound access token (the subject token of
// RFC 8693 token exchange) until it expires, so that a parked run or one taken over by
// another replica can still exchange it. It replaces the previous one.
func (s *Store) PutSubject(ctx context.Context, principal, token string, expires time.Time) error {
	if principal == "" || token == "" {
		return errors.New("tokenstore: put subject: principal and token are required")
	}
	if err := s.sec.PutSecret(ctx, kindSubject, principal, s.ring.Seal([]byte(token), seal.AAD(aadSubject, principal)), expires); err != nil {
		return fmt.Errorf("tokenstore: put subject: %w", err)
	}
	return nil
}

// Subject returns the principal's stored subject token, or an error wrapping ErrNoSubject.
// The stored value expires with the token, so an expired one reads as absent.
func (s *Store) Subject(ctx context.Context, principal string) (string, error) {
	b, err := s.sec.GetSecret(ctx, kindSubject, principal)
	if errors.Is(err, store.ErrNotFound) {
		return "", ErrNoSubject
	}
	if err != nil {
		return "", fmt.Errorf("tokenstore: subject: %w", err)
	}
	pt, _, err := s.ring.Open(b, seal.AAD(aadSubject, principal))
	if err != nil {
		s.log.Warn("a stored subject token does not open with the configured keys; the user must sign in again")
		return "", ErrNoSubject
	}
	return string(pt), nil
}
