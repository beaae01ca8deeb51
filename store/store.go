// Package store persists what Baton must not lose across a restart, and what replicas
// sharing a database coordinate through: the suspensions of runs parked on interrupts (human
// in the loop, DESIGN §9) and the ids of interrupts already answered; every thread and its
// owner; runs with their replica, lease, stop requests and downstream work; each run's event
// log; and each thread's messages (DESIGN §9a, §9b). See design/event-log.md.
//
// # Backends
//
// Open takes a DSN: "memory:" keeps everything in the process (tests, throwaway demos),
// "sqlite:<path>" uses an embedded SQLite database through modernc.org/sqlite, a pure-Go
// driver, so the binary builds with CGO_ENABLED=0, and "postgres://..." a PostgreSQL
// database through pgx, shared by any number of replicas. The three behave identically and
// share one conformance suite. The two SQL backends share one implementation (sql.go): the
// queries are written once and a small dialect covers the differences (placeholders, the
// database clock, per-thread write locks).
//
// # Layout
//
// A suspension is stored as one JSON document keyed by thread id: the engine owns its history
// and state (opaque bytes here), and every read or write of a suspension is of the whole, so
// splitting it into columns would buy nothing. The only field the store queries is the
// earliest expiry among its interrupts, kept in its own indexed column so that the expiry
// sweep (Expired) is an index range scan rather than a decode of every row.
//
// Resolved interrupt ids live in a separate table that outlives the suspension: a client that
// repeats a resume after the run has moved on must be recognised, so that an answer is never
// sent to a sub-agent twice. They are kept per thread and bounded (MaxResolvedPerThread, the
// most recently marked win).
//
// # Schema migrations
//
// The SQLite schema is created and migrated by the program at Open: a schema_version table
// holds the number of migrations applied, and the missing ones run in order inside a single
// immediate transaction, so two processes opening the same file at once cannot both migrate.
// A database written by a newer program (a higher version than this program knows) is refused
// rather than guessed at.
package store

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"
)

// ErrNotFound is returned by LoadSuspension when the thread has no suspension.
var ErrNotFound = errors.New("store: not found")

// ErrClosed is returned by every method of a Store after Close.
var ErrClosed = errors.New("store: closed")

// ErrBadDSN is wrapped by Open's error for a DSN it does not understand.
var ErrBadDSN = errors.New("store: bad DSN")

// ErrThreadOwned is returned by ClaimThread when the thread belongs to another principal.
var ErrThreadOwned = errors.New("store: thread belongs to another principal")

// ErrFenced is wrapped by every write that belongs to a run (its events, work document,
// suspension, end) when the run's epoch in the store is not the writer's: another replica
// took the run over (or the run id was begun again) since the writer became its owner. The
// write changed nothing; the writer must stop the run at once and never retry it.
var ErrFenced = errors.New("store: the run has a newer owner (fenced)")

// ErrThreadBusy is returned by BeginRun when the thread already has a run whose lease holds,
// on this replica or another.
var ErrThreadBusy = errors.New("store: thread has an active run")

// MaxResolvedPerThread bounds the resolved interrupt ids kept per thread: a duplicate resume
// comes within minutes of the original, so the most recent ids are the ones that matter.
const MaxResolvedPerThread = 256

// Interrupt is one open question to the user, persisted.
type Interrupt struct {
	ID         string `json:"id"`
	ToolCallID string `json:"toolCallId,omitempty"`
	// Kind is one of a2a_input, a2a_auth, mcp_form, mcp_url, mcp_session, mcp_auth, ask_user, continue
	// (the constants live in package hitl).
	Kind           string         `json:"kind"`
	Reason         string         `json:"reason"`
	Message        string         `json:"message,omitempty"`
	ResponseSchema map[string]any `json:"responseSchema,omitempty"`
	// ExpiresAt is when the interrupt lapses. The zero time means it never does.
	ExpiresAt     time.Time      `json:"expiresAt"`
	SubagentRunID string         `json:"subagentRunId,omitempty"`
	Metadata      map[string]any `json:"metadata,omitempty"`
	// Handle is the protocol handle (task ids, MRTR request state...), owned by the engine.
	Handle json.RawMessage `json:"handle,omitempty"`
}

// Suspension is a run parked on interrupts: everything needed to resume it, also after a
// restart.
type Suspension struct {
	ThreadID string `json:"threadId"`
	RunID    string `json:"runId"`
	Owner    string `json:"owner"`
	// History is the engine's LLM history (opaque here).
	History json.RawMessage `json:"history"`
	// State is the engine's run state: failure counters, lessons (opaque here).
	State      json.RawMessage `json:"state,omitempty"`
	Interrupts []Interrupt     `json:"interrupts"`
	// Resolved lists the interrupt ids already answered (idempotency).
	Resolved []string `json:"resolved,omitempty"`
	// Epoch, when not zero, fences SaveSuspension: the suspension is saved only while run
	// RunID of the thread (WriterRunID when set) has this epoch (ErrFenced otherwise). Zero
	// saves unconditionally (a suspension that no running run writes).
	Epoch int64 `json:"-"`
	// WriterRunID, when set, is the run that writes the suspension when that is not the
	// run that suspended (a resumed run recording its approvals in the suspension it
	// answers): Epoch is that run's. Not stored.
	WriterRunID string `json:"-"`
	// CreatedAt is set by SaveSuspension when zero; UpdatedAt on every save.
	CreatedAt time.Time `json:"createdAt"`
	UpdatedAt time.Time `json:"updatedAt"`
}

// Store persists what Baton must not lose. Implementations are safe for concurrent use.
type Store interface {
	// SaveSuspension inserts or replaces the suspension of s.ThreadID. It sets s.CreatedAt
	// (when zero) and s.UpdatedAt to the current time.
	SaveSuspension(ctx context.Context, s *Suspension) error
	// LoadSuspension returns the suspension of a thread, or an error wrapping ErrNotFound.
	LoadSuspension(ctx context.Context, threadID string) (*Suspension, error)
	// DeleteSuspension removes the suspension of a thread; deleting an absent one is no error.
	DeleteSuspension(ctx context.Context, threadID string) error
	// MarkResolved records interrupt ids as answered. They survive the suspension's deletion,
	// so that a duplicate resume is recognised; the last MaxResolvedPerThread per thread are
	// kept.
	MarkResolved(ctx context.Context, threadID string, ids []string) error
	// CloseSuspension settles a resume in one transaction: it marks ids resolved (as
	// MarkResolved) and deletes the thread's suspension, but, when epoch is not zero, only
	// while run runID of the thread has that epoch. Otherwise it fails with ErrFenced and
	// changes nothing: the run's newer owner resumes from the suspension. Zero settles
	// unconditionally.
	CloseSuspension(ctx context.Context, threadID, runID string, epoch int64, ids []string) error
	// IsResolved reports whether MarkResolved recorded the interrupt id for the thread.
	IsResolved(ctx context.Context, threadID, interruptID string) (bool, error)
	// Expired returns the suspensions with at least one interrupt whose ExpiresAt <= now,
	// earliest expiry first.
	Expired(ctx context.Context, now time.Time) ([]*Suspension, error)
	// ClaimExpired removes and returns at most limit suspensions that Expired would return,
	// except those of a thread with a running run (whose lease holds): the run may be
	// resuming it. Of replicas claiming at once, each suspension goes to exactly one, so that
	// its parked work is cancelled once (DESIGN §9b).
	ClaimExpired(ctx context.Context, now time.Time, limit int) ([]*Suspension, error)

	Threads
	Runs
	EventLog
	Messages
	Secrets
	Cancels
	Journal
	Signaler
	RunStarter

	// Tasks returns the A2A tasks Baton serves, kept with the runs whose event logs hold
	// their answers.
	Tasks() Tasks

	// Ping reports whether the store is reachable (readiness).
	Ping(ctx context.Context) error
	// Close releases the store; later calls fail with ErrClosed.
	Close() error
}

// DSN forms accepted by Open.
const (
	dsnMemory = "memory:"
	dsnSQLite = "sqlite:"
)

// IsPostgresDSN reports whether dsn names a PostgreSQL store ("postgres://" or
// "postgresql://").
func IsPostgresDSN(dsn string) bool {
	return strings.HasPrefix(dsn, "postgres://") || strings.HasPrefix(dsn, "postgresql://")
}

// Open opens "memory:", "sqlite:<path>" or "postgres://...". For SQLite, the parent
// directories of path are created and the database runs in WAL mode with a busy timeout. For
// SQL backends the schema is created or migrated before Open returns.
func Open(ctx context.Context, dsn string) (Store, error) {
	switch {
	case dsn == dsnMemory:
		return newMemory(), nil
	case strings.HasPrefix(dsn, dsnSQLite):
		path := strings.TrimPrefix(dsn, dsnSQLite)
		if path == "" {
			return nil, fmt.Errorf("%w %q: the path is empty; want \"sqlite:<path>\", e.g. sqlite:./data/baton.db", ErrBadDSN, dsn)
		}
		if strings.ContainsAny(path, "?#") {
			return nil, fmt.Errorf("%w %q: the path may not contain '?' or '#'; want \"sqlite:<path>\"", ErrBadDSN, dsn)
		}
		return openSQLite(ctx, path)
	case IsPostgresDSN(dsn):
		return openPostgres(ctx, dsn)
	default:
		return nil, fmt.Errorf("%w %q: want \"memory:\", \"sqlite:<path>\" or \"postgres://...\"", ErrBadDSN, redactDSN(dsn))
	}
}

// encode serialises a suspension for storage, with every time in UTC so that both backends
// return the same values.
func encode(s *Suspension) ([]byte, error) {
	c := *s
	c.CreatedAt = c.CreatedAt.UTC()
	c.UpdatedAt = c.UpdatedAt.UTC()
	c.Interrupts = make([]Interrupt, len(s.Interrupts))
	for i, in := range s.Interrupts {
		if !in.ExpiresAt.IsZero() {
			in.ExpiresAt = in.ExpiresAt.UTC()
		}
		c.Interrupts[i] = in
	}
	b, err := json.Marshal(&c)
	if err != nil {
		return nil, fmt.Errorf("store: encode suspension of thread %q: %w", s.ThreadID, err)
	}
	return b, nil
}

func decode(b []byte) (*Suspension, error) {
	var s Suspension
	if err := json.Unmarshal(b, &s); err != nil {
		return nil, fmt.Errorf("store: decode suspension: %w", err)
	}
	// A nil History is written as null; give it back as nil, as it went in.
	if string(s.History) == "null" {
		s.History = nil
	}
	return &s, nil
}

// nextExpiry is the earliest non-zero ExpiresAt among the interrupts, or zero.
func nextExpiry(s *Suspension) time.Time {
	var min time.Time
	for _, in := range s.Interrupts {
		if in.ExpiresAt.IsZero() {
			continue
		}
		if min.IsZero() || in.ExpiresAt.Before(min) {
			min = in.ExpiresAt
		}
	}
	return min
}

func checkSave(s *Suspension) error {
	if s == nil {
		return errors.New("store: save: nil suspension")
	}
	if s.ThreadID == "" {
		return errors.New("store: save: the suspension has no thread id")
	}
	return nil
}

// writer is the run whose epoch fences a save of s.
func (s *Suspension) writer() string {
	if s.WriterRunID != "" {
		return s.WriterRunID
	}
	return s.RunID
}

// stamp sets the timestamps SaveSuspension promises.
func stamp(s *Suspension, now time.Time) {
	if s.CreatedAt.IsZero() {
		s.CreatedAt = now
	}
	s.UpdatedAt = now
}

func notFound(threadID string) error {
	return fmt.Errorf("store: suspension of thread %q: %w", threadID, ErrNotFound)
}
