package coordinator

import (
	"context"

	"github.com/baton-dev/baton/durable"
)

// Active reports the number of runs executing now.
// A run counts until its downstream cancellation has finished, not only until its stream
// ended (the thread is free for the next run a little earlier).
func (e *Engine) Active() int {
	return int(e.running.Load())
}

// Stop stops accepting runs, lets active runs finish until ctx is done, then cancels
// the rest (downstream cancellation included) and waits for them to end.
func (e *Engine) Stop(ctx context.Context) error {
	e.mu.Lock()
	wasClosing := e.closing
	e.closing = true
	e.mu.Unlock()
	if !wasClosing {
		// No run is taken over from here on: the look in progress ends first (a run it
		// claims is left to its lease, or to the hand-off's release).
		e.jobs.StopIntake(context.WithoutCancel(ctx))
	}
	// The heartbeat outlives the runs: their leases hold until they have ended.
	defer func() { _ = e.jobs.Stop(context.Background()) }()
	idle := make(chan struct{})
	go func() { e.wg.Wait(); close(idle) }()
	select {
	case <-idle:
		e.settleCancels(ctx)
		return nil
	case <-ctx.Done():
	}
	// The runs' writers stop retrying a store that does not take their writes.
	e.quitOnce.Do(func() { close(e.quit) })
	e.mu.Lock()
	runs := make([]*Run, 0, len(e.active))
	for _, r := range e.active {
		runs = append(runs, r)
	}
	e.mu.Unlock()
	if e.cfg.Handoff && len(runs) > 0 {
		// Not waited for: a run handed off may be blocked on downstream work that is
		// deliberately not cancelled; the process ends without it.
		e.handOff(runs)
		// CancelTask calls of runs that ended earlier may still be being confirmed.
		e.settleCancels(ctx)
		return nil
	}
	for _, r := range runs {
		r.Cancel(ErrShutdown)
	}
	<-idle
	e.settleCancels(ctx)
	return nil
}

// settleCancels waits for the CancelTask calls still being confirmed in the background:
// until ctx's deadline when it has one that is not spent yet, otherwise one cancel timeout
// (ctx may have been spent by the runs already, or have no deadline). Those still
// unconfirmed then are abandoned (logged and counted).
func (e *Engine) settleCancels(ctx context.Context) {
	wctx, stop := context.WithTimeout(context.WithoutCancel(ctx), e.cfg.CancelTimeout)
	defer stop()
	if _, ok := ctx.Deadline(); ok && ctx.Err() == nil {
		wctx, stop = context.WithCancel(ctx)
		defer stop()
	}
	_ = e.confirm.Wait(wctx)
	e.confirm.Close()
}

// handOff hands the runs to the jobs' hand-off (durable.HandOff), which freezes their logs, stops them here
// without cancelling their downstream work, stores what their logs had pending, stops the
// heartbeat and ends their leases so that another replica takes them over.
func (e *Engine) handOff(runs []*Run) {
	leaving := make([]durable.Leaving, 0, len(runs))
	for _, r := range runs {
		// Before its log is frozen: a run handed off never ends its record here.
		r.handedOff.Store(true)
		leaving = append(leaving, durable.Leaving{Log: r.elog, Stop: func() {
			// The live stream ends without a terminal event (the run is not over): its
			// client reconnects (GET …/events) and follows the run on the replica that
			// takes it.
			r.stream.q.abandon()
			r.cancel(ErrHandoff)
		}})
	}
	n, err := e.jobs.HandOff(leaving)
	if err != nil {
		e.log.Error("handoff: releasing the runs failed; they are taken over once their lease lapses", "err", err)
		return
	}
	e.log.Info("runs handed off", "runs", n)
}
