package store

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"
	"unicode/utf8"
)

// Secrets keeps small opaque values that must survive a restart and be shared by replicas:
// OAuth grants and pending sign-ins (design/signin-engine.md). The store never sees
// plaintext: callers seal the values before they reach it (package internal/seal) and bind
// them to their owner, so a row copied to another key does not open. Kinds keep the users
// of the table apart (e.g. "grant", "pending"); a key is unique within its kind.
type Secrets interface {
	// PutSecret stores (or replaces) the value of (kind, key). A zero expires means it
	// never expires; an expired value reads as absent and is removed by SweepSecrets.
	PutSecret(ctx context.Context, kind, key string, blob []byte, expires time.Time) error
	// GetSecret returns the value of (kind, key), or an error wrapping ErrNotFound when it
	// is absent or expired.
	GetSecret(ctx context.Context, kind, key string) ([]byte, error)
	// TakeSecret removes and returns the value of (kind, key): single use. Of two
	// replicas taking the same key at once, exactly one gets it; the other, and anyone
	// taking an expired value, gets an error wrapping ErrNotFound.
	TakeSecret(ctx context.Context, kind, key string) ([]byte, error)
	// DeleteSecret removes (kind, key); removing an absent one is no error.
	DeleteSecret(ctx context.Context, kind, key string) error
	// SweepSecrets removes every value that expired at or before now and returns how many.
	SweepSecrets(ctx context.Context, now time.Time) (int64, error)
}

// Limits of a secret, so that a caller's bug cannot fill the store.
const (
	// MaxSecretKeyBytes bounds kind and key (each).
	MaxSecretKeyBytes = 512
	// MaxSecretBytes bounds a value.
	MaxSecretBytes = 64 << 10
)

// ErrBadSecret is wrapped by PutSecret's error for an empty or oversized kind, key or value.
var ErrBadSecret = errors.New("store: bad secret")

func checkSecretKey(kind, key string) error {
	switch {
	case kind == "" || key == "":
		return fmt.Errorf("%w: kind and key are required", ErrBadSecret)
	case len(kind) > MaxSecretKeyBytes || len(key) > MaxSecretKeyBytes:
		return fmt.Errorf("%w: kind or key longer than %d bytes", ErrBadSecret, MaxSecretKeyBytes)
	case !utf8.ValidString(kind+key) || strings.ContainsRune(kind+key, 0):
		// PostgreSQL text holds neither NUL nor invalid UTF-8; refuse them everywhere alike.
		return fmt.Errorf("%w: kind and key must be UTF-8 without NUL", ErrBadSecret)
	}
	return nil
}

func checkSecret(kind, key string, blob []byte) error {
	if err := checkSecretKey(kind, key); err != nil {
		return err
	}
	if len(blob) == 0 || len(blob) > MaxSecretBytes {
		return fmt.Errorf("%w: the value must be 1 to %d bytes", ErrBadSecret, MaxSecretBytes)
	}
	return nil
}

// secretNotFound names the kind but never the key: keys may name a principal.
func secretNotFound(kind string) error {
	return fmt.Errorf("store: %s: %w", kind, ErrNotFound)
}

// expiryNS is the stored form of an expiry: Unix ns, 0 for never.
func expiryNS(t time.Time) int64 {
	if t.IsZero() {
		return 0
	}
	return t.UnixNano()
}

// lapsed reports whether a stored expiry has passed at now.
func lapsed(ns int64, now time.Time) bool {
	return ns != 0 && ns <= now.UnixNano()
}
