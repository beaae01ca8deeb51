package coordinator

import (
	"context"
	"errors"
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/baton-dev/baton/cancel"
	"github.com/baton-dev/baton/store"
	"github.com/baton-dev/baton/subagent"
)

// Pending cancels in the store (design/cancel-confirm.md): a CancelTask that the agent has
// not confirmed is recorded when the Confirmer starts following it and forgotten when it
// has its final result (durable.PendingCancels, the Confirmer's OnFollow and OnSettle), so
// that a restart continues it (Engine.ResumeCancel, taskCancels.resume) within the same horizon. Cancels outside a run (parked tasks on expiry or a cancelled answer, tasks of a
// lapsed run) go through the same path (taskCancels.cancelTask).

// taskCancels cancels A2A tasks outside a run's scope, and continues the cancels a run's
// scope hands over: it owns the Confirmer that paces CancelTask calls per agent and
// follows unconfirmed ones in the background (design/cancel-confirm.md), which the
// engine's Stop waits for, bounded (settle).
type taskCancels struct {
	confirm *cancel.Confirmer
	// signIn adds the task owner's credentials to every attempt (nil: none configured).
	signIn  A2ASignIn
	metrics Metrics
	// timeout bounds one attempt, and the wait of a shutdown whose own time is spent.
	timeout time.Duration
}

// report logs and counts the final result of a cancel made outside a run.
func (c *taskCancels) report(log *slog.Logger, what string) func(cancel.Report) {
	return func(rep cancel.Report) {
		log.Info(what, "agent", rep.Name, "task_id", rep.ID, "result", rep.Result,
			"latency_ms", rep.Latency.Milliseconds(), "err", errString(rep.Err))
		if c.metrics != nil {
			c.metrics.Cancellation(rep.Result, rep.Latency)
		}
	}
}

// cancelTask cancels a task of agent a outside a run's scope, with the same pacing,
// confirmation and retries as a run's cancels, every attempt with owner's credentials for
// the agent (as a run's); it returns the first attempt's error (nil when the task is
// canceled or was over, or when the cancel is being retried).
func (c *taskCancels) cancelTask(ctx context.Context, owner string, a *Agent, taskID string, log *slog.Logger, what string) error {
	rep := c.confirm.Cancel(ctx, a.Name, taskID, owner, c.ownerCancel(owner, a, cancelFunc(a.Client)), c.report(log, what))
	if rep.Result == cancel.ResultPending {
		log.Info(what+": not confirmed yet, retrying in the background", "agent", a.Name, "task_id", taskID, "err", errString(rep.Err))
		return nil
	}
	return rep.Err
}

// ownerCancel is fn with owner's credentials for agent added to every attempt, the
// confirmer's background retries included (each attempt reads the token afresh, so a
// refreshed one is used).
func (c *taskCancels) ownerCancel(owner string, a *Agent, fn cancel.Func) cancel.Func {
	if c.signIn == nil {
		return fn
	}
	return func(ctx context.Context, id string) error {
		return fn(ownerCtx(ctx, c.signIn, owner, a), id)
	}
}

// resume continues p's cancel of a task of agent a after a restart. The owner's
// credentials are read afresh at each attempt (a refreshed token is used). When the owner
// has none for the agent any more (they signed out, or the cancel was recorded before
// owners were), the cancel goes without; an agent that requires them refuses it, and the
// cancel ends failed, as it would have before: that is logged at warn, without the
// principal or any token.
func (c *taskCancels) resume(p store.PendingCancel, a *Agent, log *slog.Logger) {
	send := cancelFunc(a.Client)
	var bare atomic.Bool // the last attempt went without the owner's credentials
	fn := func(ctx context.Context, id string) error {
		actx := ownerCtx(ctx, c.signIn, p.Owner, a)
		// A2ASignIn.Authorize returns ctx itself when it attaches nothing.
		bare.Store(actx == ctx)
		return send(actx, id)
	}
	report := c.report(log, "cancel continued after a restart")
	done := func(rep cancel.Report) {
		report(rep)
		if rep.Result == cancel.ResultFailed && errors.Is(rep.Err, subagent.ErrAuth) {
			log.Warn("cancel continued after a restart refused by the agent's authentication; the task may go on",
				"agent", a.Name, "task_id", p.TaskID, "owner_known", p.Owner != "", "sent_with_owner_credentials", !bare.Load())
		}
	}
	c.confirm.Resume(a.Name, p.TaskID, p.Owner, fn, p.Since, done)
}

// awaitPending waits for the CancelTask calls still being confirmed in the background: until
// ctx's deadline when it has one that is not spent yet, otherwise one cancel timeout (ctx
// may have been spent by the runs already, or have no deadline). Those still unconfirmed
// then are abandoned (logged and counted).
func (c *taskCancels) awaitPending(ctx context.Context) {
	wctx, stop := context.WithTimeout(context.WithoutCancel(ctx), c.timeout)
	defer stop()
	if _, ok := ctx.Deadline(); ok && ctx.Err() == nil {
		wctx, stop = context.WithCancel(ctx)
		defer stop()
	}
	_ = c.confirm.Wait(wctx)
	c.confirm.Close()
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
