// Package durable keeps a run's record in the store while a replica drives it, and makes
// sure that only the replica that owns a run writes for it (design/fencing.md,
// design/takeover.md).
//
// What it guarantees:
//
//   - The event log is gapless and dense: every event a run emits is numbered in emission
//     order (the number is the SSE id) and kept until the store takes it, retried through
//     an outage (bounded in time and memory; a loss is logged, never silent). A live stream
//     shows an event only once the log has it (EventLog's stored-up-to callback), so a
//     reconnect never replays a run with holes.
//   - Every write of a run carries the epoch under which this replica owns it. A write the
//     store refuses as fenced (store.ErrFenced: another replica took the run over) freezes
//     the run's record here at once and reports it (the owner stops the run locally,
//     cancelling nothing downstream); it is never retried.
//   - The run's work document (its remote tasks, its MCP calls, the checkpoint a replica
//     taking it over continues from, and the results of the current turn) is written after
//     the events it follows, so a takeover finds a log at least as far as the checkpoint.
//
// The package needs only the part of the store it writes (EventStore, defined here); the
// run loop stays in package coordinator.
package durable
