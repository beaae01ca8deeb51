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
//
//   - Every write of a run carries the epoch under which this replica owns it. A write the
//     store refuses as fenced (store.ErrFenced: another replica took the run over) freezes
//     the run's record here at once and reports it (the owner stops the run locally,
//     cancelling nothing downstream); it is never retried.
//
//   - The run's work document (its remote tasks, its MCP calls, the checkpoint a replica
//     taking it over continues from, and the results of the current turn) is written after
//     the events it follows, so a takeover finds a log at least as far as the checkpoint.
//
//   - A replica starts a side effect for a run only while it owns it: Owner holds the epoch
//     and the run's lease (fence.Lease); MayAct holds new side effects back once the lease
//     may lapse for the others, and fails with ErrMoved once it is lost; a heartbeat that
//     did not renew the run (Owner.Apply) is checked against the store (Owner.Holds).
//
//   - Every step with a side effect is recorded before it is taken and its outcome after
//     (Journal, Step), under the run's epoch; after a takeover the steps the previous owner
//     began and never finished are reported in doubt (Journal.MarkInDoubtAfterTakeover).
//
//   - A run whose owner's lease lapsed is claimed by one replica (Takeover), under a new
//     epoch, and handed to the engine (Adopter) with its log; a run that could not be
//     adopted stays this replica's and is tried again at the next look, and one the engine
//     cannot continue (NotContinued) is ended here: its remote work cancelled, its log
//     ended with RUN_ERROR{RUN_LOST}, its record with the error outcome.
//
// The pieces: EventLog (append events, follow a run, checkpoint, end a run), Journal
// (record a step; RunJournal, one run's steps under its epoch), Owner (own a run), RunFence
// (one run's epoch and lease on this replica, MayAct), RunSuspension (one run's fenced
// suspension record and the records of its approved calls), Checkpoint (the document a
// replica continues a run from, encoded and decoded), Records (a run's start and end in the store, the
// thread's history it starts from, stop requests for runs elsewhere), Takeover (claim
// lapsed runs), Heartbeat (renew the leases, apply stop requests, reap lost runs), Expiry
// (interrupts past their time), HandOff (freeze, stop and release a replica's runs at
// shutdown), PendingCancels (cancels not confirmed yet, continued after a restart), and
// Jobs, the background services together (heartbeat, takeover, sweep, expiry; Start,
// Stop) with the hand-off. Each defines the part of the store it needs (EventStore,
// StepStore, RunReader, EventReader, TakeoverStore, HeartbeatStore, ReleaseStore,
// CancelStore, SweepStore, ExpiryStore, RecordStore, JobsStore, SuspensionStore).
//
// What only the run loop can do (continue a claimed run, stop a run here, cancel remote
// work with its owner's credentials) is asked through one port declared here, Engine
// (Adopter, RunsHere, CancelResumer, ExpiredWork), which package coordinator implements;
// one run's pieces (RunFence, RunSuspension) ask it through RunStopper, which the run's
// durability implements. durable never imports coordinator.
package durable
