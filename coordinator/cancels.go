package coordinator

import (
	"context"
	"errors"
	"log/slog"
	"sync/atomic"

	"github.com/baton-dev/baton/cancel"
	"github.com/baton-dev/baton/store"
	"github.com/baton-dev/baton/subagent"
)

// Pending cancels in the store (design/cancel-confirm.md): a CancelTask that the agent has
// not confirmed is recorded when the Confirmer starts following it and forgotten when it
// has its final result (durable.PendingCancels, the Confirmer's OnFollow and OnSettle), so
// that a restart continues it (Engine.ResumeCancel) within the same horizon. Cancels outside a run (parked tasks on expiry or a cancelled answer, tasks of a
// lapsed run) go through the same path (cancelTask).

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
	rep := e.confirm.Cancel(ctx, a.Name, taskID, owner, e.ownerCancel(owner, a, cancelFunc(a.Client)), e.reportCancel(log, what))
	if rep.Result == cancel.ResultPending {
		log.Info(what+": not confirmed yet, retrying in the background", "agent", a.Name, "task_id", taskID, "err", errString(rep.Err))
		return nil
	}
	return rep.Err
}

// resumedCancel is the cancel function and the final report of a cancel continued after a
// restart. The owner's credentials are read afresh at each attempt (a refreshed token is
// used). When the owner has none for the agent any more (they signed out, or the cancel was
// recorded before owners were), the cancel goes without; an agent that requires them refuses
// it, and the cancel ends failed, as it would have before: that is logged at warn, without
// the principal or any token.
func resumedCancel(e *Engine, p store.PendingCancel, a *Agent) (cancel.Func, func(cancel.Report)) {
	send := cancelFunc(a.Client)
	var bare atomic.Bool // the last attempt went without the owner's credentials
	fn := func(ctx context.Context, id string) error {
		actx := e.agentCtx(ctx, p.Owner, a)
		// A2ASignIn.Authorize returns ctx itself when it attaches nothing.
		bare.Store(actx == ctx)
		return send(actx, id)
	}
	report := e.reportCancel(e.log, "cancel continued after a restart")
	done := func(rep cancel.Report) {
		report(rep)
		if rep.Result == cancel.ResultFailed && errors.Is(rep.Err, subagent.ErrAuth) {
			e.log.Warn("cancel continued after a restart refused by the agent's authentication; the task may go on",
				"agent", a.Name, "task_id", p.TaskID, "owner_known", p.Owner != "", "sent_with_owner_credentials", !bare.Load())
		}
	}
	return fn, done
}

// unconfirmedStep is the journal's record of a downstream cancel of a run that was not
// confirmed (failed, abandoned, or never sent for want of an id): a replica that answers
// the run's CancelTask without running it names these as the owner's answer does
// (a2aserver). Detail is "<kind> <result>", with no error text.
func unconfirmedStep(rep cancel.Report) (store.StepEnd, bool) {
	switch rep.Result {
	case cancel.ResultConfirmed, cancel.ResultAlreadyTerminal, cancel.ResultCancelled, cancel.ResultMoved, cancel.ResultPending, "":
		return store.StepEnd{}, false
	}
	return store.StepEnd{Outcome: store.StepError, Detail: string(rep.Kind) + " " + rep.Result}, true
}
