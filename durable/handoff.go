package durable

import (
	"context"
	"fmt"
	"log/slog"
	"time"
)

// ReleaseStore is what a hand-off writes: the end of a replica's leases.
type ReleaseStore interface {
	ReleaseRuns(ctx context.Context, replica string) (int, error)
}

// Stopper is a service that HandOff stops: the heartbeat (*Heartbeat), which would renew
// the leases HandOff ends.
type Stopper interface {
	Stop(ctx context.Context) error
}

// Leaving is a run this replica hands off: its event log, and Stop, which stops the run
// here without cancelling its downstream work (the run loop's part: its live stream ends
// without a terminal event, its execution is cancelled with a cause that cancels nothing
// downstream). Stop may be nil.
type Leaving struct {
	Log  *EventLog
	Stop func()
}

// HandOff is a replica's hand-off at shutdown (design/takeover.md), in its order: each
// run's log is frozen first (nothing more of the run reaches the store) and the run is
// stopped here (Leaving.Stop); then HandOff waits for each log's writer to store what was
// pending (at most StoreWriteTimeout in all; a log still writing then is logged), stops
// renewals (the heartbeat, which would renew the leases ended next), and ends every lease
// of replica in one call (ReleaseRuns, with a notification on PostgreSQL), so that another
// replica takes the runs over at once from their checkpoints instead of after their lease.
// It returns the number of runs released.
func HandOff(st ReleaseStore, replica string, runs []Leaving, renewals Stopper, log *slog.Logger) (int, error) {
	for _, r := range runs {
		r.Log.Freeze()
		if r.Stop != nil {
			r.Stop()
		}
	}
	deadline := time.NewTimer(StoreWriteTimeout)
	defer deadline.Stop()
	for _, r := range runs {
		select {
		case <-r.Log.Done():
		case <-deadline.C:
			log.Warn("handoff: a run's last events were not all stored in time", "thread_id", r.Log.thread, "run_id", r.Log.run)
		}
	}
	if renewals != nil {
		// The renewals' last round is waited for whole: a lease renewed after the
		// release below would keep the runs here.
		_ = renewals.Stop(context.Background())
	}
	// Handing off runs at shutdown, after the process's context has ended.
	ctx, cancel := context.WithTimeout(context.Background(), StoreWriteTimeout)
	defer cancel()
	n, err := st.ReleaseRuns(ctx, replica)
	if err != nil {
		return 0, fmt.Errorf("durable: hand-off: release the runs: %w", err)
	}
	return n, nil
}
