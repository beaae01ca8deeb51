package coordinator

import (
	"context"
	"time"

	"github.com/baton-dev/baton/agui"
	"github.com/baton-dev/baton/internal/startstop"
	"github.com/baton-dev/baton/store"
)

// Interrupt expiry (DESIGN §9): every replica sweeps, the store hands each expired
// suspension to one of them, and the swept interrupt ids are remembered for late resumes.

// expiredKey is the id under which an expired interrupt is remembered among the resolved
// ids (Store.MarkResolved): the store keeps them per thread, bounded, and outliving the
// suspension, which is what a late resume needs. Interrupt ids start with "int-", so a key
// never passes for an answered interrupt (duplicateResume).
func expiredKey(id string) string { return "expired:" + id }

// expiredResume returns the ids of entries that answer an interrupt which expired and was
// swept (expireClaimed).
func (e *Engine) expiredResume(ctx context.Context, threadID string, entries []agui.ResumeEntry) ([]string, error) {
	var out []string
	for _, en := range entries {
		ok, err := e.cfg.Store.IsResolved(ctx, threadID, expiredKey(en.InterruptID))
		if err != nil {
			return nil, err
		}
		if ok {
			out = append(out, en.InterruptID)
		}
	}
	return out, nil
}

// expire cancels the parked work of a suspension whose interrupts expired and removes it.
// The resume run that found it expired calls it: the thread's running run keeps the
// janitors of every replica away from it meanwhile (ClaimExpired).
func (e *Engine) expire(ctx context.Context, susp *store.Suspension) {
	cctx, cancel := context.WithTimeout(ctx, e.cfg.CancelTimeout)
	defer cancel()
	if err := e.cfg.Store.DeleteSuspension(cctx, susp.ThreadID); err != nil {
		e.log.Error("delete expired suspension", "thread_id", susp.ThreadID, "err", err)
	}
	e.jobs.expiry.expireClaimed(ctx, susp)
}

// expirer is the interrupt expiry: a service (Start, Stop) that sweeps the expired
// suspensions in the background (the janitor) when an interval is configured, and the
// expiry of a suspension claimed, which a resume that finds its suspension expired uses too.
type expirer struct {
	e       *Engine
	service *startstop.Service // nil when no interval is configured
}

// newExpirer returns e's expiry, sweeping every interval (never when it is not positive).
func newExpirer(e *Engine, every time.Duration) *expirer {
	x := &expirer{e: e}
	if every > 0 {
		x.service = startstop.NewService("expiry", func(ctx context.Context) { x.janitor(ctx, every) })
	}
	return x
}

// Start starts the janitor, when an interval is configured.
func (x *expirer) Start(ctx context.Context) { x.service.Start(ctx) }

// Stop stops the janitor, waiting for the expiry in progress (see startstop.Service.Stop).
func (x *expirer) Stop(ctx context.Context) error { return x.service.Stop(ctx) }

// expireClaimed cancels the parked work of an expired suspension that is no longer in the
// store (ClaimExpired removed it, or expire did), after remembering its interrupt ids as
// expired, so that a resume of them that arrives later still gets INTERRUPT_EXPIRED
// instead of running as a plain run of a thread with nothing open.
func (x *expirer) expireClaimed(ctx context.Context, susp *store.Suspension) {
	e := x.e
	keys := make([]string, 0, len(susp.Interrupts))
	for _, in := range susp.Interrupts {
		keys = append(keys, expiredKey(in.ID))
	}
	mctx, cancel := context.WithTimeout(ctx, storeWriteTimeout)
	if err := e.cfg.Store.MarkResolved(mctx, susp.ThreadID, keys); err != nil {
		e.log.Warn("store: remember expired interrupts", "thread_id", susp.ThreadID, "err", err)
	}
	cancel()
	e.abandon(ctx, susp.Owner, susp.ThreadID, susp.Interrupts)
	if e.cfg.Metrics != nil {
		e.cfg.Metrics.InterruptsOpen(-len(susp.Interrupts))
	}
}

// expiryClaimBatch bounds the suspensions one sweep claims, so that a backlog is worked
// off over several ticks (and shared with other replicas) instead of in one long sweep.
const expiryClaimBatch = 50

// janitor expires interrupts in the background. Every replica runs one; the store hands
// each expired suspension to one of them (ClaimExpired), so parked work is cancelled once
// however many replicas sweep. A suspension is claimed before its work is cancelled: a
// replica that dies in between leaves a parked task uncancelled (the agent's own expiry
// ends it), never one cancelled twice or a suspension that keeps coming back.
func (x *expirer) janitor(ctx context.Context, every time.Duration) {
	e := x.e
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), every)
		expired, err := e.cfg.Store.ClaimExpired(sctx, e.cfg.Now(), expiryClaimBatch)
		if err != nil {
			e.log.Warn("expiry scan", "err", err)
		}
		cancel()
		for _, s := range expired {
			// The cancellations get their own time (CancelTimeout inside abandon), not what
			// is left of the scan's tick.
			x.expireClaimed(context.Background(), s)
		}
	}
}
