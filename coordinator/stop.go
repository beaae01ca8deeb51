package coordinator

import (
	"context"
	"errors"
	"fmt"

	"github.com/baton-dev/baton/store"
)

// Stop cancels the active run (threadID, runID) on the producer side: its stream ends with
// the cancelled outcome.
func (e *Engine) Stop(threadID, runID, principal string) error {
	e.mu.Lock()
	th := e.threads[threadID]
	r := e.active[threadID]
	_, done := e.finished[runKey(threadID, runID)]
	e.mu.Unlock()
	if th == nil {
		// The thread may be known only to the store (evicted, or run elsewhere): its
		// owner still decides between "not yours" and "not found".
		ctx, cancel := context.WithTimeout(context.Background(), storeWriteTimeout)
		defer cancel()
		st, err := e.cfg.Store.GetThread(ctx, threadID)
		if errors.Is(err, store.ErrNotFound) {
			return ErrRunNotFound
		}
		if err != nil {
			// The store could not say (store.ErrUnavailable): the run may well exist.
			return fmt.Errorf("coordinator: stop: %w", err)
		}
		if st.Owner != principal {
			return ErrForbidden
		}
		return e.stopElsewhere(ctx, threadID, runID)
	}
	if th.owner != principal {
		return ErrForbidden
	}
	if r == nil || r.RunID != runID {
		if done {
			return ErrRunFinished
		}
		ctx, cancel := context.WithTimeout(context.Background(), storeWriteTimeout)
		defer cancel()
		return e.stopElsewhere(ctx, threadID, runID)
	}
	if r.terminated() {
		return ErrRunFinished
	}
	r.Cancel(ErrStopped)
	return nil
}
