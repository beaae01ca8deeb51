package durable

// Engine is what durable needs of the engine that executes the runs: it is the one port
// between them, declared here and implemented by the run loop's package (coordinator),
// which durable never imports. Each service takes the part it uses: the takeover continues
// the runs it claims (Adopter), the heartbeat acts on the runs executing here and on the
// remote work of runs it reaps (RunsHere), the pending cancels an earlier process left are
// continued as their owners (CancelResumer), and the interrupt expiry cancels the work
// parked on expired interrupts (ExpiredWork). The policy (how a run continues from its
// checkpoint, which agent gets which credentials) is the engine's; the claims, leases,
// retries and records are durable's.
type Engine interface {
	Adopter
	RunsHere
	CancelResumer
	ExpiredWork
}
