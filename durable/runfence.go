package durable

import (
	"context"
	"errors"
	"time"

	"github.com/baton-dev/baton/fence"
)

// RunStopper is what one run's fencing needs of the run loop: stopping the run here, and
// telling its client to follow it elsewhere. The run loop decides what stopping means
// (its stream, its cancel); RunFence and RunSuspension decide when.
type RunStopper interface {
	// Moved stops the run here, as a hand-off does, without cancelling its work
	// downstream: another replica owns it now (why says how this replica learned it). It
	// may be called more than once; the run stops once.
	Moved(why string)
	// LeaseLapsed is called once when the run waited for its lease past the lease's end:
	// another replica may take it over now, so its live clients are told to reconnect.
	LeaseLapsed()
}

// RunFence is one run's fencing on this replica (design/fencing.md): the epoch under which
// the store made this replica the run's owner, which every write of its event log carries,
// and the run's lease, which holds back new side effects while it is not known to hold. A
// write the store refuses, or a lease lost, stops the run through its RunStopper.
type RunFence struct {
	log       *EventLog
	replica   string
	lease     time.Duration
	heartbeat time.Duration
	stop      RunStopper
	owner     *Owner
}

// NewRunFence returns the fencing of the run whose event log is l, owned by replica under
// leases of length lease renewed every heartbeat (0: no heartbeat, no lease); stop is the
// run loop's.
func NewRunFence(l *EventLog, replica string, lease, heartbeat time.Duration, stop RunStopper) *RunFence {
	return &RunFence{log: l, replica: replica, lease: lease, heartbeat: heartbeat, stop: stop}
}

// Own records that the store made this replica the owner of the run under epoch, with its
// lease counted from sent (when the claim was sent): the run's writes carry epoch from
// now on, and one the store refuses stops the run. quit is closed when the replica stops.
// It returns the run's ownership, which the heartbeat renews.
func (f *RunFence) Own(epoch int64, sent time.Time, quit <-chan struct{}) *Owner {
	f.log.Own(epoch, quit, func(error) { f.stop.Moved("the store refused a write of the run") })
	var lease *fence.Lease
	if f.heartbeat > 0 {
		lease = fence.New(sent, f.lease, fence.Margin(f.lease, f.heartbeat), f.stop.LeaseLapsed)
	}
	f.owner = NewOwner(RunRef{ThreadID: f.log.thread, RunID: f.log.run, Epoch: epoch}, f.replica, lease)
	return f.owner
}

// Lose records that the run is another replica's now: its lease is lost (MayAct fails from
// here on) and its event log frozen (nothing more of it is written).
func (f *RunFence) Lose() {
	f.owner.Lose()
	f.log.Freeze()
}

// MayAct waits until this replica may start a side effect for the run (a model call, a
// tool call, an A2A send): at once while its lease holds by more than the margin, else
// once a heartbeat has renewed it (Owner.MayAct). A lease lost stops the run (Moved) and
// returns an error wrapping ErrMoved; ctx ending returns its error.
func (f *RunFence) MayAct(ctx context.Context) error {
	err := f.owner.MayAct(ctx)
	if errors.Is(err, ErrMoved) {
		f.stop.Moved("its lease was lost")
	}
	return err
}
