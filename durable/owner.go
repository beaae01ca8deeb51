package durable

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/baton-dev/baton/fence"
	"github.com/baton-dev/baton/store"
)

// ErrMoved is returned by Owner.MayAct once the run's lease is lost for good: another
// replica owns the run now, and this one must stop it without cancelling its work.
var ErrMoved = errors.New("durable: another replica owns the run now")

// RunReader reads a run's record: who owns it, under which epoch.
type RunReader interface {
	GetRun(ctx context.Context, threadID, runID string) (*store.RunRecord, error)
}

// Owner is this replica's ownership of one run: the epoch the store gave it when it claimed
// the run (every write of the run carries it), and the run's lease as this replica knows it
// (fence.Lease), which says whether it may still start side effects. A nil *Owner, or one
// without a lease (no heartbeat: nothing can take the run over), never holds anything back.
type Owner struct {
	run     RunRef
	replica string
	lease   *fence.Lease
}

// NewOwner returns replica's ownership of run, under run.Epoch; lease nil: no heartbeat.
func NewOwner(run RunRef, replica string, lease *fence.Lease) *Owner {
	return &Owner{run: run, replica: replica, lease: lease}
}

// Ref is the run, under the epoch this replica owns it with.
func (o *Owner) Ref() RunRef { return o.run }

// Leased says whether the run has a lease to renew (a heartbeat is configured).
func (o *Owner) Leased() bool { return o != nil && o.lease != nil }

// MayAct waits until this replica may start a side effect for the run: at once while its
// lease holds by more than the margin, else once a heartbeat has renewed it. A lease lost
// returns an error wrapping ErrMoved; ctx ending returns its error.
func (o *Owner) MayAct(ctx context.Context) error {
	if o == nil {
		return nil
	}
	err := o.lease.Wait(ctx)
	if errors.Is(err, fence.ErrLost) {
		return fmt.Errorf("%w: %w", ErrMoved, err)
	}
	return err
}

// Lose records that the run is another replica's now: MayAct fails from here on.
func (o *Owner) Lose() {
	if o != nil {
		o.lease.Lose()
	}
}

// Renewal is what one heartbeat said: when it was sent, and the runs it renewed with their
// epochs.
type Renewal struct {
	sent time.Time
	held map[[2]string]int64
}

// NewRenewal is the renewal of the heartbeat sent at sent that renewed the runs in renewed.
func NewRenewal(sent time.Time, renewed []store.RunRef) Renewal {
	held := make(map[[2]string]int64, len(renewed))
	for _, ref := range renewed {
		held[[2]string{ref.ThreadID, ref.RunID}] = ref.Epoch
	}
	return Renewal{sent: sent, held: held}
}

// Verdict is what a heartbeat says about one run's ownership.
type Verdict int

const (
	// Renewed: the heartbeat renewed the run under this replica's epoch; it may go on.
	Renewed Verdict = iota
	// NotRenewed: the run was claimed before the heartbeat was sent, and the heartbeat did
	// not renew it under this replica's epoch: either another replica holds it now, or the
	// run's claim committed after the heartbeat's update ran. Only the store can tell the
	// two apart (Holds).
	NotRenewed
	// Unknown: the run was claimed after the heartbeat was sent: it says nothing of it.
	Unknown
)

// Apply applies a heartbeat to the run: a renewal under this replica's epoch renews its
// lease (Renewed).
func (o *Owner) Apply(r Renewal) Verdict {
	if !o.Leased() {
		return Unknown
	}
	if epoch, ok := r.held[[2]string{o.run.ThreadID, o.run.RunID}]; ok && epoch == o.run.Epoch {
		o.lease.Renew(r.sent)
		return Renewed
	}
	if o.lease.Sent().Before(r.sent) {
		return NotRenewed
	}
	return Unknown
}

// Holds reads from the store whether this replica owns the run under its epoch now. The
// store is asked, never this replica's memory: another replica may have taken the run over.
func (o *Owner) Holds(ctx context.Context, st RunReader) (bool, error) {
	if o == nil {
		return false, nil // not claimed yet
	}
	rec, err := st.GetRun(ctx, o.run.ThreadID, o.run.RunID)
	if errors.Is(err, store.ErrNotFound) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	return rec.Replica == o.replica && rec.Epoch == o.run.Epoch && rec.State == store.RunRunning, nil
}
