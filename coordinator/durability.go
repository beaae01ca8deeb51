package coordinator

import (
	"context"
	"encoding/json"
	"errors"
	"sync"
	"time"

	"github.com/baton-dev/baton/durable"
	"github.com/baton-dev/baton/llm"
	"github.com/baton-dev/baton/store"
)

// durability is what keeps a run going across stops and replicas. Its mechanism is
// package durable's, one value per concern: the run's fencing (durable.RunFence: its
// epoch, its lease, mayAct), its journal of steps (durable.RunJournal), its suspension
// record (durable.RunSuspension: fenced writes, the records of approved calls) and its
// checkpoint's encoding (durable.Checkpoint). The policy stays here, as functions of the
// run: what a resume does with each answer (suspend.go), approvals (approval.go), how a
// taken-over turn is finished (takeover_run.go), what the journal records and when
// (journal.go). A run has one (Run.dur); it is the run's durable.RunStopper.
type durability struct {
	run *Run
	// fence is the run's fencing, steps its journal (under the epoch its log holds), susp
	// its suspension record.
	fence *durable.RunFence
	steps *durable.RunJournal
	susp  *durable.RunSuspension
	// declinedMu guards the run's declined calls (failure.State.Declined) while a resume's
	// answers are delivered in parallel (approval.go).
	declinedMu sync.Mutex
	// resumed is set on a run this replica took over from another (takeover.go).
	resumed *takenOver
	// prepended is how many of the input's first messages are the thread's stored
	// history, prepended by the engine (left out of the run's first checkpoint).
	prepended int
	// stored are the thread's messages the run's history holds: its checkpoints name them
	// (convDoc).
	stored storedMessages
}

// init makes the run's durability: its fencing, journal and suspension record over the
// run's event log.
func (d *durability) init(r *Run) {
	e := r.e
	d.run = r
	d.fence = durable.NewRunFence(r.elog, e.cfg.Replica, e.cfg.Lease, e.cfg.Heartbeat, d)
	d.steps = e.journal.ForRun(r.ThreadID, r.RunID, r.elog, d.Moved)
	d.susp = durable.NewRunSuspension(e.cfg.Store, r.elog, d)
}

// own records that the store made this replica the owner of the run under epoch, with its
// lease counted from sent (when the claim was sent).
func (d *durability) own(epoch int64, sent time.Time) {
	r := d.run
	// The run's end (recordEnd, after the log is complete) stores the thread's messages.
	r.elog.MessagesWithEnd()
	r.own = d.fence.Own(epoch, sent, r.e.quit)
}

// Moved stops the run here, as a hand-off does: nothing more of it is written, its live
// stream ends without a terminal event (the client reconnects and follows the run on the
// replica that owns it), and its downstream work is left to the new owner.
func (d *durability) Moved(why string) {
	r := d.run
	if r.handedOff.Swap(true) {
		return
	}
	r.log.Warn("the run is owned by another replica now; stopping it here without cancelling its work", "why", why)
	d.fence.Lose()
	r.stream.q.abandon()
	r.cancel(ErrRunMoved)
}

// LeaseLapsed is called once when the run waited for its lease past the lease's end:
// another replica may take it over now. The live stream ends without a terminal event, so
// that the client reconnects (GET …/events) and follows the run wherever it goes on; the
// run itself still waits here, and goes on if this replica renews the lease first.
func (d *durability) LeaseLapsed() {
	r := d.run
	r.log.Warn("the run's lease could not be renewed in time; its client is told to reconnect")
	r.stream.q.abandon()
	r.stream.release()
}

// mayAct waits until this replica may start a side effect for the run
// (durable.RunFence.MayAct). A lease lost stops the run (Moved) and returns ErrRunMoved;
// ctx ending returns its error.
func (d *durability) mayAct(ctx context.Context) error {
	if err := d.fence.MayAct(ctx); err != nil {
		if errors.Is(err, durable.ErrMoved) {
			return ErrRunMoved
		}
		return err
	}
	return nil
}

// intent records that the run is about to take a step, before it is taken (the run's
// durable.RunJournal). The error is the store's: a caller whose step must not be taken
// unrecorded (a call that could not be re-issued safely) does not take it. A fenced
// refusal stops the run here (Moved).
func (d *durability) intent(kind, target, ref string, attempt int, detail string) (durable.Step, error) {
	return d.steps.Intent(durable.StepIntent{Kind: kind, Target: target, Ref: ref, Attempt: attempt, Detail: detail})
}

// step records a step of the run that has no before and after, with its outcome.
func (d *durability) step(kind, target, ref string, end store.StepEnd) {
	d.steps.Record(kind, target, ref, end)
}

// recordStart records the run's start in the store before it streams anything
// (durable.Records.Start: the thread's claim, the run's record, its first checkpoint, the
// input's messages after the prepended history, and the run_start step, in one write), and
// owns the run here under the epoch the store gave it.
func (d *durability) recordStart(ctx context.Context, principal string, prepended int) error {
	r := d.run
	d.prepended = prepended
	work := r.elog.FirstWork(d.checkpointDoc(nil))
	started, sent, err := r.e.records.Start(ctx, r.in, principal, prepended, work)
	if err == nil {
		r.newThread = started.NewThread
		d.own(started.Epoch, sent)
	}
	return err
}

// suspension is the thread's stored suspension, read once the run holds the thread (its
// setup), or nil when there is none. A run whose start created the thread has none: it
// does not read.
func (d *durability) suspension(ctx context.Context) (*store.Suspension, error) {
	if d.run.newThread {
		return nil, nil
	}
	return d.run.e.loadSuspension(ctx, d.run.ThreadID)
}

// recordEnd records the run's end in the store under its epoch, with its run_end step
// (durable.Records.End, which retries through an outage).
func (d *durability) recordEnd() {
	r := d.run
	r.e.records.End(r.elog, d.steps.Ref(), storedRunState(r.endOutcome()), r.log)
}

// noteCheckpoint records a checkpoint of the run with conv (nil before setup), replacing
// the previous one and the results of its calls.
func (d *durability) noteCheckpoint(conv []llm.Message) {
	if doc := d.checkpointDoc(conv); doc != nil {
		d.run.elog.NoteCheckpoint(doc)
	}
}

// checkpointDoc encodes a checkpoint of the run with conv (nil before setup): what the run
// keeps in it is decided here, its encoding is durable.Checkpoint's. Nil when the input
// cannot be encoded (the run then cannot be taken over).
func (d *durability) checkpointDoc(conv []llm.Message) json.RawMessage {
	r := d.run
	cp := durable.Checkpoint{Owner: r.owner, Depth: r.in.Depth, Budget: r.in.Budget}
	if conv != nil {
		cp.Conv = convDoc(conv, &d.stored)
		fs := r.fs
		fs.Active += time.Since(r.start)
		cp.State = mustJSON(&fs)
		cp.Budget = callerLeft(r, fs.Budget)
	}
	doc, err := cp.Encode(*r.in, d.prepended)
	if err != nil {
		r.log.Warn("checkpoint: input not encodable; the run cannot be taken over", "err", err)
		return nil
	}
	return doc
}

// noteResult records the result of one of the current turn's tool calls.
func (d *durability) noteResult(toolCallID string, o toolOutcome) {
	if len(o.interrupts) > 0 || toolCallID == "" {
		return
	}
	d.run.elog.NoteResult(toolCallID, o.ToolResult)
}
