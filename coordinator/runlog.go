package coordinator

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/baton-dev/baton/agui"
	"github.com/baton-dev/baton/store"
)

// maxRunLogEvents bounds the events RunLog reads of one run.
const maxRunLogEvents = 100_000

// RunLog is the latest run of a thread as its event log has it.
type RunLog struct {
	RunID string
	// Started is when the run started, Updated when the thread last changed.
	Started, Updated time.Time
	// Events are the run's logged events, oldest first.
	Events []agui.Event
}

// ReadRunLog returns the latest run of principal's thread threadID on e and its logged
// events, read from the store: any replica answers, whichever runs (or ran) it. A thread that does not
// exist, or is another principal's, is ErrRunNotFound, as is a thread without a run. It
// serves reads of a run's state by a surface that did not start it (the MCP tasks
// extension's tasks/get). A function, not a method: the Engine's method set is full.
func ReadRunLog(ctx context.Context, e *Engine, threadID, principal string) (*RunLog, error) {
	th, err := e.cfg.Store.GetThread(ctx, threadID)
	switch {
	case errors.Is(err, store.ErrNotFound):
		return nil, ErrRunNotFound
	case err != nil:
		return nil, fmt.Errorf("coordinator: run log: %w", err)
	case th.Owner != principal || th.LastRunID == "":
		return nil, ErrRunNotFound
	}
	out := &RunLog{RunID: th.LastRunID, Started: th.LastRunAt, Updated: th.UpdatedAt}
	var after int64
	for len(out.Events) < maxRunLogEvents {
		page, err := e.cfg.Store.Events(ctx, threadID, out.RunID, after, store.MaxEventsRead)
		if err != nil {
			return nil, fmt.Errorf("coordinator: run log: %w", err)
		}
		for _, ev := range page {
			after = ev.Seq
			if decoded, err := agui.DecodeEvent(ev.Data); err == nil {
				out.Events = append(out.Events, decoded)
			}
		}
		if len(page) < store.MaxEventsRead {
			break
		}
	}
	return out, nil
}
