package subagent

import sdk "github.com/a2aproject/a2a-go/v2/a2a"

// State is the state of a delegation, protocol-version neutral.
type State string

// States of a delegation: the A2A task states plus [StateMessage] for a direct reply.
const (
	StateSubmitted     State = "submitted"
	StateWorking       State = "working"
	StateCompleted     State = "completed"
	StateFailed        State = "failed"
	StateRejected      State = "rejected"
	StateCanceled      State = "canceled"
	StateInputRequired State = "input-required"
	StateAuthRequired  State = "auth-required"
	// StateMessage is a direct Message reply: the agent answered without a task.
	StateMessage State = "message"
)

// Terminal reports whether nothing more will happen: completed, failed, rejected, canceled
// and a direct message reply.
func (s State) Terminal() bool {
	switch s {
	case StateCompleted, StateFailed, StateRejected, StateCanceled, StateMessage:
		return true
	}
	return false
}

// Interrupted reports whether the task waits for the caller (input-required,
// auth-required).
func (s State) Interrupted() bool {
	return s == StateInputRequired || s == StateAuthRequired
}

// stateOf maps an SDK task state; "" for unspecified or unknown states.
func stateOf(s sdk.TaskState) State {
	switch s {
	case sdk.TaskStateSubmitted:
		return StateSubmitted
	case sdk.TaskStateWorking:
		return StateWorking
	case sdk.TaskStateCompleted:
		return StateCompleted
	case sdk.TaskStateFailed:
		return StateFailed
	case sdk.TaskStateRejected:
		return StateRejected
	case sdk.TaskStateCanceled:
		return StateCanceled
	case sdk.TaskStateInputRequired:
		return StateInputRequired
	case sdk.TaskStateAuthRequired:
		return StateAuthRequired
	}
	return ""
}
