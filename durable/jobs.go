package durable

import (
	"context"
	"log/slog"
	"time"

	"github.com/baton-dev/baton/fence"
	"github.com/baton-dev/baton/internal/startstop"
)

// JobsStore is what the background jobs read and write, all of them together.
type JobsStore interface {
	TakeoverStore
	HeartbeatStore
	SweepStore
	ExpiryStore
	ReleaseStore
	// StopSignals delivers the store's signal of a stop request or a hand-off
	// (store.Signaler); nil when the store has none.
	StopSignals() <-chan struct{}
}

// JobsConfig configures a replica's Jobs.
type JobsConfig struct {
	Store JobsStore
	// Replica is this replica's id; Lease the lease its claims and renewals give a run.
	Replica string
	Lease   time.Duration
	// Heartbeat is the time between two renewals of the leases; not positive: no
	// heartbeat, and so no takeover service and no sweep (no lease lapses to be seen).
	Heartbeat time.Duration
	// TakeOverAtStart: the takeover's first look claims every running run of other
	// replica ids (TakeoverConfig.AtStart).
	TakeOverAtStart bool
	// EventRetention is how long the event logs and finished runs are kept (the sweep).
	EventRetention time.Duration
	// ExpiryEvery is the time between two sweeps of expired interrupts (not positive:
	// none); CancelTimeout bounds the removal of one a resume found expired.
	ExpiryEvery   time.Duration
	CancelTimeout time.Duration
	// Contact is this replica's contact with the store, kept by the heartbeat and read by
	// the takeover's claim rule.
	Contact *fence.Contact
	// Now is the clock of the interrupt expiry and of the events written into the logs of
	// runs reaped or not continued (default time.Now).
	Now func() time.Time
	// Journal records the steps of the runs taken over and not continued.
	Journal *Journal
	Engine  Engine
	Logger  *slog.Logger
}

// Jobs are a replica's background services, each with a Start and a Stop: the interrupt
// expiry, the heartbeat (it renews this replica's leases, applies stop requests made
// through other replicas and reaps lost runs), the takeover of the runs of replicas whose
// lease lapsed, and the sweep of what is past its retention; and the hand-off of the runs
// still here at shutdown. A job not configured is nil, and its Start and Stop do nothing.
type Jobs struct {
	store     ReleaseStore
	replica   string
	log       *slog.Logger
	expiry    *Expiry
	heartbeat *Heartbeat
	takeover  *Takeover
	sweep     *startstop.Service
}

// NewJobs returns the jobs configured by cfg, not started.
func NewJobs(cfg JobsConfig) *Jobs {
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	j := &Jobs{store: cfg.Store, replica: cfg.Replica, log: cfg.Logger}
	j.expiry = NewExpiry(ExpiryConfig{Store: cfg.Store, Every: cfg.ExpiryEvery, CancelTimeout: cfg.CancelTimeout,
		Now: cfg.Now, Parked: cfg.Engine, Logger: cfg.Logger})
	j.takeover = NewTakeover(TakeoverConfig{
		Store: cfg.Store, Replica: cfg.Replica, Lease: cfg.Lease,
		// Lapsed leases are looked for twice per heartbeat (one indexed query): a dead
		// replica's runs are taken over within half a heartbeat of their lease's end.
		Every:   max(cfg.Heartbeat/2, 50*time.Millisecond),
		AtStart: cfg.TakeOverAtStart, Contact: cfg.Contact, Adopter: cfg.Engine, Logger: cfg.Logger,
		Journal: cfg.Journal, Work: cfg.Engine, Now: cfg.Now,
	})
	if cfg.Heartbeat > 0 {
		j.heartbeat = NewHeartbeat(HeartbeatConfig{
			Store: cfg.Store, Replica: cfg.Replica, Lease: cfg.Lease, Every: cfg.Heartbeat,
			Contact: cfg.Contact, Runs: cfg.Engine, Takeover: j.takeover, Signals: cfg.Store.StopSignals(),
			Now: cfg.Now, Logger: cfg.Logger,
		})
		j.sweep = NewSweepService(cfg.Store, cfg.Heartbeat, cfg.EventRetention, cfg.Logger)
	}
	return j
}

// Expiry is the interrupt expiry, which a resume that finds its interrupts expired uses.
func (j *Jobs) Expiry() *Expiry { return j.expiry }

// Takeover is the takeover of lapsed runs (one look at a time: Takeover.Look).
func (j *Jobs) Takeover() *Takeover { return j.takeover }

// Start starts the jobs; they run until Stop, or until ctx ends.
func (j *Jobs) Start(ctx context.Context) {
	j.expiry.Start(ctx)
	if j.heartbeat == nil {
		// The takeover runs with the heartbeat: without one, no lease lapses to be seen.
		return
	}
	j.heartbeat.Start(ctx)
	j.takeover.Start(ctx)
	j.sweep.Start(ctx)
}

// StopIntake stops the jobs that take work on: no run is taken over and no interrupt
// expired from here on. The look and the expiry in progress end first (a run the look
// claims is left to its lease, or to the hand-off's release). The heartbeat goes on: the
// leases of the runs still here hold until they have ended.
func (j *Jobs) StopIntake(ctx context.Context) {
	_ = j.takeover.Stop(ctx)
	_ = j.expiry.Stop(ctx)
	_ = j.sweep.Stop(ctx)
}

// Stop stops every job, the heartbeat last, waiting for the rounds in progress.
func (j *Jobs) Stop(ctx context.Context) error {
	j.StopIntake(ctx)
	return j.heartbeat.Stop(ctx)
}

// HandOff hands the runs still here to other replicas at shutdown (the function HandOff),
// stopping the heartbeat, which would renew the leases it ends. It returns the number of
// runs released.
func (j *Jobs) HandOff(runs []Leaving) (int, error) {
	return HandOff(j.store, j.replica, runs, j.heartbeat, j.log)
}
