package dispatch

import "context"

// Journaler runs a call between its intent and its outcome in the run's journal, once. It
// may decline to run a call whose intent it could not record, with an outcome that says so.
type Journaler[O any] interface {
	Journal(ctx context.Context, c Call, next Handler[O]) (O, error)
}

// Journal is the step that records the call in the run's journal.
func Journal[O any](j Journaler[O]) Step[O] {
	return Step[O]{Name: "journal", Wrap: j.Journal}
}
