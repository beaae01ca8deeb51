package coordinator

// Tool dispatch: one turn's backend calls screened (loop prediction, declined calls, the
// guard, approvals) and run through the run's chain (package dispatch: fence → trace →
// journal → validate, then the handler of the tool's kind), concurrently when there are
// several, each result streamed as soon as its call ends.

import (
	"context"
	"encoding/json"
	"sync"

	"github.com/baton-dev/baton/dispatch"
	"github.com/baton-dev/baton/failure"
	"github.com/baton-dev/baton/llm"
	"github.com/baton-dev/baton/store"
)

// newGuard builds the run's guard and hides from the model the tools the policy denies.
// Denied tools stay governed, so that a call to one is refused as policy_deny rather than
// as an unknown action.
func newGuard(r *Run, t *toolset) *failure.Guard {
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
		SharedPolicy: guardPolicy(r), Limiter: r.e.limiter,
		Agents: agents, Tools: governed, Always: always,
		Used: &r.fs.Budget, Now: r.e.cfg.Now,
	})
	t.restrict(g.Permitted)
	return g
}

// runCalls runs one turn's backend calls. Each call is checked first, in order: a call
// that would repeat a loop (the loop detector's prediction) or that the guard refuses is
// not sent, and its refusal, streamed at once, is its result. The other calls run
// concurrently; each result is streamed as TOOL_CALL_RESULT as soon as its call ends.
// sent tells which calls went out; predicted holds the loop_detected failures.
func runCalls(ctx context.Context, r *Run, t *toolset, calls []llm.ToolCall) (outcomes []toolOutcome, sent []bool, predicted []failure.Failure) {
	outcomes = make([]toolOutcome, len(calls))
	sent = make([]bool, len(calls))
	run, predicted := screen(ctx, r, t, calls, outcomes, sent)
	if len(run) == 1 {
		// One call (the usual turn) runs on the run's goroutine: a goroutine per call
		// only when calls run in parallel.
		execCall(ctx, r, calls, outcomes, run[0])
		return outcomes, sent, predicted
	}
	var wg sync.WaitGroup
	for _, i := range run {
		wg.Go(func() { execCall(ctx, r, calls, outcomes, i) })
	}
	wg.Wait()
	return outcomes, sent, predicted
}

// screen refuses the calls that must not be sent (a predicted loop, a declined call, the
// guard) and holds the ones that need approval; it returns the indexes of the calls to
// run.
func screen(ctx context.Context, r *Run, t *toolset, calls []llm.ToolCall, outcomes []toolOutcome, sent []bool) (run []int, predicted []failure.Failure) {
	for i, c := range calls {
		if r.loops.Predict(c) {
			predicted = append(predicted, *r.loops.PredictedLoop(c))
			outcomes[i] = traceRefusal(ctx, r, t, c, signalOutcome(failure.LoopSignal(c, nextActions(r.guard, t, c.Name))))
			r.emitResult(ctx, c.ID, outcomes[i])
			continue
		}
		if refusal, declined := declinedRefusal(r, t, c); declined {
			outcomes[i] = traceRefusal(ctx, r, t, c, signalOutcome(refusal))
			r.emitResult(ctx, c.ID, outcomes[i])
			continue
		}
		if refusal, ok := r.guard.CheckSignal(c.Name); !ok {
			outcomes[i] = traceRefusal(ctx, r, t, c, signalOutcome(refusal))
			r.emitResult(ctx, c.ID, outcomes[i])
			continue
		}
		if refusal, refused := depthRefusal(r, t, c); refused {
			outcomes[i] = traceRefusal(ctx, r, t, c, refusal)
			r.emitResult(ctx, c.ID, outcomes[i])
			continue
		}
		if n, soft := r.loops.Observe(c); soft {
			r.log.Warn("the same tool call repeats", "tool", c.Name, "count", n)
		}
		if r.e.cfg.Approvals.needsApproval(t, c) {
			// Not sent: the run ends with the question once the calls that need no
			// approval have run (afterTools).
			outcomes[i] = toolOutcome{interrupts: []store.Interrupt{askApproval(r, t, c, false)}}
			continue
		}
		sent[i] = true
		run = append(run, i)
	}
	return run, predicted
}

// execCall runs calls[i] through the run's chain and streams its result. A call the
// chain did not run (the fence stopped it: the run moved, or was cancelled) has no result.
func execCall(ctx context.Context, r *Run, calls []llm.ToolCall, outcomes []toolOutcome, i int) {
	c := calls[i]
	out, err := callChain.Run(ctx, chainRun{run: r, tools: r.tools}, dispatch.Call{ID: c.ID, Name: c.Name, Arguments: c.Arguments})
	if err != nil {
		return
	}
	outcomes[i] = *out
	r.emitResult(ctx, c.ID, *out)
}

// continueCall runs fn as call c of the run through the run's chain, to fn rather than the
// tool's handler and without the steps named in skip (dispatch.Chain.RunTo): for a call
// that is not a new call of the model's but goes out all the same (one a takeover follows
// or recovers, the user's answer to a suspended call). ran is false when the chain did
// not run it (the fence stopped it: the run moved, or ended while it waited for its
// lease); the call then has no result to stream.
func continueCall(ctx context.Context, r *Run, c llm.ToolCall, fn func(context.Context) toolOutcome, skip ...string) (out toolOutcome, ran bool) {
	o, err := callChain.RunTo(ctx, chainRun{run: r, tools: r.tools}, dispatch.Call{ID: c.ID, Name: c.Name, Arguments: c.Arguments},
		func(ctx context.Context, _ chainRun, _ dispatch.Call) (*toolOutcome, error) { return ptr(fn(ctx)), nil }, skip...)
	if err != nil {
		return toolOutcome{}, false
	}
	return *o, true
}

// traceRefusal records a call the coordinator refused without sending it (a predicted loop,
// a policy refusal): its execute_tool span carries the refusal's tag and the decision.
func traceRefusal(ctx context.Context, r *Run, t *toolset, c llm.ToolCall, refusal toolOutcome) toolOutcome {
	r.dur.step(store.StepRefusal, c.Name, c.ID, store.StepEnd{Outcome: "refused", Tag: refusal.Tag, FailureKind: refusal.Code})
	return r.trace.toolCall(ctx, t, c, func(context.Context) toolOutcome { return refusal }, false)
}

// armTools prepares the run for the calls of toolset t: its guard (which hides from the
// model the tools the policy denies), and t for the chain every one of its calls goes
// through (callChain, which every run shares).
func armTools(r *Run, t *toolset) {
	r.guard = newGuard(r, t)
	r.tools = t
}

// callChain is the chain of every run's backend calls (newCallChain). It is built once:
// each call is given its run and toolset (chainRun), so that an open run holds no chain,
// router or handlers of its own.
var callChain = newCallChain()

// newCallChain builds the chain of the runs' backend calls: the run's fencing, tracing and
// journal (chainSteps), the arguments' validation, then a handler per tool kind. Its
// outcome is a pointer: a delegation's frames stay on the run's stack while it waits, and
// an outcome returned by value through each of them would double the stack of every open
// run (design/dispatch.md).
func newCallChain() *dispatch.Chain[chainRun, *toolOutcome] {
	route := &dispatch.Router[chainRun, *toolOutcome]{
		Kind: func(s chainRun, name string) dispatch.Kind { return s.tools.kind(name) },
		Handlers: [dispatch.Kinds]dispatch.Handler[chainRun, *toolOutcome]{
			dispatch.Agent: func(ctx context.Context, s chainRun, c dispatch.Call) (*toolOutcome, error) {
				return ptr(delegate(ctx, s.run, s.tools, s.tools.agents[c.Name], c.ID, c.Args)), nil
			},
			dispatch.MCP: func(ctx context.Context, s chainRun, c dispatch.Call) (*toolOutcome, error) {
				return ptr(callMCPSession(ctx, s.run, s.tools, toolCall(c), json.RawMessage(c.Arguments))), nil
			},
			dispatch.AskUser: func(_ context.Context, s chainRun, c dispatch.Call) (*toolOutcome, error) {
				return ptr(askUser(s.run, s.tools, toolCall(c), c.Args)), nil
			},
			dispatch.Other: func(_ context.Context, s chainRun, c dispatch.Call) (*toolOutcome, error) {
				return ptr(otherTool(s.run, s.tools, toolCall(c))), nil
			},
		},
	}
	validate := dispatch.Validate(func(s chainRun, c dispatch.Call) *toolOutcome { return ptr(badArguments(s.run, s.tools, toolCall(c))) })
	return dispatch.New(chainSteps{}, route.Handler(), validate)
}

// ptr is o on the heap, for the chain, which passes outcomes by pointer. The outcome is
// made here, after o (ptr's argument, the handler's result) is known: a delegation that
// waits for its agent holds none yet. Written as &o, inlined into a handler, the compiler
// allocated o as the handler began, before the call that makes it (design/dispatch.md).
func ptr(o toolOutcome) *toolOutcome {
	p := new(toolOutcome)
	*p = o
	return p
}

// toolCall is the model's call that c carries.
func toolCall(c dispatch.Call) llm.ToolCall {
	return llm.ToolCall{ID: c.ID, Name: c.Name, Arguments: c.Arguments}
}

// chainRun is a run as its chain sees it, what the chain passes to its steps and handlers
// with each call, by value: the run, and the toolset that says what each of its calls is
// (its kind, its span's kind and target, its journal step).
type chainRun struct {
	run   *Run
	tools *toolset
}

// chainSteps are the steps of the chain that are a run's own: whether this replica may
// still act on it (durability.go), the call's execute_tool span (telemetry.go), and its
// intent and outcome in the run's journal (journal.go). It holds nothing: each call is
// given its run (chainRun), so that one chain serves every run.
type chainSteps struct{}

// MayAct waits for the run's lease (durability.mayAct).
func (chainSteps) MayAct(ctx context.Context, s chainRun) error { return s.run.dur.mayAct(ctx) }

// Trace returns next run in the call's execute_tool span (as runTrace.toolCall, without
// its closure: a frame less on the stack of a call that waits).
func (chainSteps) Trace(next dispatch.Handler[chainRun, *toolOutcome]) dispatch.Handler[chainRun, *toolOutcome] {
	return func(ctx context.Context, s chainRun, c dispatch.Call) (*toolOutcome, error) {
		call := toolCall(c)
		span := s.run.trace.startToolSpan(ctx, s.tools, call)
		out, err := next(span.ctx, s, c)
		if out == nil {
			out = &toolOutcome{}
		}
		s.run.trace.endToolSpan(span, call, out, true)
		return out, err
	}
}

// Journal returns next run between the call's intent and its outcome in the journal
// (journaled), the call's Note recorded with its intent.
func (chainSteps) Journal(next dispatch.Handler[chainRun, *toolOutcome]) dispatch.Handler[chainRun, *toolOutcome] {
	return journaled(next)
}
