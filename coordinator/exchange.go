package coordinator

import (
	"context"
	"errors"
	"slices"
	"time"

	"github.com/baton-dev/baton/agui"
	"github.com/baton-dev/baton/cancel"
	"github.com/baton-dev/baton/subagent"
	"go.opentelemetry.io/otel/trace"
)

// exchange is send, or with follow the following of a task that this run started before
// it was taken over (req names the task; nothing is sent to it: takeover.go). The run
// waits here while the sub-agent works; the setup and the ends are functions of their own.
func exchange(ctx context.Context, r *Run, t *toolset, a *Agent, callID, subID string, req subagent.Request, follow bool) toolOutcome {
	d := startExchange(ctx, r, a, callID, subID, req, follow)
	defer d.finish()
	timer := time.NewTimer(a.Timeout)
	defer timer.Stop()
	select {
	case s := <-d.out:
		return delegationOutcome(r, d, req, callID, s.res, s.err, t)
	case <-ctx.Done():
		return d.cancelled(ctx)
	case <-timer.C:
		return delegationTimedOut(r, d, a, d.stopSend, d.out, &d.detached)
	}
}

// startExchange announces the sub-agent and starts its A2A exchange on a goroutine of its
// own, which delivers the end on d.out.
func startExchange(ctx context.Context, r *Run, a *Agent, callID, subID string, req subagent.Request, follow bool) *subagentCall {
	if subID == "" {
		subID = newID("sa")
	}
	req.Depth = depthOf(r)
	if !follow {
		req.Budget = remainingBudget(ctx, r)
	}
	d := &subagentCall{r: r, agent: a, subID: subID, msgID: newID("sa-msg"), callID: callID, item: r.scope.Track(cancel.KindA2ATask, a.Name),
		out: make(chan sent, 1)}
	var sendCtx context.Context
	sendCtx, d.stopSend = context.WithCancel(context.WithoutCancel(ctx))
	if req.TaskID != "" {
		d.onTask(req.TaskID, req.ContextID)
	}
	description, _ := a.describe()
	if !follow || !slices.Contains(r.seq.Open().Subagents, d.subID) {
		r.emit(&agui.SubagentStarted{SubagentRunID: d.subID, Name: a.Name, Description: description, ParentToolCallID: callID})
	}

	spanCtx, span, spanParent := r.trace.delegationSpan(sendCtx, a)
	go func() {
		obs := subagent.Observer{Task: d.onTask, Text: d.onText}
		actx := agentCtx(spanCtx, r, a)
		var res *subagent.Result
		var err error
		if follow {
			res, err = followRemote(actx, a, req.TaskID, req.ContextID, obs)
		} else {
			res, err = a.Client.Send(actx, req, obs)
		}
		d.sendEnded(res, err, span, spanParent)
	}()
	return d
}

// sendEnded ends the exchange's span and hands its end to the run. It is a function of its
// own so that what it needs is not on the frame in which the goroutine waits while the
// agent works (design/streams.md, "Per-run goroutines and stacks").
func (d *subagentCall) sendEnded(res *subagent.Result, err error, span trace.Span, spanParent trace.SpanID) {
	d.r.trace.endDelegationSpan(span, spanParent, d.agent, res, err)
	if err == nil && res != nil && res.State.Terminal() || err != nil && subagent.TaskIDOf(err) == "" && d.taskIDKnown() == "" {
		// Nothing left to cancel remotely; a held cancel need not wait for an id.
		d.item.Release()
	}
	d.out <- sent{res, err}
}

// finish releases the exchange's request and its piece of the run's scope, unless the
// request outlives the call (detached: a timeout before the task id was known; the
// background goroutine releases it then).
func (d *subagentCall) finish() {
	if !d.detached {
		d.stopSend()
		d.item.Release()
	}
}

// cancelled ends the exchange of a run that is cancelled or handed off.
func (d *subagentCall) cancelled(ctx context.Context) toolOutcome {
	if errors.Is(context.Cause(ctx), ErrHandoff) {
		// Handed to another replica, which follows the task: it is not cancelled, only
		// no longer followed from here.
		d.stopSend()
		<-d.out
		return toolOutcome{}
	}
	// The run's scope cancels the task (in parallel with the rest of the run); the
	// request stays open until that is settled, so a late task id still arrives.
	<-d.item.Done()
	d.stopSend()
	<-d.out
	d.close(&agui.SubagentError{SubagentRunID: d.subID, Code: "canceled", Message: "The run was cancelled."})
	return toolOutcome{}
}
