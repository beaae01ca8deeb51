package coordinator

// RunOutcome is how a run ended, the closed set of baton_runs_total{outcome} and of the
// run span's outcome. It is carried as a typed field from where the run ends to the
// metric, the trace and the store, so that nothing parses it back out of a log string.
type RunOutcome string

// The run outcomes.
const (
	OutcomeCompleted RunOutcome = "completed"
	OutcomeInterrupt RunOutcome = "interrupt"
	OutcomeCancelled RunOutcome = "cancelled"
	OutcomeError     RunOutcome = "error"
	OutcomeStopped   RunOutcome = "stopped"
	OutcomeHandoff   RunOutcome = "handoff"
)

// EndReason says why a run ended: its outcome and, for logs and traces, a short detail
// ("store", "client disconnected", a failure kind).
type EndReason struct {
	Outcome RunOutcome
	Detail  string
}

// ended builds an EndReason.
func ended(o RunOutcome, detail string) EndReason {
	return EndReason{Outcome: o, Detail: detail}
}

// String renders the reason as the log and Run.EndReason show it: "outcome" or
// "outcome: detail".
func (e EndReason) String() string {
	if e.Detail == "" {
		return string(e.Outcome)
	}
	return string(e.Outcome) + ": " + e.Detail
}
