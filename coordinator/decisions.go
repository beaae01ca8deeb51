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
	"context"
	"slices"

	"github.com/baton-dev/baton/failure"
	"github.com/baton-dev/baton/hitl"
	"github.com/baton-dev/baton/llm"
	"github.com/baton-dev/baton/store"
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

// decide asks the policy about f and reports the decision: a baton.failure event, a log
// line, and the retry metric.
func (r *Run) decide(f failure.Failure) failure.Decision {
	d := r.e.cfg.Policy.Decide(f, &r.fs)
	r.trace.decision(d)
	r.emit(FailureEvent(d))
	r.log.Warn("failure handled", "kind", d.Kind, "action", d.Action, "attempt", d.Attempt,
		"tool", d.Tool, "code", f.Code, "wait_ms", d.Wait.Milliseconds(), "err", errString(f.Err))
	if m := r.e.cfg.Metrics; m != nil && d.Action == failure.ActionRetry {
		m.Retry(string(d.Kind))
	}
	return d
}

// handle decides each of fails (one baton.failure event each) and follows the most severe
// decision (see conclude). done is false when the run goes on: no failure, or retry or
// narrow_scope at most. open are the interrupts of calls that wait for the user; the
// caller still raises them when the run goes on.
func (r *Run) handle(ctx context.Context, conv []llm.Message, fails []failure.Failure, open []store.Interrupt) (done bool, reason EndReason) {
	if len(fails) == 0 {
		return false, EndReason{}
	}
	ds := make([]failure.Decision, len(fails))
	for i, f := range fails {
		ds[i] = r.decide(f)
	}
	d, _ := failure.MostSevere(ds)
	if !d.Action.Terminal() {
		return false, EndReason{}
	}
	return true, r.conclude(ctx, conv, d, fails[slices.Index(ds, d)], open)
}

// conclude ends the run on the terminal decision d about f. ask_user suspends the run
// (conv, counters and lessons) with a "continue?" interrupt next to open (DESIGN §9);
// handoff and stop end it with a final assistant message, baton.handoff or baton.partial,
// and RUN_FINISHED with a result (DESIGN §8), abandoning the work parked on open.
func (r *Run) conclude(ctx context.Context, conv []llm.Message, d failure.Decision, f failure.Failure, open []store.Interrupt) EndReason {
	if d.Action != failure.ActionAskUser {
		if len(open) > 0 {
			r.e.abandon(context.WithoutCancel(ctx), r.owner, r.ThreadID, open)
		}
		return r.finishDecision(d)
	}
	in := hitl.Continue(r.e.hitlOptions(), ContinueQuestion(d), string(d.Kind))
	explanation := f.Explanation
	if explanation == "" {
		explanation = d.Explanation
	}
	in.Handle = mustJSON(handle{Failure: &failureRef{Kind: d.Kind, Tool: d.Tool, Attempt: d.Attempt, Explanation: explanation}})
	all := append(slices.Clone(open), in)
	if err := r.dur.suspend(ctx, conv, all); err != nil {
		r.log.Error("save suspension", "err", err)
		r.seq.Fail("STORE_UNAVAILABLE", "The coordinator could not save this conversation's question for later. Please try again.")
		return ended(OutcomeError, "store")
	}
	r.dur.finishInterrupted(all)
	return ended(OutcomeInterrupt, string(d.Kind))
}

// finishDecision ends the run on a handoff or a stop.
func (r *Run) finishDecision(d failure.Decision) EndReason {
	for _, ev := range TerminalEvents(TerminalName(d.Action), HandoffFor(d), newID("msg")) {
		r.emit(ev)
	}
	// AG-UI's outcomes are success, interrupt and cancelled, and a client refuses any other
	// type: a run handed back to the user sends none rather than claim success, and its
	// result says how it ended ({stopped: kind, action: handoff|stop}).
	r.seq.Finish(r.ThreadID, r.RunID, nil, RunResult(d))
	if d.Action == failure.ActionHandoff {
		return ended(OutcomeHandoff, string(d.Kind))
	}
	return ended(OutcomeStopped, string(d.Kind))
}

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
