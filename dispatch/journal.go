package dispatch

import "context"

// Journaler runs its calls between their intent and their outcome in the run's journal,
// once each. It may decline to run a call whose intent it could not record, with an
// outcome that says so.
type Journaler[R, O any] interface {
	// Journal runs c through next (next(ctx, run, c), the run itself passed on) between the
	// call's intent and its outcome.
	Journal(ctx context.Context, c Call, next Handler[R, O]) (O, error)
}

// Journal is the step that records the call in its run's journal.
func Journal[R Journaler[R, O], O any]() Step[R, O] {
	return Step[R, O]{Name: "journal", Wrap: func(next Handler[R, O]) Handler[R, O] {
		return func(ctx context.Context, run R, c Call) (O, error) {
			return run.Journal(ctx, c, next)
		}
	}}
}
