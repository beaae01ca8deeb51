package coordinator

import "fmt"

// Fencing (design/fencing.md): every write of a run carries the epoch under which this
// replica owns it, and the store refuses it once another replica took the run over; a run
// whose write is refused stops here at once, without cancelling anything downstream (the
// new owner follows that work). What the store cannot refuse (model calls, MCP calls, A2A
// sends) waits for the run's lease (fence.Lease): a replica that could not renew it in time
// starts nothing more for the run until it has, and tells the client to reconnect once
// the lease may have lapsed for the others. The mechanism is durable.RunFence (the epoch,
// the lease, MayAct); what stopping the run here means is durability.Moved's.

// ErrRunMoved: the run is owned by another replica now (the store refused one of its
// writes, or a heartbeat did not renew its lease). Like ErrHandoff, which it wraps, it
// cancels nothing downstream.
var ErrRunMoved = fmt.Errorf("%w: another replica owns the run now", ErrHandoff)
