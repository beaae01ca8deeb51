package coordinator

import (
	"context"
	"errors"
	"time"
)

// Graceful hand-off (server.on_shutdown: handoff; design/takeover.md).
//
// Design note: a replica that shuts down with runs still active after the grace period
// hands them over instead of cancelling them. Each run is frozen first: nothing more of it
// reaches the store (events, checkpoint, work, end state), and its writer stores what was
// pending. Its execution is then stopped with ErrHandoff, which, unlike every other cause,
// cancels nothing downstream: its A2A tasks keep running at their agents. Only then are
// the runs' leases ended (Store.ReleaseRuns, with a notification on PostgreSQL), so that
// another replica takes them over at once from their checkpoints, exactly as after a
// crash but without waiting for the lease. With no other replica alive the runs wait in
// the store until one starts (or, on PostgreSQL, until a replica's heartbeat finds them).

// ErrHandoff: the run was handed to another replica at shutdown. Its downstream work is
// not cancelled.
var ErrHandoff = errors.New("run handed off to another replica")

// handOff freezes the runs and stops them without cancelling their downstream work, then
// ends their leases so that another replica takes them over.
func (e *Engine) handOff(runs []*Run) {
	for _, r := range runs {
		r.handedOff.Store(true)
		r.elog.freeze()
		// The live stream ends without a terminal event (the run is not over): its client
		// reconnects (GET …/events) and follows the run on the replica that takes it.
		r.q.abandon()
		r.cancel(ErrHandoff)
	}
	deadline := time.NewTimer(storeWriteTimeout)
	defer deadline.Stop()
	for _, r := range runs {
		select {
		case <-r.elog.done:
		case <-deadline.C:
			e.log.Warn("handoff: a run's last events were not all stored in time", "thread_id", r.ThreadID, "run_id", r.RunID)
		}
	}
	// The heartbeat would renew the leases released below.
	e.stopKeeper()
	ctx, cancel := context.WithTimeout(context.Background(), storeWriteTimeout)
	defer cancel()
	n, err := e.cfg.Store.ReleaseRuns(ctx, e.cfg.Replica)
	if err != nil {
		e.log.Error("handoff: releasing the runs failed; they are taken over once their lease lapses", "err", err)
		return
	}
	e.log.Info("runs handed off", "runs", n)
}

// freeze stops recording the run: later events and work are ignored, and the writer
// stores what is pending and stops.
func (l *runLog) freeze() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.frozen = true
	l.kickLocked()
}

// runningHere counts the runs this replica executes that the store records as its own and
// that have not ended: the runs its heartbeat renews.
func (e *Engine) runningHere() int {
	e.mu.Lock()
	defer e.mu.Unlock()
	n := 0
	for _, r := range e.active {
		if r.begun.Load() && !r.terminated() && !r.handedOff.Load() {
			n++
		}
	}
	return n
}

// dropTakenOver stops, without cancelling their downstream work or writing anything more
// of them, the runs here that the store says another replica owns now: this replica was
// stalled past their lease and they were taken over (design/takeover.md). The new owner
// follows their tasks; two replicas must never run one run.
func (e *Engine) dropTakenOver() {
	e.mu.Lock()
	runs := make([]*Run, 0, len(e.active))
	for _, r := range e.active {
		runs = append(runs, r)
	}
	e.mu.Unlock()
	for _, r := range runs {
		if !r.begun.Load() || r.terminated() || r.handedOff.Load() {
			continue
		}
		ctx, cancel := context.WithTimeout(context.Background(), storeWriteTimeout)
		rec, err := e.cfg.Store.GetRun(ctx, r.ThreadID, r.RunID)
		cancel()
		if err != nil || rec.Replica == e.cfg.Replica {
			continue
		}
		r.log.Warn("run taken over by another replica while this one was stalled; stopping it here", "owner", rec.Replica)
		r.handedOff.Store(true)
		r.elog.freeze()
		r.q.abandon()
		r.cancel(ErrHandoff)
	}
}
