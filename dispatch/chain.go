package dispatch

import (
	"context"
	"slices"
)

// Step is one named step of a chain. Most steps are middleware (Wrap): they run around the
// rest of the chain, and may decline to run it. A step that only decides whether the call
// runs may be a Check instead; the checks that come before every middleware run one after
// the other in Chain.Run, so they stay off the stack of a call that waits.
type Step[R, O any] struct {
	// Name names the step (fence, trace, journal, validate).
	Name string
	// Check returns an error when the call must not run.
	Check func(ctx context.Context, run R, c Call) error
	// Wrap returns next with the step around it.
	Wrap func(next Handler[R, O]) Handler[R, O]
}

// Run is what dispatching a call needs of the run it belongs to: may the run still act
// (Fencer), the call's span (Tracer), and its record in the run's journal (Journaler). Its
// methods are given the run, a value of R, with each call rather than holding one, so that
// one Run, and the chain built over it, serves every run of an engine.
type Run[R, O any] interface {
	Fencer[R]
	Tracer[R, O]
	Journaler[R, O]
}

// Chain runs every call of a run through the same steps, in order, to its handler. It
// holds nothing of a run (each call is given its run), so the engine builds it once and
// every run shares it: an open run holds no chain of its own.
type Chain[R, O any] struct {
	steps  []Step[R, O]
	checks []func(ctx context.Context, run R, c Call) error
	run    Handler[R, O]
}

// New returns the chain of the calls of runs of type R: run's fence, trace and journal, in
// that order, then extra (in its order), then h. Each step runs inside the ones before it:
// a call the fence stops is neither traced nor journaled, and a journaled call is traced.
func New[R, O any](run Run[R, O], h Handler[R, O], extra ...Step[R, O]) *Chain[R, O] {
	steps := append([]Step[R, O]{Fence[R, O](run), Trace(run), Journal(run)}, extra...)
	ch := &Chain[R, O]{steps: steps, run: h}
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
func (s Step[R, O]) around(next Handler[R, O]) Handler[R, O] {
	if s.Wrap != nil {
		return s.Wrap(next)
	}
	check := s.Check
	return func(ctx context.Context, run R, c Call) (O, error) {
		if err := check(ctx, run, c); err != nil {
			var zero O
			return zero, err
		}
		return next(ctx, run, c)
	}
}

// Run runs c, a call of run, through the chain. An error means the call was not run: the
// caller streams no result for it.
func (ch *Chain[R, O]) Run(ctx context.Context, run R, c Call) (O, error) {
	for _, check := range ch.checks {
		if err := check(ctx, run, c); err != nil {
			var zero O
			return zero, err
		}
	}
	return ch.run(ctx, run, c)
}

// RunTo runs c, a call of run, through the chain's steps, except those named in skip, to h
// rather than the chain's handler: for a call of the run that is not a new call from the
// model but goes out all the same (an approved call, a call a takeover follows, the user's
// answer to a suspended call), so that what every call shares (its fencing, its span, its
// journal record) is done in one place. A call whose intent is already in the journal
// skips "journal"; one whose arguments were checked when it was first made skips
// "validate". The steps are composed for the call: RunTo is for these few calls, Run for
// the model's. An error means the call was not run, as for Run.
func (ch *Chain[R, O]) RunTo(ctx context.Context, run R, c Call, h Handler[R, O], skip ...string) (O, error) {
	for i := len(ch.steps) - 1; i >= 0; i-- {
		if s := ch.steps[i]; !slices.Contains(skip, s.Name) {
			h = s.around(h)
		}
	}
	return h(ctx, run, c)
}

// Steps names the chain's steps, in the order they run.
func (ch *Chain[R, O]) Steps() []string {
	names := make([]string, len(ch.steps))
	for i, s := range ch.steps {
		names[i] = s.Name
	}
	return names
}
