package durable

import (
	"context"
	"log/slog"
	"time"

	"github.com/baton-dev/baton/agui"
	"github.com/baton-dev/baton/internal/startstop"
	"github.com/baton-dev/baton/store"
)

// Interrupt expiry (DESIGN §9): every replica sweeps, the store hands each expired
// suspension to one of them, and the swept interrupt ids are remembered for late resumes.

// ExpiryStore is what the interrupt expiry reads and writes: the claim and removal of
// expired suspensions, and the ids of the interrupts they held, remembered as expired.
type ExpiryStore interface {
	ClaimExpired(ctx context.Context, now time.Time, limit int) ([]*store.Suspension, error)
	DeleteSuspension(ctx context.Context, threadID string) error
	MarkResolved(ctx context.Context, threadID string, ids []string) error
	IsResolved(ctx context.Context, threadID, interruptID string) (bool, error)
}

// ExpiryConfig configures an Expiry.
type ExpiryConfig struct {
	Store ExpiryStore
	// Every is the time between two sweeps; not positive: no background sweep (an expiry
	// that a resume finds is still expired, through Expire).
	Every time.Duration
	// CancelTimeout bounds the removal of a suspension a resume found expired.
	CancelTimeout time.Duration
	// Now is the clock the sweeps compare the interrupts' expiry with (default time.Now).
	Now func() time.Time
	// Parked cancels the parked work of an expired suspension.
	Parked ExpiredWork
	Logger *slog.Logger
}

// ExpiredWork cancels the work parked on the interrupts of an expired suspension; it is
// defined here and implemented by the run loop's package, which knows the agents.
type ExpiredWork interface {
	// AbandonExpired cancels the parked work of susp, whose interrupts expired and which is
	// no longer in the store.
	AbandonExpired(ctx context.Context, susp *store.Suspension)
}

// expiryClaimBatch bounds the suspensions one sweep claims, so that a backlog is worked
// off over several ticks (and shared with other replicas) instead of in one long sweep.
const expiryClaimBatch = 50

// Expiry is the interrupt expiry: the service "expiry" (Start, Stop) that sweeps the
// expired suspensions in the background (the janitor) when an interval is configured, and
// the expiry of a suspension that a resume finds expired (Expire), with the memory of the
// interrupts that expired (Expired).
type Expiry struct {
	cfg     ExpiryConfig
	log     *slog.Logger
	service *startstop.Service // nil when no interval is configured
}

// NewExpiry returns the expiry configured by cfg, not started.
func NewExpiry(cfg ExpiryConfig) *Expiry {
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	x := &Expiry{cfg: cfg, log: cfg.Logger}
	if cfg.Every > 0 {
		x.service = startstop.NewService("expiry", func(ctx context.Context) { x.janitor(ctx, cfg.Every) })
	}
	return x
}

// Start starts the janitor, when an interval is configured.
func (x *Expiry) Start(ctx context.Context) { x.service.Start(ctx) }

// Stop stops the janitor, waiting for the expiry in progress (see startstop.Service.Stop).
func (x *Expiry) Stop(ctx context.Context) error { return x.service.Stop(ctx) }

// expiredKey is the id under which an expired interrupt is remembered among the resolved
// ids (Store.MarkResolved): the store keeps them per thread, bounded, and outliving the
// suspension, which is what a late resume needs. Interrupt ids start with "int-", so a key
// never passes for an answered interrupt.
func expiredKey(id string) string { return "expired:" + id }

// Expired returns the interrupt ids of those of a resume's entries on threadID that answer
// an interrupt which expired and was swept (its work cancelled, its suspension removed).
func (x *Expiry) Expired(ctx context.Context, threadID string, entries []agui.ResumeEntry) ([]string, error) {
	var out []string
	for _, en := range entries {
		ok, err := x.cfg.Store.IsResolved(ctx, threadID, expiredKey(en.InterruptID))
		if err != nil {
			return nil, err
		}
		if ok {
			out = append(out, en.InterruptID)
		}
	}
	return out, nil
}

// Expire cancels the parked work of a suspension whose interrupts expired and removes it.
// The resume run that found it expired calls it: the thread's running run keeps the
// janitors of every replica away from it meanwhile (ClaimExpired).
func (x *Expiry) Expire(ctx context.Context, susp *store.Suspension) {
	cctx, cancel := context.WithTimeout(ctx, x.cfg.CancelTimeout)
	defer cancel()
	if err := x.cfg.Store.DeleteSuspension(cctx, susp.ThreadID); err != nil {
		x.log.Error("delete expired suspension", "thread_id", susp.ThreadID, "err", err)
	}
	x.expireClaimed(ctx, susp)
}

// expireClaimed cancels the parked work of an expired suspension that is no longer in the
// store (ClaimExpired removed it, or Expire did), after remembering its interrupt ids as
// expired, so that a resume of them that arrives later still gets INTERRUPT_EXPIRED
// instead of running as a plain run of a thread with nothing open.
func (x *Expiry) expireClaimed(ctx context.Context, susp *store.Suspension) {
	keys := make([]string, 0, len(susp.Interrupts))
	for _, in := range susp.Interrupts {
		keys = append(keys, expiredKey(in.ID))
	}
	mctx, cancel := context.WithTimeout(ctx, StoreWriteTimeout)
	if err := x.cfg.Store.MarkResolved(mctx, susp.ThreadID, keys); err != nil {
		x.log.Warn("store: remember expired interrupts", "thread_id", susp.ThreadID, "err", err)
	}
	cancel()
	x.cfg.Parked.AbandonExpired(ctx, susp)
}

// janitor expires interrupts in the background. Every replica runs one; the store hands
// each expired suspension to one of them (ClaimExpired), so parked work is cancelled once
// however many replicas sweep. A suspension is claimed before its work is cancelled: a
// replica that dies in between leaves a parked task uncancelled (the agent's own expiry
// ends it), never one cancelled twice or a suspension that keeps coming back.
func (x *Expiry) janitor(ctx context.Context, every time.Duration) {
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), every)
		expired, err := x.cfg.Store.ClaimExpired(sctx, x.cfg.Now(), expiryClaimBatch)
		if err != nil {
			x.log.Warn("expiry scan", "err", err)
		}
		cancel()
		for _, s := range expired {
			// The cancellations get their own time (the engine's cancel timeout), not what
			// is left of the scan's tick.
			x.expireClaimed(context.Background(), s)
		}
	}
}
