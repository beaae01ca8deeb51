package coordinator

import (
	"crypto/rand"
	"encoding/hex"

	"github.com/baton-dev/baton/agui"
	"github.com/baton-dev/baton/store"
)

// newReplicaID names this process in the store: new per process, so that a restarted
// process never mistakes a dead predecessor's runs for its own.
func newReplicaID() string {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return "replica-" + hex.EncodeToString(b[:])
}

// storedRunState is the store's end state of a run: its typed outcome ("ended" when the
// run has none, which only a run that never reached its end can have).
func storedRunState(reason EndReason) string {
	if reason.Outcome == "" || string(reason.Outcome) == store.RunRunning {
		return "ended"
	}
	return string(reason.Outcome)
}

// ownInput is the run's own copy of the caller's input: the thread's stored history is
// prepended to its messages (durable.Records.Admit), and the caller's input, which a request
// holds for its whole stream, must not keep that history reachable once the run has
// dropped it.
func ownInput(in *agui.RunAgentInput) *agui.RunAgentInput {
	own := *in
	return &own
}

// maxThreads is the store's cap on a principal's threads (0: none).
func (c *Config) maxThreads() int {
	switch n := c.MaxThreadsPerPrincipal; {
	case n == 0:
		return DefaultMaxThreadsPerPrincipal
	case n < 0:
		return 0
	default:
		return n
	}
}
