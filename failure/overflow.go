package failure

import "fmt"

// The context_overflow kind (DESIGN §6): the model refused a request as longer than its
// context window. The engine's recovery is its own (it owns the history): the retry the
// policy decides is made after the older turns were summarised (compaction, package
// history); when that request is refused too, a model with a larger window may take it
// (llm.fallback), and otherwise the run hands off with an explanation the user can act on.

// contextOverflow is the failure of a request the model refused as too long.
func contextOverflow(err error) *Failure {
	return &Failure{Kind: KindContextOverflow, Explanation: "The conversation is longer than the language model's context window.", Err: err}
}

// decideOverflow retries context_overflow while its budget lasts (the engine compacts the
// history first), then hands off.
func decideOverflow(p Policy, f Failure, st *State, d Decision) Decision {
	n := st.bump(f.Kind, "")
	d.Attempt = n
	if budget := p.RetryBudget(f.Kind); n <= budget {
		d.Action = ActionRetry
		d.Explanation = fmt.Sprintf("%s Older turns are summarised and the request is sent again (retry %d of %d).", f.Explanation, n, budget)
		return d
	}
	d.Action = ActionHandoff
	d.Explanation = f.Explanation + " It is still too long after the older turns were summarised. Start a new conversation (or ask for less at once), or configure a model with a larger context window (llm.fallback)."
	return d
}
