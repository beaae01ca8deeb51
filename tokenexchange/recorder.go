package tokenexchange

import (
	"context"
	"crypto/sha256"
	"log/slog"
	"sync"
	"time"
)

// SubjectWriter stores a principal's subject token until it expires (tokenstore.Store).
type SubjectWriter interface {
	PutSubject(ctx context.Context, principal, token string, expires time.Time) error
}

// DefaultMaxRecorded bounds the principals whose last recorded token Recorder remembers.
const DefaultMaxRecorded = 10000

// Recorder stores the inbound access tokens of users as the subjects of later exchanges.
// A token already stored by this process is not written again, so that a user's requests
// cost one store write per token, not per request. It is safe for concurrent use.
type Recorder struct {
	w   SubjectWriter
	log *slog.Logger
	max int

	mu   sync.Mutex
	last map[string][sha256.Size]byte // principal -> hash of the token stored last
}

// NewRecorder returns a Recorder writing to w; max <= 0 means DefaultMaxRecorded.
func NewRecorder(w SubjectWriter, max int, log *slog.Logger) *Recorder {
	if max <= 0 {
		max = DefaultMaxRecorded
	}
	if log == nil {
		log = slog.Default()
	}
	return &Recorder{w: w, log: log, max: max, last: map[string][sha256.Size]byte{}}
}

// Record stores token as principal's subject until expires, unless it is the one stored
// last. A failed write is logged (without the token) and not returned: the request goes on,
// and an exchange that needs the token later says the user must sign in again.
func (r *Recorder) Record(ctx context.Context, principal, token string, expires time.Time) {
	if r == nil || r.w == nil || principal == "" || token == "" {
		return
	}
	sum := sha256.Sum256([]byte(token))
	r.mu.Lock()
	if r.last[principal] == sum {
		r.mu.Unlock()
		return
	}
	r.mu.Unlock()
	if err := r.w.PutSubject(ctx, principal, token, expires); err != nil {
		r.log.Warn("the user's token could not be stored for token exchange", "err", err)
		return
	}
	r.mu.Lock()
	if len(r.last) >= r.max {
		// Forgetting costs one more write per principal, never a wrong answer.
		clear(r.last)
	}
	r.last[principal] = sum
	r.mu.Unlock()
}
