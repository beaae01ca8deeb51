package durable

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"time"

	"github.com/baton-dev/baton/agui"
	"github.com/baton-dev/baton/fence"
	"github.com/baton-dev/baton/internal/startstop"
	"github.com/baton-dev/baton/store"
)

// HeartbeatStore is what the heartbeat reads and writes: the renewal of this replica's
// leases, the stop requests made through other replicas, and the claim and end of runs
// that lost their replica while their thread went on.
type HeartbeatStore interface {
	EventReader
	HeartbeatRuns(ctx context.Context, replica string, lease time.Duration) ([]store.RunRef, error)
	StopRequests(ctx context.Context, replica string) ([]store.RunRecord, error)
	ClaimLapsedRuns(ctx context.Context, replica string, limit int) ([]store.RunRecord, error)
	AppendEvents(ctx context.Context, threadID, runID string, epoch int64, evs []store.Event) error
}

// RunsHere is what the heartbeat does to the runs of this replica and to the remote work of
// runs it reaps; it is defined here and implemented by the run loop's package.
type RunsHere interface {
	// Renewed applies a heartbeat's renewal to the runs executing here: a run renewed under
	// its epoch goes on; one that was not may be another replica's now, and stops here
	// without cancelling its work (Owner.Apply, Owner.Holds).
	Renewed(r Renewal)
	// StopRequested stops the run here (if it executes here): its stop was requested
	// through another replica.
	StopRequested(threadID, runID string)
	// WorkCanceller cancels the remote work (A2A tasks) that the work document of a run
	// reaped here lists as not terminal.
	WorkCanceller
}

// Waker is the takeover as the heartbeat drives it (*Takeover): woken when another replica
// hands its runs off, and told each renewal, which also renews the runs it claimed and has
// not adopted yet.
type Waker interface {
	Wake()
	Renewed(r Renewal)
}

// HeartbeatConfig configures a Heartbeat.
type HeartbeatConfig struct {
	Store HeartbeatStore
	// Replica is this replica's id; Lease the lease each renewal gives its runs; Every the
	// time between two renewals.
	Replica string
	Lease   time.Duration
	Every   time.Duration
	// Contact records whether the renewals reach the store (the takeover's claim rule).
	Contact *fence.Contact
	Runs    RunsHere
	// Takeover, when not nil, is woken by a hand-off's signal and told each renewal.
	Takeover Waker
	// Signals, when not nil, delivers the store's signal of a stop request or a hand-off
	// (store.Signaler): both are applied at once instead of at the next renewal.
	Signals <-chan struct{}
	// Now stamps the events written into the logs of reaped runs (default time.Now).
	Now    func() time.Time
	Logger *slog.Logger
}

// ReapBatch bounds the lapsed runs one heartbeat claims to end.
const ReapBatch = 50

// Heartbeat is the service "heartbeat" of a replica: every cfg.Every it renews the leases
// of the runs it owns (Store.HeartbeatRuns) and tells its runs and the takeover what the
// renewal said, applies the stop requests made through other replicas, and reaps the runs
// that lost their replica while their thread went on (Reap). A nil *Heartbeat is one that
// is not configured: its Start and Stop do nothing.
//
// Design note: a round once begun is finished (its store calls are not cut by the stop), so
// that a stop never leaves a lease renewed for some runs and not for others half-way. The
// reaping runs only right after a successful renewal: this replica's own leases have just
// been renewed, so a lapsed run is never one of its own live runs.
type Heartbeat struct {
	cfg     HeartbeatConfig
	log     *slog.Logger
	service *startstop.Service
}

// NewHeartbeat returns the heartbeat configured by cfg, not started.
func NewHeartbeat(cfg HeartbeatConfig) *Heartbeat {
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Contact == nil {
		cfg.Contact = &fence.Contact{}
	}
	h := &Heartbeat{cfg: cfg, log: cfg.Logger}
	h.service = startstop.NewService("heartbeat", h.run)
	return h
}

// Start starts the service "heartbeat": a renewal every cfg.Every until Stop.
func (h *Heartbeat) Start(ctx context.Context) {
	if h != nil {
		h.service.Start(ctx)
	}
}

// Stop stops the service, waiting for the round in progress (see Service.Stop).
func (h *Heartbeat) Stop(ctx context.Context) error {
	if h == nil {
		return nil
	}
	return h.service.Stop(ctx)
}

func (h *Heartbeat) run(ctx context.Context) {
	t := time.NewTicker(h.cfg.Every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-h.cfg.Signals:
			h.signalled(context.WithoutCancel(ctx))
			continue
		case <-t.C:
		}
		h.Beat(context.WithoutCancel(ctx))
	}
}

// signalled applies the store's signal: a stop request, or another replica's hand-off,
// whose runs the takeover claims now (never this replica's own: TakeOverRuns skips them).
func (h *Heartbeat) signalled(ctx context.Context) {
	h.ApplyStops(ctx)
	if h.cfg.Takeover != nil {
		h.cfg.Takeover.Wake()
	}
	h.Reap(ctx)
}

// Beat is one round of the heartbeat: the renewal (bounded by one period), the stop
// requests, and after a successful renewal the reaping of lost runs. It returns the
// renewal's error.
func (h *Heartbeat) Beat(ctx context.Context) error {
	hctx, cancel := context.WithTimeout(ctx, h.cfg.Every)
	sent := time.Now()
	renewed, err := h.cfg.Store.HeartbeatRuns(hctx, h.cfg.Replica, h.cfg.Lease)
	cancel()
	if err != nil {
		h.log.Warn("store: heartbeat", "err", err)
		h.cfg.Contact.Failed()
	} else {
		h.cfg.Contact.Renewed(sent)
		ren := NewRenewal(sent, renewed)
		h.cfg.Runs.Renewed(ren)
		if h.cfg.Takeover != nil {
			h.cfg.Takeover.Renewed(ren)
		}
	}
	// Stop requests are rows: polling finds those whose signal was lost.
	h.ApplyStops(ctx)
	if err == nil {
		h.Reap(ctx)
	}
	if err != nil {
		return fmt.Errorf("durable: heartbeat: %w", err)
	}
	return nil
}

// ApplyStops stops the runs here that were asked to stop through another replica.
func (h *Heartbeat) ApplyStops(ctx context.Context) {
	ctx, cancel := context.WithTimeout(ctx, StoreWriteTimeout)
	defer cancel()
	reqs, err := h.cfg.Store.StopRequests(ctx, h.cfg.Replica)
	if err != nil {
		h.log.Warn("store: stop requests", "err", err)
		return
	}
	for _, req := range reqs {
		h.cfg.Runs.StopRequested(req.ThreadID, req.RunID)
	}
}

// Reap looks after the runs of replicas that stopped heartbeating that a new run on their
// thread marked lost (store.RunLost): each is claimed once (Store.ClaimLapsedRuns), has its
// remote work cancelled (RunsHere.CancelWork) and its event log ended with
// RUN_ERROR{RUN_LOST}, so that nothing is left running at a peer without an owner. A
// running run whose lease lapsed is the takeover's, not this. It returns the runs reaped.
func (h *Heartbeat) Reap(ctx context.Context) int {
	ctx, cancel := context.WithTimeout(ctx, StoreWriteTimeout)
	defer cancel()
	runs, err := h.cfg.Store.ClaimLapsedRuns(ctx, h.cfg.Replica, ReapBatch)
	if err != nil {
		h.log.Warn("store: claim lost runs", "err", err)
		return 0
	}
	for _, run := range runs {
		var work Work
		if len(run.Work) > 0 {
			if err := json.Unmarshal(run.Work, &work); err != nil {
				h.log.Warn("lost run: unreadable work document", "thread_id", run.ThreadID, "run_id", run.RunID)
			}
		}
		h.cfg.Runs.CancelWork(run, work)
		EndLostLog(ctx, h.cfg.Store, run, h.cfg.Now(), "The run was interrupted and did not finish.", h.log)
		h.log.Warn("lost run ended: its replica stopped heartbeating and its thread went on", "thread_id", run.ThreadID, "run_id", run.RunID)
	}
	return len(runs)
}

// LostLogStore is what EndLostLog reads and writes: a run's event log.
type LostLogStore interface {
	EventReader
	AppendEvents(ctx context.Context, threadID, runID string, epoch int64, evs []store.Event) error
}

// EndLostLog ends the event log of a run that will not go on (rec, under the epoch its
// claim gave this replica) with RUN_ERROR{code:"RUN_LOST", message} stamped now, unless it
// already ends with a terminal event. Like a takeover it numbers on from the log's last
// event (a live stream shows only stored events), and a log with nothing stored gets its
// RUN_STARTED first, so that a client reconnecting anywhere sees a whole stream. Failures
// are logged: the run's record is what the caller ends next.
func EndLostLog(ctx context.Context, st LostLogStore, rec store.RunRecord, now time.Time, message string, log *slog.Logger) {
	evs, err := ReadLog(ctx, st, rec.ThreadID, rec.RunID)
	if err != nil {
		log.Warn("store: read lapsed run's events", "err", err)
		return
	}
	if TerminalState(evs) != "" {
		return
	}
	ms := now.UnixMilli()
	seq := LastSeq(evs)
	var out []store.Event
	if len(evs) == 0 {
		data, err := agui.MarshalEvent(&agui.RunStarted{ThreadID: rec.ThreadID, RunID: rec.RunID, Base: agui.Base{Timestamp: ms}})
		if err != nil {
			return
		}
		seq++
		out = append(out, store.Event{Seq: seq, Data: data})
	}
	data, err := agui.MarshalEvent(&agui.RunError{Code: "RUN_LOST", Message: message, Base: agui.Base{Timestamp: ms}})
	if err != nil {
		return
	}
	out = append(out, store.Event{Seq: seq + 1, Data: data})
	if err := st.AppendEvents(ctx, rec.ThreadID, rec.RunID, rec.Epoch, out); err != nil {
		log.Warn("store: end lapsed run's log", "err", err)
	}
}
