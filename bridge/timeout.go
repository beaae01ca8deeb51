package bridge

import (
	"errors"
	"fmt"
	"time"

	"github.com/baton-dev/baton/subagent"
)

// TimeoutCancel renders "[TIMEOUT:task_id=<id>]\n…" for a delegation whose timeout fired,
// saying what became of the cancel the coordinator sent, so that the model never reads
// "cancelled" for a task that may still run: cancelErr is the outcome of the CancelTask
// (nil: the agent confirmed), and an empty taskID means the agent never named its task.
func TimeoutCancel(taskID string, after time.Duration, cancelErr error) string {
	within := "in time"
	if after > 0 {
		within = "within " + roundDuration(after).String()
	}
	var what string
	switch {
	case taskID == "":
		what = "the agent had not named its task, so no cancel could be sent; the request was dropped (cancellation not confirmed)."
	case cancelErr == nil:
		what = "the coordinator cancelled it and the agent confirmed the cancellation."
	case errors.Is(cancelErr, subagent.ErrNotCancelable):
		what = "the coordinator asked the agent to cancel it, but the agent answered that the task cannot be canceled (TaskNotCancelable): it may still be running."
	default:
		what = "the coordinator asked the agent to cancel it, but the cancellation was not confirmed (the agent did not answer in time or could not be reached): it may still be running."
	}
	return fmt.Sprintf("[%s:%s]\nthe agent did not finish %s; %s "+
		"Do not continue this task: start a new one with a narrower request, or try another agent.",
		TagTimeout, TaskArg(taskID), within, what)
}
