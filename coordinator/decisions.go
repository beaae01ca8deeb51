package coordinator

// Decisions: how the run loop applies the failure policy (failure.go, policy.go, detect.go,
// loop.go, guard.go, outcome.go).
//
// Design note: detectors run at three points of a turn (before the LLM call, after its
// response, after the tool results) and only report failures. Every failure goes through
// one place, Run.decide: the policy's decision, its baton.failure event, a log line, the
// retry metric. When one step meets several failures each is decided and reported, and
// the run follows the most severe decision (MostSevere): retry and narrow_scope let it go
// on, ask_user suspends it with a "continue?" interrupt (hitl.Continue, next to any tool
// interrupts of the same step), handoff and stop end it with a final message. Calls are
// checked before they are sent (dispatch.go), in order: the loop detector's prediction first, then the
// guard (policy lists, budget, rate limits); a refused call's result is its structured
// refusal, streamed like any result, and the failure it reveals is found by the same
// result detector as the others.

import (
	"github.com/baton-dev/baton/failure"
)

// decidedError ends a model turn with the policy's terminal decision about a provider
// failure (its baton.failure event is already out).
type decidedError struct {
	d   failure.Decision
	f   failure.Failure
	err error
}

func (e *decidedError) Error() string { return string(e.d.Kind) + ": " + string(e.d.Action) }
func (e *decidedError) Unwrap() error { return e.err }

// failureRef is the failure a "continue?" interrupt asks about, kept in its handle: on a
// resume that stops, it describes the partial result.
type failureRef struct {
	Kind        failure.Kind `json:"kind"`
	Tool        string       `json:"tool,omitempty"`
	Attempt     int          `json:"attempt"`
	Explanation string       `json:"explanation"`
}

// stopDecision is the decision of a user who answered "continue?" with no.
func (f *failureRef) stopDecision() failure.Decision {
	return failure.Decision{Kind: f.Kind, Tool: f.Tool, Action: failure.ActionStop, Attempt: f.Attempt,
		Explanation: f.Explanation + " You chose to stop here."}
}
