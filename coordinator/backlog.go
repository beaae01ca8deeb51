package coordinator

import (
	"context"
	"fmt"
	"time"

	"github.com/baton-dev/baton/store"
)

// backlogReadTimeout bounds one read of the event log for a client that fell behind.
const backlogReadTimeout = 10 * time.Second

// Backlog returns the run's stored events with after < Seq <= upto, oldest first, at most
// limit of them: what a live stream missed when it fell more than the stream buffer behind
// (its next NextFrom starts beyond the last event it has). It waits, until ctx is done,
// for events that are on their way to the store (the log is written a moment after the
// events are streamed). An empty result with a nil error means that the log will never
// hold those events (its writer dropped or failed to store them, which it logged): the
// caller goes on after upto.
func (r *Run) Backlog(ctx context.Context, after, upto int64, limit int) ([]store.Event, error) {
	for {
		settled, over, changed := r.elog.State()
		rctx, cancel := context.WithTimeout(ctx, backlogReadTimeout)
		evs, err := r.e.cfg.Store.Events(rctx, r.ThreadID, r.RunID, after, limit)
		cancel()
		if err != nil {
			return nil, fmt.Errorf("coordinator: read the event log: %w", err)
		}
		n := 0
		for n < len(evs) && evs[n].Seq <= upto {
			n++
		}
		if n > 0 {
			return evs[:n], nil
		}
		if len(evs) > 0 || settled >= upto || over {
			// Nothing stored between after and upto, and nothing more will be.
			return nil, nil
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-changed:
		}
	}
}
