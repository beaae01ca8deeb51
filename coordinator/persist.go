package coordinator

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"

	"github.com/baton-dev/baton/agui"
	"github.com/baton-dev/baton/store"
)

// newReplicaID names this process in the store: new per process, so that a restarted
// process never mistakes a dead predecessor's runs for its own.
func newReplicaID() string {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return "replica-" + hex.EncodeToString(b[:])
}

// storedRunState is the store's end state of a run: its typed outcome ("ended" when the
// run has none, which only a run that never reached its end can have).
func storedRunState(reason EndReason) string {
	if reason.Outcome == "" || string(reason.Outcome) == store.RunRunning {
		return "ended"
	}
	return string(reason.Outcome)
}

// LogChanged returns a channel closed when more of the run's events are in the store's
// event log, or nil when the run is not active on this replica (a follower then polls).
func (e *Engine) LogChanged(threadID, runID string) <-chan struct{} {
	e.mu.Lock()
	r := e.active[threadID]
	e.mu.Unlock()
	if r == nil || r.RunID != runID {
		return nil
	}
	return r.elog.Changed()
}

// DeleteThread deletes a thread of principal with its messages, event logs and suspension,
// and cancels the work parked on its open interrupts. A thread that does not exist or
// belongs to another principal is ErrThreadNotFound (404 for both, so that
// nobody learns which threads exist); a running thread is ErrThreadBusy and is left as it was.
func (e *Engine) DeleteThread(ctx context.Context, threadID, principal string) error {
	th, err := e.cfg.Store.GetThread(ctx, threadID)
	if errors.Is(err, store.ErrNotFound) || (err == nil && th.Owner != principal) {
		return ErrThreadNotFound
	}
	if err != nil {
		return fmt.Errorf("coordinator: delete thread: %w", err)
	}
	e.mu.Lock()
	_, busy := e.active[threadID]
	e.mu.Unlock()
	if busy || th.Running {
		return ErrThreadBusy
	}
	susp, err := e.loadSuspension(ctx, threadID)
	if err != nil {
		return fmt.Errorf("coordinator: delete thread: %w", err)
	}
	if err := e.cfg.Store.DeleteThread(ctx, threadID); err != nil {
		if errors.Is(err, store.ErrThreadBusy) {
			return ErrThreadBusy
		}
		return fmt.Errorf("coordinator: delete thread: %w", err)
	}
	if susp != nil && len(susp.Interrupts) > 0 {
		e.abandon(ctx, susp.Owner, threadID, susp.Interrupts)
		if m := e.cfg.Metrics; m != nil {
			m.InterruptsOpen(-len(susp.Interrupts))
		}
	}
	e.mu.Lock()
	delete(e.threads, threadID)
	e.mu.Unlock()
	return nil
}

// ownInput is the run's own copy of the caller's input: the thread's stored history is
// prepended to its messages (prependHistory), and the caller's input, which a request
// holds for its whole stream, must not keep that history reachable once the run has
// dropped it.
func ownInput(in *agui.RunAgentInput) *agui.RunAgentInput {
	own := *in
	return &own
}

// maxThreads is the store's cap on a principal's threads (0: none).
func (c *Config) maxThreads() int {
	switch n := c.MaxThreadsPerPrincipal; {
	case n == 0:
		return DefaultMaxThreadsPerPrincipal
	case n < 0:
		return 0
	default:
		return n
	}
}
