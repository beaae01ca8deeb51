package coordinator

import (
	"github.com/baton-dev/baton/agui"
	"github.com/baton-dev/baton/bridge"
	"github.com/baton-dev/baton/subagent"
)

// delegationTimedOut ends a delegation whose agent did not finish within its timeout. A
// task whose id is known is cancelled (and the cancel awaited) before the run goes on; a
// request whose agent never named its task is left open in the background (detached) until
// the cancel deadline, so that a late task id still gets its CancelTask.
func delegationTimedOut(r *Run, d *subagentCall, a *Agent, stopSend func(), out <-chan sent, detached *bool) toolOutcome {
	if d.taskIDKnown() == "" {
		// The agent has not named its task (it may have sent headers and nothing
		// else): the timeout is the time the run waits, so the run goes on now. The
		// request stays open in the background until the cancel deadline, so that a
		// late task id still gets its CancelTask.
		*detached = true
		go func() {
			defer d.item.Release()
			r.logCancel(d.item.CancelNow())
			stopSend()
			<-out
		}()
		d.close(&agui.SubagentError{SubagentRunID: d.subID, Code: "timeout", Message: "The sub-agent did not finish in time; it never named its task, so the cancellation is not confirmed."})
		return taggedOutcome(bridge.TagTimeout, bridge.TimeoutCancel("", a.Timeout, nil))
	}
	rep := d.item.CancelNow()
	r.logCancel(rep)
	taskID := rep.ID
	stopSend()
	<-out
	msg := "The sub-agent did not finish in time; its task was cancelled."
	if rep.Err != nil {
		msg = "The sub-agent did not finish in time; the cancellation of its task was not confirmed."
	}
	d.close(&agui.SubagentError{SubagentRunID: d.subID, Code: "timeout", Message: msg})
	if taskID != "" && rep.Err == nil {
		r.e.rememberTask(r.ThreadID, taskID, taskRef{agent: a.Name, state: subagent.StateCanceled})
	}
	return taggedOutcome(bridge.TagTimeout, bridge.TimeoutCancel(taskID, a.Timeout, rep.Err))
}
