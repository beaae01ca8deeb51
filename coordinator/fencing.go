package coordinator

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/baton-dev/baton/durable"
	"github.com/baton-dev/baton/fence"
)

// Fencing (design/fencing.md): every write of a run carries the epoch under which this
// replica owns it, and the store refuses it once another replica took the run over; a run
// whose write is refused stops here at once, without cancelling anything downstream (the
// new owner follows that work). What the store cannot refuse (model calls, MCP calls, A2A
// sends) waits for the run's lease (fence.Lease): a replica that could not renew it in time
// starts nothing more for the run until it has, and tells the client to reconnect once
// the lease may have lapsed for the others.

// ErrRunMoved: the run is owned by another replica now (the store refused one of its
// writes, or a heartbeat did not renew its lease). Like ErrHandoff, which it wraps, it
// cancels nothing downstream.
var ErrRunMoved = fmt.Errorf("%w: another replica owns the run now", ErrHandoff)

// own records that the store made this replica the owner of the run under epoch, with its
// lease counted from sent (when the claim was sent).
func (d *durability) own(epoch int64, sent time.Time) {
	r := d.run
	e := r.e
	r.elog.Own(epoch, e.quit, func(error) { d.moved("the store refused a write of the run") })
	var lease *fence.Lease
	if e.cfg.Heartbeat > 0 {
		lease = fence.New(sent, e.cfg.Lease, fence.Margin(e.cfg.Lease, e.cfg.Heartbeat), d.leaseLapsed)
	}
	r.own = durable.NewOwner(durable.RunRef{ThreadID: r.ThreadID, RunID: r.RunID, Epoch: epoch}, e.cfg.Replica, lease)
}

// moved stops the run here, as a hand-off does: nothing more of it is written, its live
// stream ends without a terminal event (the client reconnects and follows the run on the
// replica that owns it), and its downstream work is left to the new owner.
func (d *durability) moved(why string) {
	r := d.run
	if r.handedOff.Swap(true) {
		return
	}
	r.log.Warn("the run is owned by another replica now; stopping it here without cancelling its work", "why", why)
	r.own.Lose()
	r.elog.Freeze()
	r.stream.q.abandon()
	r.cancel(ErrRunMoved)
}

// leaseLapsed is called once when the run waited for its lease past the lease's end:
// another replica may take it over now. The live stream ends without a terminal event, so
// that the client reconnects (GET …/events) and follows the run wherever it goes on; the
// run itself still waits here, and goes on if this replica renews the lease first.
func (d *durability) leaseLapsed() {
	r := d.run
	r.log.Warn("the run's lease could not be renewed in time; its client is told to reconnect")
	r.stream.q.abandon()
	r.stream.release()
}

// mayAct waits until this replica may start a side effect for the run (a model call, a
// tool call, an A2A send): at once while its lease holds by more than the margin, else
// once a heartbeat has renewed it (durable.Owner.MayAct). A lease lost stops the run
// (moved) and returns ErrRunMoved; ctx ending returns its error.
func (d *durability) mayAct(ctx context.Context) error {
	r := d.run
	err := r.own.MayAct(ctx)
	if errors.Is(err, durable.ErrMoved) {
		r.dur.moved("its lease was lost")
		return ErrRunMoved
	}
	return err
}

// recordStart records the run's start in the store before it streams anything
// (durable.Records.Start: the thread's claim, the run's record, its first checkpoint, the
// input's messages after the prepended history, and the run_start step, in one write), and
// owns the run here under the epoch the store gave it.
func (d *durability) recordStart(ctx context.Context, principal string, prepended int) error {
	r := d.run
	d.prepended = prepended
	work := r.elog.FirstWork(d.checkpointDoc(nil))
	epoch, sent, err := r.e.records.Start(ctx, r.in, principal, prepended, work)
	if err == nil {
		d.own(epoch, sent)
	}
	return err
}

// recordEnd records the run's end in the store under its epoch, with its run_end step
// (durable.Records.End, which retries through an outage).
func (d *durability) recordEnd() {
	r := d.run
	r.e.records.End(r.elog, d.steps.Ref(), storedRunState(r.endOutcome()), r.log)
}
