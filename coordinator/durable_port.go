package coordinator

import (
	"context"
	"encoding/json"
	"slices"
	"sync"

	"github.com/baton-dev/baton/durable"
	"github.com/baton-dev/baton/store"
	"github.com/baton-dev/baton/subagent"
)

// The engine's side of durable's port (durable.Engine): what the background jobs of package
// durable (the takeover, the heartbeat, the pending cancels, the interrupt expiry) ask of
// the run loop. The claims, leases, retries and records are durable's; continuing a run,
// stopping one, and cancelling remote work with its owner's credentials are the engine's.
// These methods are for durable: a surface reaches the engine through its Runs port.
var _ durable.Engine = (*Engine)(nil)

// Adopt continues here a run that the takeover claimed (durable.Adopter), from the
// checkpoint its work document holds and the stream state its log (which has not ended)
// leaves. A run that cannot continue is a *durable.NotContinued, which the takeover ends
// with RUN_ERROR (its remote tasks cancelled through CancelWork).
func (e *Engine) Adopt(ctx context.Context, c durable.Claim) error {
	a := &adoption{e: e, rec: c.Run, log: e.log.With("thread_id", c.Run.ThreadID, "run_id", c.Run.RunID, "takeover", true)}
	return a.adopt(ctx, c)
}

// Renewed applies a heartbeat's renewal (durable.RunsHere): a run here renewed under its
// epoch may go on; one that was not (and was claimed before the heartbeat was sent) is
// another replica's now and stops here, once the store confirms it.
func (e *Engine) Renewed(ren durable.Renewal) {
	e.mu.Lock()
	running := make([]*Run, 0, len(e.active))
	for _, r := range e.active {
		running = append(running, r)
	}
	e.mu.Unlock()
	for _, r := range running {
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
		mine, err := r.own.Holds(ctx, e.cfg.Store)
		cancel()
		if err == nil && !mine && !r.terminated() {
			r.dur.Moved("the heartbeat did not renew its lease: another replica took it over")
		}
	}
}

// StopRequested cancels the run here that another replica was asked to stop
// (durable.RunsHere).
func (e *Engine) StopRequested(threadID, runID string) {
	e.mu.Lock()
	r := e.active[threadID]
	e.mu.Unlock()
	if r != nil && r.RunID == runID {
		r.log.Info("stop requested through another replica")
		r.Cancel(ErrStopped)
	}
}

// CancelWork cancels, in parallel, the A2A tasks that the work document of a run reaped
// or not continued here lists as not terminal, and records them as canceled so that nobody
// cancels them again, and the tasks of its sends that the agent never named
// (cancelUnnamed). It is durable's (durable.RunsHere).
func (e *Engine) CancelWork(rec store.RunRecord, work durable.Work) {
	log := e.log.With("thread_id", rec.ThreadID, "run_id", rec.RunID)
	owner := durable.CheckpointOwner(work)
	// The run's previous owner is gone with its contexts; the takeover's look must not
	// bound the cancels either (they are slow agents' calls): they get their own time.
	cctx, cancel := context.WithTimeout(context.Background(), e.cfg.CancelTimeout)
	defer cancel()
	var wg sync.WaitGroup
	changed := false
	for i := range work.A2A {
		t := &work.A2A[i]
		a := e.agents[t.Agent]
		if a == nil || subagent.State(t.State).Terminal() {
			continue
		}
		t.State, changed = string(subagent.StateCanceled), true
		wg.Go(func() {
			// Confirmed like a run's cancels: retried in the background until the
			// agent confirms (cancels.go).
			st, _ := e.journal.Intent(durable.RunRef{ThreadID: rec.ThreadID, RunID: rec.RunID},
				durable.StepIntent{Kind: store.StepCancel, Target: a.Name, Ref: t.TaskID, Attempt: 1, Detail: "lapsed run: its task is cancelled"})
			err := e.cancels.cancelTask(cctx, owner, a, t.TaskID, log, "lapsed run: task cancelled")
			st.End(cancelEnd(err))
			if err != nil {
				log.Warn("lapsed run: the cancel of its task failed", "agent", t.Agent, "task_id", t.TaskID, "err", errString(err))
			}
		})
	}
	// The tasks of its new-task sends that its work does not list: the agent never named
	// them to the previous owner; found by the ids their intents recorded.
	for callID, ids := range sentByRun(cctx, e.cfg.Store, log, rec.ThreadID, rec.RunID) {
		a := e.agents[ids.agent]
		if a == nil || slices.ContainsFunc(work.A2A, func(t durable.Task) bool { return t.ToolCallID == callID }) {
			continue
		}
		wg.Go(func() { cancelUnnamed(e.cancels, e.journal, log, rec, owner, a, ids) })
	}
	wg.Wait()
	if changed {
		if doc, err := json.Marshal(&work); err == nil {
			if err := e.cfg.Store.SaveRunWork(cctx, rec.ThreadID, rec.RunID, rec.Epoch, doc); err != nil {
				log.Warn("store: save the cancelled work", "err", err)
			}
		}
	}
}

// ResumeCancel continues p's cancel, which an earlier process left pending, as its owner
// (durable.CancelResumer): every attempt carries the owner's credentials for the agent, as
// the live run's did. False: the agent is not configured.
func (e *Engine) ResumeCancel(p store.PendingCancel) bool {
	a := e.agents[p.Agent]
	if a == nil {
		return false
	}
	e.cancels.resume(p, a, e.log)
	return true
}

// AbandonExpired cancels the work parked on the interrupts of an expired suspension, which
// is no longer in the store (durable.ExpiredWork), and counts them closed.
func (e *Engine) AbandonExpired(ctx context.Context, susp *store.Suspension) {
	e.abandon(ctx, susp.Owner, susp.ThreadID, susp.Interrupts)
	if e.cfg.Metrics != nil {
		e.cfg.Metrics.InterruptsOpen(-len(susp.Interrupts))
	}
}
