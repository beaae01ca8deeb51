package coordinator

import (
	"context"

	"github.com/baton-dev/baton/durable"
	"github.com/baton-dev/baton/internal/startstop"
)

// jobs are the engine's background services, each with a Start and a Stop: the interrupt
// expiry, the heartbeat (it renews this replica's leases, applies stop requests made
// through other replicas and reaps lost runs), the takeover of the runs of replicas whose
// lease lapsed, and the sweep of what is past its retention. A job not configured is nil
// (the expiry's janitor: not started), and its Start and Stop do nothing.
type jobs struct {
	expiry    *expirer
	heartbeat *durable.Heartbeat
	takeover  *durable.Takeover
	sweep     *startstop.Service
}

// Start starts the jobs (Engine.Start); they run until Stop, or until ctx ends.
func (j *jobs) Start(ctx context.Context) {
	j.expiry.Start(ctx)
	if j.heartbeat == nil {
		// The takeover runs with the heartbeat: without one, no lease lapses to be seen.
		return
	}
	j.heartbeat.Start(ctx)
	j.takeover.Start(ctx)
	j.sweep.Start(ctx)
}

// stopIntake stops the jobs that take work on: no run is taken over and no interrupt
// expired from here on. The look and the expiry in progress end first (a run the look
// claims is left to its lease, or to the hand-off's release). The heartbeat goes on: the
// leases of the runs still here hold until they have ended.
func (j *jobs) stopIntake(ctx context.Context) {
	_ = j.takeover.Stop(ctx)
	_ = j.expiry.Stop(ctx)
	_ = j.sweep.Stop(ctx)
}

// Stop stops every job, the heartbeat last, waiting for the rounds in progress.
func (j *jobs) Stop(ctx context.Context) error {
	j.stopIntake(ctx)
	return j.heartbeat.Stop(ctx)
}
