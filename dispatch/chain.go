package dispatch

import (
	"context"
	"slices"
)

// Step is one named step of a chain, a middleware: it runs around the rest of the chain,
// and may decline to run it.
type Step[O any] struct {
	// Name names the step (fence, trace, journal, validate).
	Name string
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
	names []string
	run   Handler[O]
}

// New returns the chain of run's calls: fence, trace and journal, in that order, then
// extra (in its order), then h. Each step runs inside the ones before it: a call the fence
// stops is neither traced nor journaled, and a journaled call is traced.
func New[O any](run Run[O], h Handler[O], extra ...Step[O]) *Chain[O] {
	steps := append([]Step[O]{Fence[O](run), Trace(run), Journal(run)}, extra...)
	ch := &Chain[O]{run: h}
	// Composed once, from the handler out. A delegation's frames stay on the run's stack
	// while it waits for the agent: a frame or two per step, no more (design/lean-runs.md).
	for i := len(steps) - 1; i >= 0; i-- {
		ch.run = steps[i].Wrap(ch.run)
	}
	for _, s := range steps {
		ch.names = append(ch.names, s.Name)
	}
	return ch
}

// Run runs c through the chain. An error means the call was not run: the caller streams no
// result for it.
func (ch *Chain[O]) Run(ctx context.Context, c Call) (O, error) {
	return ch.run(ctx, c)
}

// Steps names the chain's steps, in the order they run.
func (ch *Chain[O]) Steps() []string {
	return slices.Clone(ch.names)
}
