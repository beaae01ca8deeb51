package coordinator

import (
	"context"

	"github.com/baton-dev/baton/durable"
	"github.com/baton-dev/baton/store"
)

// The store's write bounds, as the event log (package durable) applies them.
const (
	storeWriteTimeout  = durable.StoreWriteTimeout
	maxStoreRetry      = durable.MaxStoreRetry
	storeRetry         = durable.StoreRetry
	maxStoreRetryPause = durable.MaxStoreRetryPause
)

// endLostLog ends a run's event log with RUN_ERROR{code:"RUN_LOST", message}, unless it
// already ends with a terminal event (durable.EndLostLog).
func (e *Engine) endLostLog(ctx context.Context, threadID, runID string, epoch int64, message string) {
	durable.EndLostLog(ctx, e.cfg.Store, store.RunRecord{ThreadID: threadID, RunID: runID, Epoch: epoch}, e.cfg.Now(), message, e.log)
}
