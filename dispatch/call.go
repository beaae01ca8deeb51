package dispatch

import "context"

// Call is one tool call the model asked for.
type Call struct {
	// ID is the call's id, unique in its run.
	ID string
	// Name is the tool the call names.
	Name string
	// Arguments is the JSON object text the model produced.
	Arguments string
	// Args is Arguments decoded; the Validate step sets it before the handler runs.
	Args map[string]any
	// Note is recorded with the call's intent in the run's journal, besides its target
	// (why a call that the model did not just make goes out: "approved by the user").
	Note string
}

// Handler runs a call of run and returns its outcome. R is the engine's run, passed with
// every call so that one chain serves every run: nothing of a run is captured when the
// chain is built. O is the engine's outcome type: a result for the model, or what suspends
// the call. An error means the call was not run (a step refused it, see ErrFenced); a
// failure of the call itself is an outcome.
type Handler[R, O any] func(ctx context.Context, run R, c Call) (O, error)
