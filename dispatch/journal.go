package dispatch

// Journaler runs calls between their intent and their outcome in the run's journal, once
// each. It may decline to run a call whose intent it could not record, with an outcome that
// says so.
type Journaler[O any] interface {
	// Journal returns next run between the call's intent and its outcome.
	Journal(next Handler[O]) Handler[O]
}

// Journal is the step that records the call in the run's journal.
func Journal[O any](j Journaler[O]) Step[O] {
	return Step[O]{Name: "journal", Wrap: j.Journal}
}
