package coordinator

import (
	"context"

	"github.com/baton-dev/baton/durable"
	"github.com/baton-dev/baton/store"
)

// runsHere is what the heartbeat (durable.Heartbeat) does to the runs executing on its
// engine: it implements durable.RunsHere. The renewal, the stop requests' rows and the
// reaping of lost runs are durable's; stopping a run and cancelling its A2A tasks are the
// run loop's.
type runsHere struct{ e *Engine }

// running is a snapshot of the runs executing here.
func (h runsHere) running() []*Run {
	h.e.mu.Lock()
	defer h.e.mu.Unlock()
	runs := make([]*Run, 0, len(h.e.active))
	for _, r := range h.e.active {
		runs = append(runs, r)
	}
	return runs
}

// Renewed applies a heartbeat's renewal: a run here renewed under its epoch may go on; one
// that was not (and was claimed before the heartbeat was sent) is another replica's now
// and stops here, once the store confirms it.
func (h runsHere) Renewed(ren durable.Renewal) {
	for _, r := range h.running() {
		if !r.begun.Load() || r.handedOff.Load() || !r.own.Leased() {
			continue
		}
		// A run that ended is having its record ended; a NotRenewed one may be another
		// replica's, or its own claim committed after the heartbeat's update: only the
		// store can tell.
		if r.own.Apply(ren) != durable.NotRenewed || r.terminated() {
			continue
		}
		// The heartbeat calls Renewed without a context of its own; the look is bounded by
		// the store's write timeout.
		ctx, cancel := context.WithTimeout(context.Background(), storeWriteTimeout)
		mine, err := r.own.Holds(ctx, h.e.cfg.Store)
		cancel()
		if err == nil && !mine && !r.terminated() {
			r.dur.moved("the heartbeat did not renew its lease: another replica took it over")
		}
	}
}

// StopRequested cancels the run here that another replica was asked to stop.
func (h runsHere) StopRequested(threadID, runID string) {
	h.e.mu.Lock()
	r := h.e.active[threadID]
	h.e.mu.Unlock()
	if r != nil && r.RunID == runID {
		r.log.Info("stop requested through another replica")
		r.Cancel(ErrStopped)
	}
}

// CancelWork cancels the A2A tasks of a run reaped here (cancelWork).
func (h runsHere) CancelWork(rec store.RunRecord, work durable.Work) {
	h.e.cancelWork(rec, work)
}
