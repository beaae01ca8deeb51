package coordinator

import (
	"errors"

	"github.com/baton-dev/baton/durable"
)

// Graceful hand-off (server.on_shutdown: handoff; design/takeover.md).
//
// Design note: a replica that shuts down with runs still active after the grace period
// hands them over instead of cancelling them. Each run is frozen first: nothing more of it
// reaches the store (events, checkpoint, work, end state), and its writer stores what was
// pending. Its execution is then stopped with ErrHandoff, which, unlike every other cause,
// cancels nothing downstream: its A2A tasks keep running at their agents. Only then are
// the runs' leases ended (durable.HandOff: Store.ReleaseRuns, with a notification on
// PostgreSQL), so that another replica takes them over at once from their checkpoints,
// exactly as after a crash but without waiting for the lease. With no other replica alive the runs wait in
// the store until one starts (or, on PostgreSQL, until a replica's heartbeat finds them).

// ErrHandoff: the run was handed to another replica at shutdown. Its downstream work is
// not cancelled.
var ErrHandoff = errors.New("run handed off to another replica")

// handOff hands the runs to durable.HandOff, which freezes their logs, stops them here
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
	n, err := durable.HandOff(e.cfg.Store, e.cfg.Replica, leaving, e.jobs.heartbeat, e.log)
	if err != nil {
		e.log.Error("handoff: releasing the runs failed; they are taken over once their lease lapses", "err", err)
		return
	}
	e.log.Info("runs handed off", "runs", n)
}
