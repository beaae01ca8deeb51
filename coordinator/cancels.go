package coordinator

import (
	"context"
	"log/slog"
	"time"

	"github.com/baton-dev/baton/cancel"
	"github.com/baton-dev/baton/store"
)

// Pending cancels in the store (design/cancel-confirm.md): a CancelTask that the agent has
// not confirmed is recorded when the Confirmer starts following it and forgotten when it
// has its final result, so that a restart continues it (resumeCancels) within the same
// horizon. Cancels outside a run (parked tasks on expiry or a cancelled answer, tasks of a
// lapsed run) go through the same path (cancelTask).

// recordCancel is the Confirmer's OnFollow.
func (e *Engine) recordCancel(agent, taskID string, since time.Time) {
	ctx, cancel := context.WithTimeout(context.Background(), storeWriteTimeout)
	defer cancel()
	if err := e.cfg.Store.SavePendingCancel(ctx, store.PendingCancel{Agent: agent, TaskID: taskID, Since: since}); err != nil {
		e.log.Warn("store: record pending cancel; a restart would not continue it", "agent", agent, "task_id", taskID, "err", err)
	}
}

// forgetCancel is the Confirmer's OnSettle.
func (e *Engine) forgetCancel(agent, taskID string) {
	ctx, cancel := context.WithTimeout(context.Background(), storeWriteTimeout)
	defer cancel()
	if err := e.cfg.Store.DeletePendingCancel(ctx, agent, taskID); err != nil {
		e.log.Warn("store: forget settled cancel", "agent", agent, "task_id", taskID, "err", err)
	}
}

// reportCancel logs and counts the final result of a cancel made outside a run.
func (e *Engine) reportCancel(log *slog.Logger, what string) func(cancel.Report) {
	return func(rep cancel.Report) {
		log.Info(what, "agent", rep.Name, "task_id", rep.ID, "result", rep.Result,
			"latency_ms", rep.Latency.Milliseconds(), "err", errString(rep.Err))
		if e.cfg.Metrics != nil {
			e.cfg.Metrics.Cancellation(rep.Result, rep.Latency)
		}
	}
}

// cancelTask cancels a task of agent a outside a run's scope, with the same pacing,
// confirmation and retries as a run's cancels, every attempt with owner's credentials for
// the agent (as a run's); it returns the first attempt's error (nil when the task is
// canceled or was over, or when the cancel is being retried).
func (e *Engine) cancelTask(ctx context.Context, owner string, a *Agent, taskID string, log *slog.Logger, what string) error {
	rep := e.confirm.Cancel(ctx, a.Name, taskID, e.ownerCancel(owner, a, cancelFunc(a.Client)), e.reportCancel(log, what))
	if rep.Result == cancel.ResultPending {
		log.Info(what+": not confirmed yet, retrying in the background", "agent", a.Name, "task_id", taskID, "err", errString(rep.Err))
		return nil
	}
	return rep.Err
}

// resumeCancels continues the cancels an earlier process left pending. The store does not
// keep whose they were, so they are sent without a user's agent credentials (an agent behind
// per-user sign-in may refuse them; they then end as failed).
func (e *Engine) resumeCancels() {
	ctx, cancelRead := context.WithTimeout(context.Background(), storeWriteTimeout)
	pending, err := e.cfg.Store.PendingCancels(ctx, store.MaxPendingCancelsRead)
	cancelRead()
	if err != nil {
		e.log.Warn("store: pending cancels could not be read; they are not continued", "err", err)
		return
	}
	for _, p := range pending {
		a := e.agents[p.Agent]
		if a == nil {
			e.log.Warn("pending cancel of an agent no longer configured: dropped", "agent", p.Agent, "task_id", p.TaskID)
			e.forgetCancel(p.Agent, p.TaskID)
			continue
		}
		e.confirm.Resume(a.Name, p.TaskID, cancelFunc(a.Client), p.Since, e.reportCancel(e.log, "cancel continued after a restart"))
	}
	if len(pending) > 0 {
		e.log.Info("continuing cancels left pending by an earlier process", "count", len(pending))
	}
}
