package coordinator

import (
	"sync"

	"github.com/baton-dev/baton/durable"
	"github.com/baton-dev/baton/store"
)

// durability is what keeps a run going across stops and replicas: its suspension and
// resume (suspend.go), the approvals recorded in the suspension (approval.go), its
// checkpoints (checkpoint.go), its takeover by another replica (takeover_run.go), its
// journal of steps (journal.go) and its fencing (fencing.go). A run has one (Run.dur).
type durability struct {
	run *Run
	// steps is the run's journal (durable.RunJournal), under the epoch its log holds.
	steps *durable.RunJournal
	// susp is the suspension being resumed, while approved calls record their start and
	// result in it (approval.go).
	suspMu sync.Mutex
	susp   *store.Suspension
	// resumed is set on a run this replica took over from another (takeover.go).
	resumed *takenOver
	// prepended is how many of the input's first messages are the thread's stored
	// history, prepended by the engine (left out of the run's first checkpoint).
	prepended int
}
