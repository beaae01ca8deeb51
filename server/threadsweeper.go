package server

import (
	"context"
	"log/slog"
	"sync"
	"time"
)

// threadSweeps is what a ThreadSweeper needs of the store.
type threadSweeps interface {
	SweepThreads(ctx context.Context, cutoff time.Time, limit int) (int64, error)
}

// sweepBatch is how many threads one SweepThreads call deletes: one transaction each, so
// that a large backlog never holds the store's writer for long.
const sweepBatch = 200

// ThreadSweeper deletes threads untouched for longer than their retention (server.
// thread_retention), with their messages, event logs and journal: without it threads
// and their messages are kept forever. It sweeps once per Every; of replicas sharing a
// store only one sweeps at a time (the store's SweepThreads sees to it), and a thread with
// a running run is never deleted.
type ThreadSweeper struct {
	store     threadSweeps
	retention time.Duration
	every     time.Duration
	log       *slog.Logger

	mu     sync.Mutex
	cancel context.CancelFunc
	done   chan struct{}
}

// NewThreadSweeper returns a sweeper of the threads of st untouched for retention (which
// must be positive); it sweeps once a minute, or once per retention when that is shorter.
func NewThreadSweeper(st threadSweeps, retention time.Duration, log *slog.Logger) *ThreadSweeper {
	if log == nil {
		log = slog.Default()
	}
	return &ThreadSweeper{store: st, retention: retention, every: min(time.Minute, retention), log: log}
}

// Start begins sweeping in the background, at once and then once per period, until Stop
// or until ctx ends. Starting a started sweeper does nothing.
func (s *ThreadSweeper) Start(ctx context.Context) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cancel != nil || s.retention <= 0 {
		return
	}
	ctx, cancel := context.WithCancel(ctx)
	s.cancel, s.done = cancel, make(chan struct{})
	go s.loop(ctx, s.done)
}

// Stop ends the sweeping and waits for a sweep in progress to end (its store call is
// cancelled), or until ctx ends: the error is then ctx's, and the sweep goes on ending by
// itself. Stopping a sweeper not started does nothing.
func (s *ThreadSweeper) Stop(ctx context.Context) error {
	s.mu.Lock()
	cancel, done := s.cancel, s.done
	s.cancel, s.done = nil, nil
	s.mu.Unlock()
	if cancel == nil {
		return nil
	}
	cancel()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (s *ThreadSweeper) loop(ctx context.Context, done chan struct{}) {
	defer close(done)
	t := time.NewTicker(s.every)
	defer t.Stop()
	for {
		s.Sweep(ctx)
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// Sweep deletes the threads due now, in batches, and returns how many.
func (s *ThreadSweeper) Sweep(ctx context.Context) int64 {
	cutoff := time.Now().Add(-s.retention)
	var total int64
	for ctx.Err() == nil {
		sctx, cancel := context.WithTimeout(ctx, time.Minute)
		n, err := s.store.SweepThreads(sctx, cutoff, sweepBatch)
		cancel()
		if err != nil {
			if ctx.Err() == nil {
				s.log.Warn("store: sweep threads", "err", err)
			}
			break
		}
		total += n
		if n < sweepBatch {
			break
		}
	}
	if total > 0 {
		s.log.Info("swept threads past their retention", "threads", total)
	}
	return total
}
