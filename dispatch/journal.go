package dispatch

// Journaler runs calls between their intent and their outcome in their run's journal, once
// each. It may decline to run a call whose intent it could not record, with an outcome
// that says so.
type Journaler[R, O any] interface {
	// Journal returns next run between the call's intent and its outcome.
	Journal(next Handler[R, O]) Handler[R, O]
}

// Journal is the step that records the call in its run's journal.
func Journal[R, O any](j Journaler[R, O]) Step[R, O] {
	return Step[R, O]{Name: "journal", Wrap: j.Journal}
}
