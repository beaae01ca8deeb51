package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"sync"
	"time"
)

// ErrUnavailable is wrapped by every error of a store that could not be reached, read or
// written: a lost connection, a database that is down, a full disk, a database file that was
// deleted or replaced, a timeout. It says nothing about the data: the thread or run asked
// for may well exist. The HTTP layer answers it with 503 STORE_UNAVAILABLE and Retry-After,
// never with 404 or 500 (DESIGN §3).
var ErrUnavailable = errors.New("store: unavailable")

// ErrFileMoved is wrapped (with ErrUnavailable) by every write of a SQLite store whose
// database file was deleted or replaced while it was open: SQLite in WAL mode goes on
// writing into the orphaned inode, so that everything acknowledged would be lost at the next
// start (design/journal.md).
var ErrFileMoved = errors.New("the database file was deleted or replaced while open")

// unavailableError marks a backend error as the store being unavailable, keeping the cause.
type unavailableError struct{ cause error }

func (e *unavailableError) Error() string { return "store unavailable: " + e.cause.Error() }
func (e *unavailableError) Unwrap() error { return e.cause }

// Is makes errors.Is(err, ErrUnavailable) true.
func (e *unavailableError) Is(target error) bool { return target == ErrUnavailable }

// unavailable classifies err, an error out of the database driver or of a write
// function: the store's own answers about the data (not found, owned, busy, closed) and
// sql.ErrNoRows pass as they are (so do a fenced write and the thread cap: the store
// answered); anything else means the store could not do its work and
// is marked with ErrUnavailable. Nil stays nil.
func unavailable(err error) error {
	switch {
	case err == nil,
		errors.Is(err, ErrUnavailable),
		errors.Is(err, ErrNotFound),
		errors.Is(err, ErrThreadOwned),
		errors.Is(err, ErrThreadBusy),
		errors.Is(err, ErrFenced),
		errors.Is(err, ErrTooManyThreads),
		errors.Is(err, ErrClosed),
		errors.Is(err, sql.ErrNoRows),
		errors.Is(err, errInvalid):
		return err
	}
	return &unavailableError{cause: err}
}

// errInvalid marks a caller's mistake found before anything was sent to the database
// (a document that is not JSON, a message without id): not an outage.
var errInvalid = errors.New("store: invalid argument")

// IsUnavailable reports whether err means the store could not be reached or written.
func IsUnavailable(err error) bool { return errors.Is(err, ErrUnavailable) }

// writeHealthWindow is how long a failed write keeps the store reported down when no write
// has succeeded since: a store that fails every write (a full disk) is down even when a
// ping, which reads, succeeds.
const writeHealthWindow = 30 * time.Second

// writeHealth remembers the last write that failed because the store was unavailable, and
// the last one that succeeded, for readiness (Ping).
type writeHealth struct {
	mu       sync.Mutex
	failedAt time.Time
	failErr  error
	okAt     time.Time
}

// note records the outcome of a write: err as returned to the caller (already classified).
func (h *writeHealth) note(err error) {
	if err != nil && !errors.Is(err, ErrUnavailable) {
		return // the store answered: a refusal is not an outage
	}
	if err != nil && (errors.Is(err, context.Canceled)) {
		return // the caller gave up; the store said nothing
	}
	now := time.Now()
	h.mu.Lock()
	defer h.mu.Unlock()
	if err != nil {
		h.failedAt, h.failErr = now, err
		return
	}
	h.okAt = now
}

// failing returns the last write failure when no write has succeeded since and it is
// recent (writeHealthWindow); nil otherwise.
func (h *writeHealth) failing() error {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.failErr == nil || !h.okAt.Before(h.failedAt) || time.Since(h.failedAt) > writeHealthWindow {
		return nil
	}
	return fmt.Errorf("%w: the last write failed %s ago: %w", ErrUnavailable,
		time.Since(h.failedAt).Round(time.Millisecond), h.failErr)
}
