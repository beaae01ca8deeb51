package a2aserver

import (
	"errors"
	"fmt"
	"math"

	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/a2aproject/a2a-go/v2/a2asrv"
)

// Nesting (contract §9c): a Baton calling another sends its run's depth in the message
// metadata; the run started here is one level deeper. The engine refuses a run deeper
// than its server.max_depth (ErrTooDeep), and a run that would open a thread beyond the
// principal's cap (ErrTooManyThreads): both are answered with a rejected task that says
// why, which a calling Baton shows its model as [REJECTED], never as a failure to reach
// this server.

// depthKey is the message metadata key of the caller's depth (a2a.DepthKey of Baton's
// client).
const depthKey = "baton/depth"

// maxCallerDepth bounds the depth a caller may claim: far beyond any sensible
// server.max_depth, and small enough that one more never overflows.
const maxCallerDepth = 1 << 16

// Errors an Engine's Start reports for a run it refuses by policy.
var (
	// ErrTooDeep: the run would be deeper than server.max_depth.
	ErrTooDeep = errors.New("a2aserver: nesting too deep")
	// ErrTooManyThreads: the run would open a thread beyond server.max_threads_per_principal.
	ErrTooManyThreads = errors.New("a2aserver: too many threads")
)

// runDepth is the depth of the run m starts: one more than the caller's baton/depth, 0
// without one (the engine counts that as a run a user started). A depth that is not a
// whole number from 0 to maxCallerDepth is an invalid request.
func runDepth(m *a2a.Message) (int, error) {
	if m == nil {
		return 0, nil
	}
	v, ok := m.Metadata[depthKey]
	if !ok || v == nil {
		return 0, nil
	}
	f, isNum := v.(float64)
	if !isNum || f != math.Trunc(f) || f < 0 || f > maxCallerDepth {
		return 0, fmt.Errorf("%w: metadata %q must be a whole number from 0 to %d", a2a.ErrInvalidParams, depthKey, maxCallerDepth)
	}
	return int(f) + 1, nil
}

// refusal is the answer to a run the engine refused by policy (err wraps ErrTooDeep or
// ErrTooManyThreads, or is a *BudgetExceededError): the task rejected with the reason, which
// a calling Baton's model reads as [REJECTED] with these words; nil for any other error.
func refusal(ec *a2asrv.ExecutorContext, err error) a2a.Event {
	var why string
	var budget *BudgetExceededError
	switch {
	case errors.As(err, &budget):
		why = "Refused: " + budget.Message
	case errors.Is(err, ErrTooDeep):
		why = "Refused: this request is nested too deeply (agents calling agents beyond this server's server.max_depth). Answer without delegating it further."
	case errors.Is(err, ErrTooManyThreads):
		why = "Refused: this caller has the most conversations (threads) this server allows (server.max_threads_per_principal). " +
			"Free some by deleting old threads (DELETE /agui/threads/{threadId}), or ask the operator to set server.thread_retention so that idle threads expire."
	default:
		return nil
	}
	if ec.StoredTask != nil {
		return status(ec, a2a.TaskStateRejected, why)
	}
	task := a2a.NewSubmittedTask(ec, ec.Message)
	task.Status = a2a.TaskStatus{State: a2a.TaskStateRejected, Message: a2a.NewMessageForTask(a2a.MessageRoleAgent, ec, a2a.NewTextPart(why))}
	return task
}
