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

// HandOff is the store side of a replica's hand-off at shutdown (design/takeover.md), once
// the run loop has frozen the runs' logs and stopped the runs without cancelling their
// downstream work: it waits for each log's writer to store what was pending (at most
// StoreWriteTimeout in all; a log still writing then is logged), stops renewals (the
// heartbeat service, which would renew the leases ended next), then ends every lease of
// replica in one call (ReleaseRuns, with a notification on PostgreSQL), so that another
// replica takes the runs over at once from their checkpoints instead of after their lease.
// It returns the number of runs released.
func HandOff(st ReleaseStore, replica string, logs []*EventLog, renewals *Service, log *slog.Logger) (int, error) {
	deadline := time.NewTimer(StoreWriteTimeout)
	defer deadline.Stop()
	for _, l := range logs {
		select {
		case <-l.Done():
		case <-deadline.C:
			log.Warn("handoff: a run's last events were not all stored in time", "thread_id", l.thread, "run_id", l.run)
		}
	}
	_ = renewals.Stop(context.Background())
	ctx, cancel := context.WithTimeout(context.Background(), StoreWriteTimeout)
	defer cancel()
	n, err := st.ReleaseRuns(ctx, replica)
	if err != nil {
		return 0, fmt.Errorf("durable: hand-off: release the runs: %w", err)
	}
	return n, nil
}
