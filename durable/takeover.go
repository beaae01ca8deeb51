package durable

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"time"

	"github.com/baton-dev/baton/fence"
	"github.com/baton-dev/baton/internal/startstop"
	"github.com/baton-dev/baton/store"
)

// TakeoverStore is what a Takeover reads and writes: the claim of lapsed runs, a run's
// record and its event log, and the end of a run whose log had ended.
type TakeoverStore interface {
	RunReader
	EventReader
	TakeOverRuns(ctx context.Context, replica string, lease time.Duration, limit int, anyLease bool) ([]store.RunRecord, error)
	TakeOverReleasedRuns(ctx context.Context, replica string, lease time.Duration, limit int) ([]store.RunRecord, error)
	EndRun(ctx context.Context, threadID, runID string, epoch int64, state string) error
	EndRunMessages(ctx context.Context, threadID, runID string, epoch int64, state string, step *store.Step, msgs []store.Message) error
	AppendEvents(ctx context.Context, threadID, runID string, epoch int64, evs []store.Event) error
}

// Claim is a run this replica has just taken over: its record (under the epoch the claim
// gave it), when its lease was last renewed by a statement this replica sent (the claim, or
// a heartbeat since: the lease counts from there), and its whole event log, which does not
// end with a terminal event.
type Claim struct {
	Run  store.RunRecord
	Sent time.Time
	Log  []store.Event
}

// Adopter continues the runs a Takeover claims; it is defined here and implemented by the
// run loop's package. Adopt either starts the run on this replica and returns nil, or
// returns a *NotContinued when the run cannot continue here (the Takeover then ends it);
// another error leaves the run to be adopted again at the next look (this replica owns it,
// and its heartbeat renews its lease meanwhile).
type Adopter interface {
	Adopt(ctx context.Context, c Claim) error
}

// WorkCanceller cancels the remote work (A2A tasks) that the work document of a run that
// will not go on lists as not terminal; it is defined here and implemented by the run
// loop's package, which knows the agents and their owners' credentials.
type WorkCanceller interface {
	CancelWork(rec store.RunRecord, work Work)
}

// NotContinued is an Adopter's answer for a claimed run that cannot continue here (its
// checkpoint is unreadable, its agent not configured, its time spent, its thread busy):
// the Takeover ends it (Takeover.end).
type NotContinued struct {
	// Why says what stops the run, in words for its log's RUN_ERROR and its journal.
	Why string
	// Work is the run's work document as read from its record, whose remote work is
	// cancelled.
	Work Work
}

func (n *NotContinued) Error() string { return "durable: the run cannot continue: " + n.Why }

// TakeoverConfig configures a Takeover.
type TakeoverConfig struct {
	Store TakeoverStore
	// Replica is this replica's id; Lease the lease a claim gives a run.
	Replica string
	Lease   time.Duration
	// Every is the time between two looks (the engine: half a heartbeat).
	Every time.Duration
	// AtStart: the service's first look claims every running run of other replica ids,
	// whatever its lease (one process on a store that is not shared: whatever a previous
	// process left running is this one's to continue).
	AtStart bool
	// Contact is this replica's contact with the store (its heartbeats): lapsed runs are
	// claimed only by the claim rule (fence.Contact.MayClaim). Nil: contact never broke.
	Contact *fence.Contact
	Adopter Adopter
	// Journal records the steps of a run that is not continued; Work cancels its remote
	// work; Now stamps its log's RUN_ERROR (default time.Now).
	Journal *Journal
	Work    WorkCanceller
	Now     func() time.Time
	// Batch bounds the runs one claim returns (default TakeoverBatch).
	Batch  int
	Logger *slog.Logger
}

// Bounds of one look: batches of TakeoverBatch runs (one statement each), up to
// takeoverRounds batches per look while they come back full (the next look goes on), the
// runs of a batch adopted takeoverWorkers at a time (each reads its log and writes journal
// steps).
const (
	TakeoverBatch   = 50
	takeoverRounds  = 8
	takeoverWorkers = 8
)

// Takeover claims the runs of other replicas whose lease lapsed and hands each to its
// Adopter, as the service "takeover" (Start, Stop) or one look at a time (Look).
//
// Design note: a dead replica leaves all its runs lapsing at about the same time, so one
// look claims batches one after another while they come back full, and adopts the runs of
// a batch several at a time, so that the runs past the first few do not wait for the next
// look or for the others' store reads. Each run is claimed under its own new epoch, and its
// adoption touches only its own rows: no order among them is needed. A run whose log
// cannot be read, or that the Adopter could not take, stays this replica's (its heartbeat
// renews its lease) and is tried again at the next look; a run whose log already ends with
// its terminal event only has its record ended.
type Takeover struct {
	cfg     TakeoverConfig
	log     *slog.Logger
	service *startstop.Service
	wake    chan struct{}
	// looking: one look at a time (the service's and a caller's).
	looking sync.Mutex

	mu sync.Mutex
	// pending holds the runs claimed here and not adopted yet, by thread and run id.
	pending map[[2]string]Claim
}

// NewTakeover returns a Takeover of cfg; its service is not started.
func NewTakeover(cfg TakeoverConfig) *Takeover {
	if cfg.Batch <= 0 {
		cfg.Batch = TakeoverBatch
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	t := &Takeover{cfg: cfg, log: cfg.Logger, wake: make(chan struct{}, 1), pending: map[[2]string]Claim{}}
	t.service = startstop.NewService("takeover", t.run)
	return t
}

// Start starts the service "takeover": a look every cfg.Every, and at once when woken.
func (t *Takeover) Start(ctx context.Context) { t.service.Start(ctx) }

// Stop stops the service, waiting for the look in progress (see Service.Stop).
func (t *Takeover) Stop(ctx context.Context) error { return t.service.Stop(ctx) }

// Wake asks the service for a look now (another replica released its runs).
func (t *Takeover) Wake() {
	select {
	case t.wake <- struct{}{}:
	default:
	}
}

func (t *Takeover) run(ctx context.Context) {
	if t.cfg.AtStart {
		t.Look(ctx, true)
	}
	tick := time.NewTicker(t.cfg.Every)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		case <-t.wake:
		}
		t.Look(ctx, false)
	}
}

// Look tries again the runs claimed earlier and not adopted yet, then claims lapsed runs of
// other replicas (all running runs of other replica ids with anyLease) in batches, while
// they come back full, and adopts them. It returns the number of runs it claimed. A batch
// once claimed is adopted whatever ctx does; ctx ending stops the look before the next one.
func (t *Takeover) Look(ctx context.Context, anyLease bool) int {
	t.looking.Lock()
	defer t.looking.Unlock()
	claimed := 0
	for round := range takeoverRounds {
		if ctx.Err() != nil {
			return claimed
		}
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), StoreWriteTimeout)
		if round == 0 {
			t.retry(rctx)
		}
		sent := time.Now()
		var recs []store.RunRecord
		var err error
		if !anyLease && t.cfg.Contact != nil && !t.cfg.Contact.MayClaim(t.cfg.Lease) {
			// Not a lease of unbroken contact with the store yet: a lapsed lease may be one
			// that its live owner could not renew during an outage (design/fencing.md). A
			// run handed off at its replica's shutdown has no owner left: it is taken over
			// at once all the same (else one slow heartbeat here would hold it a lease).
			recs, err = t.cfg.Store.TakeOverReleasedRuns(rctx, t.cfg.Replica, t.cfg.Lease, t.cfg.Batch)
		} else {
			recs, err = t.cfg.Store.TakeOverRuns(rctx, t.cfg.Replica, t.cfg.Lease, t.cfg.Batch, anyLease)
		}
		if err != nil {
			cancel()
			t.log.Warn("store: take over lapsed runs", "err", err)
			return claimed
		}
		claimed += len(recs)
		inParallel(len(recs), takeoverWorkers, func(i int) { t.adopt(rctx, Claim{Run: recs[i], Sent: sent}) })
		cancel()
		if len(recs) < t.cfg.Batch {
			return claimed
		}
	}
	return claimed
}

// adopt reads the claimed run's log and hands the run to the Adopter, unless its log ended
// (its record is then ended as the log says); a run that cannot be read or adopted now is
// kept for the next look.
func (t *Takeover) adopt(ctx context.Context, c Claim) {
	rec := c.Run
	log := t.log.With("thread_id", rec.ThreadID, "run_id", rec.RunID, "takeover", true)
	evs, err := ReadLog(ctx, t.cfg.Store, rec.ThreadID, rec.RunID)
	if err != nil {
		log.Warn("takeover: read the event log; trying again at the next look", "err", err)
		t.later(c)
		return
	}
	if state := TerminalState(evs); state != "" {
		// The run had ended; only its record was not updated. The messages it added to its
		// thread go with the record's end: its owner stores them with the end
		// (EventLog.MessagesWithEnd), which it did not get to write (or was fenced from).
		if err := t.cfg.Store.EndRunMessages(ctx, rec.ThreadID, rec.RunID, rec.Epoch, state, nil, logMessages(evs)); err != nil {
			log.Warn("store: end a finished run taken over", "err", err)
			if !errors.Is(err, store.ErrFenced) {
				t.later(c)
			}
		}
		return
	}
	c.Log = evs
	var nc *NotContinued
	if err := t.cfg.Adopter.Adopt(ctx, c); errors.As(err, &nc) {
		t.end(ctx, rec, nc)
	} else if err != nil {
		log.Warn("takeover: the run was not adopted; trying again at the next look", "err", err)
		t.later(c)
	}
}

// end ends a run taken over that cannot continue (nc says why): its remote tasks are
// cancelled, its log ends with RUN_ERROR{RUN_LOST} and its record with the error outcome
// (not RunLost, which would hand it out for cleanup once more). A run taken over again
// since is left to its newer owner.
func (t *Takeover) end(ctx context.Context, rec store.RunRecord, nc *NotContinued) {
	if err := t.cfg.Journal.MarkInDoubtAfterTakeover(ctx, RunRef{ThreadID: rec.ThreadID, RunID: rec.RunID, Epoch: rec.Epoch}); errors.Is(err, store.ErrFenced) {
		// Another replica took the run over since: its work is that replica's to follow,
		// not to be cancelled from here.
		t.log.Warn("takeover: the run has a newer owner; leaving it", "thread_id", rec.ThreadID, "run_id", rec.RunID)
		return
	}
	t.cfg.Journal.Record(RunRef{ThreadID: rec.ThreadID, RunID: rec.RunID}, store.StepTakeover, t.cfg.Replica, "", store.StepEnd{Outcome: store.StepError, Detail: "run taken over but not continued: " + nc.Why})
	t.cfg.Work.CancelWork(rec, nc.Work)
	EndLostLog(ctx, t.cfg.Store, rec, t.cfg.Now(), "The run was interrupted and could not be continued: "+nc.Why+".", t.log)
	if err := t.cfg.Store.EndRun(ctx, rec.ThreadID, rec.RunID, rec.Epoch, RunError); err != nil {
		t.log.Warn("store: end a run that could not be taken over", "thread_id", rec.ThreadID, "run_id", rec.RunID, "err", err)
	}
}

// RunError is the state a run's record ends with when it could not be continued (the
// engine's error outcome).
const RunError = "error"

// later keeps a claimed run for the next look.
func (t *Takeover) later(c Claim) {
	c.Log = nil
	t.mu.Lock()
	defer t.mu.Unlock()
	t.pending[[2]string{c.Run.ThreadID, c.Run.RunID}] = c
}

// retry adopts again the runs kept by later that this replica still owns under the epoch
// it claimed them with; a run the store does not have any more, or that has another owner
// or has ended, is forgotten.
func (t *Takeover) retry(ctx context.Context) {
	t.mu.Lock()
	pending := t.pending
	t.pending = map[[2]string]Claim{}
	t.mu.Unlock()
	for _, c := range pending {
		cur, err := t.cfg.Store.GetRun(ctx, c.Run.ThreadID, c.Run.RunID)
		if err != nil {
			if !errors.Is(err, store.ErrNotFound) {
				t.later(c)
			}
			continue
		}
		if cur.Replica == t.cfg.Replica && cur.Epoch == c.Run.Epoch && cur.State == store.RunRunning {
			t.adopt(ctx, Claim{Run: *cur, Sent: c.Sent})
		}
	}
}

// Renewed applies a heartbeat to the runs kept for the next look: a run it renewed under
// the epoch it was claimed with has its lease counted from the heartbeat's sending.
func (t *Takeover) Renewed(r Renewal) {
	t.mu.Lock()
	defer t.mu.Unlock()
	for key, c := range t.pending {
		if epoch, ok := r.held[key]; ok && epoch == c.Run.Epoch && r.sent.After(c.Sent) {
			c.Sent = r.sent
			t.pending[key] = c
		}
	}
}

// Pending is the number of runs claimed here and kept for the next look.
func (t *Takeover) Pending() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return len(t.pending)
}

// inParallel calls f(0) to f(n-1), at most limit at a time, and returns when all returned.
func inParallel(n, limit int, f func(i int)) {
	sem := make(chan struct{}, limit)
	var wg sync.WaitGroup
	for i := range n {
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			f(i)
		})
	}
	wg.Wait()
}
