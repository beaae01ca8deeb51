package dispatch

import "context"

// Step is one named step of a chain: it runs around the rest of the chain (next), and may
// decline to run it.
type Step[O any] struct {
	// Name names the step (fence, trace, journal, validate).
	Name string
	// Wrap runs the call through the step and, unless the step stops it, through next.
	Wrap func(ctx context.Context, c Call, next Handler[O]) (O, error)
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
	steps   []Step[O]
	handler Handler[O]
}

// New returns the chain of run's calls: fence, trace and journal, in that order, then
// extra (in its order), then h. Each step runs inside the ones before it: a call the fence
// stops is neither traced nor journaled, and a journaled call is traced.
func New[O any](run Run[O], h Handler[O], extra ...Step[O]) *Chain[O] {
	steps := append([]Step[O]{Fence[O](run), Trace(run), Journal(run)}, extra...)
	return &Chain[O]{steps: steps, handler: h}
}

// Run runs c through the chain. An error means the call was not run: the caller streams no
// result for it.
func (ch *Chain[O]) Run(ctx context.Context, c Call) (O, error) {
	return ch.from(0)(ctx, c)
}

// from is the chain from its i-th step on.
func (ch *Chain[O]) from(i int) Handler[O] {
	if i == len(ch.steps) {
		return ch.handler
	}
	return func(ctx context.Context, c Call) (O, error) {
		return ch.steps[i].Wrap(ctx, c, ch.from(i+1))
	}
}

// Steps names the chain's steps, in the order they run.
func (ch *Chain[O]) Steps() []string {
	names := make([]string, len(ch.steps))
	for i, s := range ch.steps {
		names[i] = s.Name
	}
	return names
}
