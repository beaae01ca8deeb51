package coordinator

import (
	"context"
	"errors"
	"fmt"

	"github.com/baton-dev/baton/store"
)

// StopRun cancels the active run (threadID, runID) on the producer side: its stream ends with
// the cancelled outcome.
//
// Who owns the thread, and which replica owns the run, are read from the store, never from
// this replica's memory: another replica may have deleted and re-created the thread, or
// taken the run over, and a stale owner must never stop (or cancel the downstream work of)
// a run it does not hold.
func (e *Engine) StopRun(threadID, runID, principal string) error {
	// A stop is carried out whole even when its request goes away: the store's timeout
	// bounds the reads.
	ctx, cancel := context.WithTimeout(context.Background(), storeWriteTimeout)
	defer cancel()
	st, err := e.cfg.Store.GetThread(ctx, threadID)
	if errors.Is(err, store.ErrNotFound) {
		return ErrRunNotFound
	}
	if err != nil {
		return fmt.Errorf("coordinator: stop: %w", err)
	}
	if st.Owner != principal {
		return ErrForbidden
	}
	e.mu.Lock()
	r := e.active[threadID]
	_, done := e.finished[runKey(threadID, runID)]
	e.mu.Unlock()
	if r == nil || r.RunID != runID {
		if done {
			return ErrRunFinished
		}
		return e.records.StopElsewhere(ctx, threadID, runID)
	}
	if r.terminated() {
		return ErrRunFinished
	}
	if r.begun.Load() && !r.handedOff.Load() {
		mine, err := r.own.Holds(ctx, e.cfg.Store)
		if err != nil {
			return fmt.Errorf("coordinator: stop: %w", err)
		}
		if !mine {
			// Taken over while this replica was stalled: the run stops here without
			// cancelling anything, and the stop goes to its owner.
			r.dur.Moved("the store names another owner")
			return e.records.StopElsewhere(ctx, threadID, runID)
		}
	}
	if r.handedOff.Load() {
		return e.records.StopElsewhere(ctx, threadID, runID)
	}
	if r.begun.Load() {
		// The stop is recorded with the run before it is carried out here: if this replica
		// dies while it cancels the run's downstream work, the replica that takes the run
		// over stops it too (durable.Heartbeat.ApplyStops) instead of driving it on.
		if _, err := e.cfg.Store.RequestStop(ctx, threadID, runID); err != nil && !errors.Is(err, store.ErrNotFound) {
			r.log.Warn("store: record the stop; it is carried out here only", "err", err)
		}
	}
	r.Cancel(ErrStopped)
	return nil
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
