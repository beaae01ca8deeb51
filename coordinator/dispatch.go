package coordinator

// Tool dispatch: one turn's backend calls screened (loop prediction, declined calls, the
// guard, approvals) and run, concurrently when there are several, each result streamed as
// soon as its call ends.

import (
	"context"
	"sync"

	"github.com/baton-dev/baton/failure"
	"github.com/baton-dev/baton/llm"
	"github.com/baton-dev/baton/store"
)

// toolCalls runs a run's backend tool calls: it screens each turn's calls (loop
// prediction, declined calls, the guard, approvals), runs them (sub-agent delegations,
// MCP calls, ask_user) and delivers the user's answers to the calls that were suspended.
// The guard, failure state, journal and event stream it works with are the run's, shared
// with the loop and the suspension: it reaches them through run.
type toolCalls struct {
	run *Run
}

// newGuard builds the run's guard and hides from the model the tools the policy denies.
// Denied tools stay governed, so that a call to one is refused as policy_deny rather than
// as an unknown action.
func (tc *toolCalls) newGuard(t *toolset) *failure.Guard {
	r := tc.run
	var agents, governed, always []string
	for _, name := range t.backend {
		switch {
		case t.agents[name] != nil:
			agents = append(agents, name)
			governed = append(governed, name)
		case name == askUserTool && !t.hasMCP(name):
			always = append(always, name)
		default:
			governed = append(governed, name)
		}
	}
	for name := range t.frontend {
		always = append(always, name)
	}
	g := failure.NewGuard(failure.GuardConfig{
		SharedPolicy: r.meter().guardPolicy(), Limiter: r.e.limiter,
		Agents: agents, Tools: governed, Always: always,
		Used: &r.fs.Budget, Now: r.e.cfg.Now,
	})
	t.restrict(g.Permitted)
	return g
}

// dispatch runs one turn's backend calls. Each call is checked first, in order: a call
// that would repeat a loop (the loop detector's prediction) or that the guard refuses is
// not sent, and its refusal, streamed at once, is its result. The other calls run
// concurrently; each result is streamed as TOOL_CALL_RESULT as soon as its call ends.
// sent tells which calls went out; predicted holds the loop_detected failures.
func (tc *toolCalls) dispatch(ctx context.Context, t *toolset, calls []llm.ToolCall) (outcomes []toolOutcome, sent []bool, predicted []failure.Failure) {
	outcomes = make([]toolOutcome, len(calls))
	sent = make([]bool, len(calls))
	run, predicted := tc.screen(ctx, t, calls, outcomes, sent)
	if len(run) == 1 {
		// One call (the usual turn) runs on the run's goroutine: a goroutine per call
		// only when calls run in parallel.
		tc.execCall(ctx, t, calls, outcomes, run[0])
		return outcomes, sent, predicted
	}
	var wg sync.WaitGroup
	for _, i := range run {
		wg.Go(func() { tc.execCall(ctx, t, calls, outcomes, i) })
	}
	wg.Wait()
	return outcomes, sent, predicted
}

// screen refuses the calls that must not be sent (a predicted loop, a declined call, the
// guard) and holds the ones that need approval; it returns the indexes of the calls to
// run.
func (tc *toolCalls) screen(ctx context.Context, t *toolset, calls []llm.ToolCall, outcomes []toolOutcome, sent []bool) (run []int, predicted []failure.Failure) {
	r := tc.run
	for i, c := range calls {
		if r.loops.Predict(c) {
			predicted = append(predicted, *r.loops.PredictedLoop(c))
			outcomes[i] = tc.traceRefusal(ctx, t, c, signalOutcome(failure.LoopSignal(c, nextActions(r.guard, t, c.Name))))
			r.emitResult(ctx, c.ID, outcomes[i])
			continue
		}
		if refusal, declined := r.dur.declinedRefusal(t, c); declined {
			outcomes[i] = tc.traceRefusal(ctx, t, c, signalOutcome(refusal))
			r.emitResult(ctx, c.ID, outcomes[i])
			continue
		}
		if refusal, ok := r.guard.CheckSignal(c.Name); !ok {
			outcomes[i] = tc.traceRefusal(ctx, t, c, signalOutcome(refusal))
			r.emitResult(ctx, c.ID, outcomes[i])
			continue
		}
		if refusal, refused := depthRefusal(r, t, c); refused {
			outcomes[i] = tc.traceRefusal(ctx, t, c, refusal)
			r.emitResult(ctx, c.ID, outcomes[i])
			continue
		}
		if n, soft := r.loops.Observe(c); soft {
			r.log.Warn("the same tool call repeats", "tool", c.Name, "count", n)
		}
		if r.e.cfg.Approvals.needsApproval(t, c) {
			// Not sent: the run ends with the question once the calls that need no
			// approval have run (afterTools).
			outcomes[i] = toolOutcome{interrupts: []store.Interrupt{r.dur.askApproval(t, c, false)}}
			continue
		}
		sent[i] = true
		run = append(run, i)
	}
	return run, predicted
}

// execCall runs calls[i] and streams its result.
func (tc *toolCalls) execCall(ctx context.Context, t *toolset, calls []llm.ToolCall, outcomes []toolOutcome, i int) {
	r := tc.run
	c := &calls[i]
	// No tool call (MCP, A2A) while this replica cannot be sure it still owns the run:
	// it waits for the lease, or stops (the run moved, or was cancelled).
	if err := r.dur.mayAct(ctx); err != nil {
		return
	}
	outcomes[i] = r.trace.tool(ctx, t, *c, func(ctx context.Context) toolOutcome {
		return r.dur.journaled(ctx, t, *c, "", func(ctx context.Context) toolOutcome { return tc.runTool(ctx, t, *c) })
	})
	r.emitResult(ctx, c.ID, outcomes[i])
}

// traceRefusal records a call the coordinator refused without sending it (a predicted loop,
// a policy refusal): its execute_tool span carries the refusal's tag and the decision.
func (tc *toolCalls) traceRefusal(ctx context.Context, t *toolset, c llm.ToolCall, refusal toolOutcome) toolOutcome {
	r := tc.run
	r.dur.step(store.StepRefusal, c.Name, c.ID, store.StepEnd{Outcome: "refused", Tag: refusal.Tag, FailureKind: refusal.Code})
	return r.trace.toolCall(ctx, t, c, func(context.Context) toolOutcome { return refusal }, false)
}
