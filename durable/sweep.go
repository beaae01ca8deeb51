package durable

import (
	"context"
	"log/slog"
	"time"

	"github.com/baton-dev/baton/internal/startstop"
)

// SweepStore is what the sweep deletes: event logs and finished runs past their retention,
// and expired secrets (pending sign-ins started and never completed).
type SweepStore interface {
	SweepEvents(ctx context.Context, cutoff time.Time) (int64, error)
	SweepRuns(ctx context.Context, cutoff time.Time) (int64, error)
	SweepSecrets(ctx context.Context, now time.Time) (int64, error)
}

// NewSweepService returns the service "sweep": it looks every `every` and sweeps once a
// minute, or once per retention when that is shorter, so that no log outlives about twice
// its retention (sweeping is cheap but needs no precision). The first sweep is at the first
// look. Finished runs go with what is left of their logs: without this the runs table
// grows by one row per run forever.
func NewSweepService(st SweepStore, every, retention time.Duration, log *slog.Logger) *startstop.Service {
	return startstop.NewService("sweep", func(ctx context.Context) {
		t := time.NewTicker(every)
		defer t.Stop()
		var last time.Time
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
			if now := time.Now(); now.Sub(last) >= min(time.Minute, retention) {
				last = now
				sweep(ctx, st, now, retention, log)
			}
		}
	})
}

// sweep deletes what is past its retention at now. A sweep once begun is finished: its
// store calls are not cut by the service's stop.
func sweep(ctx context.Context, st SweepStore, now time.Time, retention time.Duration, log *slog.Logger) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Minute)
	defer cancel()
	if n, err := st.SweepEvents(ctx, now.Add(-retention)); err != nil {
		log.Warn("store: sweep event logs", "err", err)
	} else if n > 0 {
		log.Info("swept event logs", "events", n)
	}
	if n, err := st.SweepRuns(ctx, now.Add(-retention)); err != nil {
		log.Warn("store: sweep finished runs", "err", err)
	} else if n > 0 {
		log.Info("swept finished runs", "runs", n)
	}
	if n, err := st.SweepSecrets(ctx, now); err != nil {
		log.Warn("store: sweep expired secrets", "err", err)
	} else if n > 0 {
		log.Debug("swept expired secrets", "count", n)
	}
}
