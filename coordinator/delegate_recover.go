package coordinator

import (
	"context"
	"time"

	"github.com/baton-dev/baton/bridge"
	"github.com/baton-dev/baton/cancel"
	"github.com/baton-dev/baton/hitl"
	"github.com/baton-dev/baton/store"
	"github.com/baton-dev/baton/subagent"
)

// recoverTask is for an A2A interrupt being answered: it reads the task first. A task still
// waiting for input gets the answer (nil is returned). A task that has moved on was answered
// already, by a resume whose recording failed: its outcome is recovered from the agent
// instead of sending the answer again, which the agent would refuse (invalid_transition). A
// task still working is followed until it ends or waits again, within the agent's timeout.
func recoverTask(ctx context.Context, r *Run, a *Agent, callID string, in store.Interrupt, h handle) *toolOutcome {
	read := func() (*subagent.Result, error) {
		gctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		return a.Client.GetTask(agentCtx(gctx, r, a), h.TaskID)
	}
	got, err := read()
	if err != nil || got.State.Interrupted() {
		// Waiting (the normal case), or unknown: the continuation decides and reports.
		return nil
	}
	r.log.Info("resume: the task has moved on since its question; recovering its outcome", "agent", a.Name, "task_id", h.TaskID, "state", got.State)
	cancelTask := func() error {
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), r.e.cfg.CancelTimeout)
		defer cancel()
		return a.Client.Cancel(agentCtx(cctx, r, a), h.TaskID)
	}
	deadline := time.Now().Add(a.Timeout)
	for !got.State.Terminal() && !got.State.Interrupted() {
		if time.Now().After(deadline) {
			o := taggedOutcome(bridge.TagTimeout, bridge.TimeoutCancel(h.TaskID, a.Timeout, cancelTask()))
			return &o
		}
		t := time.NewTimer(recoverPoll)
		select {
		case <-ctx.Done():
			// The run is cancelled: so is the task it was following.
			t.Stop()
			r.log.Info("resume cancelled while following a task", "agent", a.Name, "task_id", h.TaskID, "err", errString(cancelTask()))
			return &toolOutcome{}
		case <-t.C:
		}
		if got, err = read(); err != nil {
			o := taggedOutcome(bridge.TagUnreachable, bridge.Unreachable(a.Name))
			return &o
		}
	}
	r.e.rememberTask(r.ThreadID, h.TaskID, taskRef{agent: a.Name, contextID: got.ContextID, state: got.State})
	if got.State.Interrupted() {
		// The agent took the earlier answer and asks again: a new question.
		var next store.Interrupt
		if got.State == subagent.StateAuthRequired {
			next = hitl.A2AAuth(r.e.hitlOptions(), a.Name, got.TaskID, got.ContextID, bridge.UntrustedN(got.Text, 4000))
		} else {
			next = hitl.A2AInput(r.e.hitlOptions(), a.Name, got.TaskID, got.ContextID, bridge.UntrustedN(got.Text, 4000))
		}
		next.ToolCallID, next.SubagentRunID = callID, in.SubagentRunID
		next.Handle = mustJSON(handle{Agent: a.Name, TaskID: got.TaskID, ContextID: got.ContextID})
		return &toolOutcome{interrupts: []store.Interrupt{next}}
	}
	o := a2aOutcome(got)
	return &o
}

// confirmingCanceller is a client that tells a task canceled by the call from one that had
// already ended (subagent.Agent).
type confirmingCanceller interface {
	CancelConfirm(ctx context.Context, taskID string) (alreadyTerminal bool, err error)
}

// onceCanceller makes one cancel attempt without retries (subagent.Agent): the engine's
// Confirmer retries with its own pacing, so that no per-agent slot is held during a
// backoff (a mass disconnect would otherwise queue behind sleeping attempts).
type onceCanceller interface {
	CancelOnce(ctx context.Context, taskID string) (alreadyTerminal bool, err error)
}

// cancelFunc is the cancel function of a task of client, for the run's cancel scope.
func cancelFunc(client Delegate) cancel.Func {
	attempt := func(ctx context.Context, taskID string) (bool, error) { return false, client.Cancel(ctx, taskID) }
	if oc, ok := client.(onceCanceller); ok {
		attempt = oc.CancelOnce
	} else if cc, ok := client.(confirmingCanceller); ok {
		attempt = cc.CancelConfirm
	}
	return func(ctx context.Context, taskID string) error {
		terminal, err := attempt(ctx, taskID)
		if err == nil && terminal {
			return cancel.ErrAlreadyTerminal
		}
		return err
	}
}
