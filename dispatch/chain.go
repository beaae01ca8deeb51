package dispatch

import (
	"context"
	"slices"
)

// Step is one named step of a chain. Most steps are middleware (Wrap): they run around the
// rest of the chain, and may decline to run it. A step that only decides whether the call
// runs may be a Check instead; the checks that come before every middleware run one after
// the other in Chain.Run, so they stay off the stack of a call that waits.
type Step[O any] struct {
	// Name names the step (fence, trace, journal, validate).
	Name string
	// Check returns an error when the call must not run.
	Check func(ctx context.Context, c Call) error
	// Wrap returns next with the step around it.
	Wrap func(next Handler[O]) Handler[O]
}

// Run is what dispatching a call needs of the run it belongs to: may the run still act
// (Fencer), the call's span (Tracer), and its record in the run's journal (Journaler).
type Run[O any] interface {
	Fencer
	Tracer[O]
	Journaler[O]
}

// Chain runs every call of a run through the same steps, in order, to its handler.
type Chain[O any] struct {
	steps  []Step[O]
	checks []func(ctx context.Context, c Call) error
	run    Handler[O]
}

// New returns the chain of run's calls: fence, trace and journal, in that order, then
// extra (in its order), then h. Each step runs inside the ones before it: a call the fence
// stops is neither traced nor journaled, and a journaled call is traced.
func New[O any](run Run[O], h Handler[O], extra ...Step[O]) *Chain[O] {
	// Of the exact length: every open run holds its chain.
	steps := make([]Step[O], 0, 3+len(extra))
	steps = append(append(steps, Fence[O](run), Trace(run), Journal(run)), extra...)
	ch := &Chain[O]{steps: steps, run: h}
	lead := 0
	for lead < len(steps) && steps[lead].Wrap == nil {
		ch.checks = append(ch.checks, steps[lead].Check)
		lead++
	}
	// Composed once, from the handler out. A delegation's frames stay on the run's stack
	// while it waits for the agent: one small frame per step, no more (design/dispatch.md).
	for i := len(steps) - 1; i >= lead; i-- {
		ch.run = steps[i].around(ch.run)
	}
	return ch
}

// around is next with the step around it.
func (s Step[O]) around(next Handler[O]) Handler[O] {
	if s.Wrap != nil {
		return s.Wrap(next)
	}
	check := s.Check
	return func(ctx context.Context, c Call) (O, error) {
		if err := check(ctx, c); err != nil {
			var zero O
			return zero, err
		}
		return next(ctx, c)
	}
}

// Run runs c through the chain. An error means the call was not run: the caller streams no
// result for it.
func (ch *Chain[O]) Run(ctx context.Context, c Call) (O, error) {
	for _, check := range ch.checks {
		if err := check(ctx, c); err != nil {
			var zero O
			return zero, err
		}
	}
	return ch.run(ctx, c)
}

// RunTo runs c through the chain's steps, except those named in skip, to h rather than the
// chain's handler: for a call of the run that is not a new call from the model but goes
// out all the same (an approved call, a call a takeover follows, the user's answer to a
// suspended call), so that what every call shares (its fencing, its span, its journal
// record) is done in one place. A call whose intent is already in the journal skips
// "journal"; one whose arguments were checked when it was first made skips "validate".
// The steps are composed for the call: RunTo is for these few calls, Run for the model's.
// An error means the call was not run, as for Run.
func (ch *Chain[O]) RunTo(ctx context.Context, c Call, h Handler[O], skip ...string) (O, error) {
	for i := len(ch.steps) - 1; i >= 0; i-- {
		if s := ch.steps[i]; !slices.Contains(skip, s.Name) {
			h = s.around(h)
		}
	}
	return h(ctx, c)
}

// Steps names the chain's steps, in the order they run.
func (ch *Chain[O]) Steps() []string {
	names := make([]string, len(ch.steps))
	for i, s := range ch.steps {
		names[i] = s.Name
	}
	return names
}
