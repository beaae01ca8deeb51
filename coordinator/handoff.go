package coordinator

import "errors"

// Graceful hand-off (server.on_shutdown: handoff; design/takeover.md).
//
// Design note: a replica that shuts down with runs still active after the grace period
// hands them over instead of cancelling them. Each run is frozen first: nothing more of it
// reaches the store (events, checkpoint, work, end state), and its writer stores what was
// pending. Its execution is then stopped with ErrHandoff, which, unlike every other cause,
// cancels nothing downstream: its A2A tasks keep running at their agents. Only then are
// the runs' leases ended (durable.HandOff: Store.ReleaseRuns, with a notification on
// PostgreSQL), so that another replica takes them over at once from their checkpoints,
// exactly as after a crash but without waiting for the lease. With no other replica alive the runs wait in
// the store until one starts (or, on PostgreSQL, until a replica's heartbeat finds them).

// ErrHandoff: the run was handed to another replica at shutdown. Its downstream work is
// not cancelled.
var ErrHandoff = errors.New("run handed off to another replica")
