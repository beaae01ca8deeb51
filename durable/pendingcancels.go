package durable

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/baton-dev/baton/store"
)

// CancelStore is what PendingCancels writes: the store's pending cancels.
type CancelStore interface {
	SavePendingCancel(ctx context.Context, c store.PendingCancel) error
	DeletePendingCancel(ctx context.Context, agent, taskID string) error
	PendingCancels(ctx context.Context, limit int) ([]store.PendingCancel, error)
}

// PendingCancels keeps the CancelTask calls an agent has not confirmed yet in the store
// (design/cancel-confirm.md): one is recorded when the replica starts following it and
// forgotten when it has its final result, so that a restart continues it (List) within
// the same horizon. A write that fails is logged: the cancel goes on here, only a restart
// would not continue it.
type PendingCancels struct {
	st  CancelStore
	log *slog.Logger
}

// NewPendingCancels returns the pending cancels kept in st.
func NewPendingCancels(st CancelStore, log *slog.Logger) *PendingCancels {
	return &PendingCancels{st: st, log: log}
}

// Record records a cancel of agent's task followed since since. The owner (the principal
// id, never a token) is kept so that a restart sends the cancel with the owner's
// credentials for the agent.
func (p *PendingCancels) Record(agent, taskID, owner string, since time.Time) {
	// A cancel is recorded because its run's context ended: the record must outlive it.
	ctx, cancel := context.WithTimeout(context.Background(), StoreWriteTimeout)
	defer cancel()
	if err := p.st.SavePendingCancel(ctx, store.PendingCancel{Agent: agent, TaskID: taskID, Since: since, Owner: owner}); err != nil {
		p.log.Warn("store: record pending cancel; a restart would not continue it", "agent", agent, "task_id", taskID, "err", err)
	}
}

// Forget forgets a cancel that has its final result (confirmed, refused or abandoned).
func (p *PendingCancels) Forget(agent, taskID string) {
	// Forgotten after the cancel's final result, often once its run has ended.
	ctx, cancel := context.WithTimeout(context.Background(), StoreWriteTimeout)
	defer cancel()
	if err := p.st.DeletePendingCancel(ctx, agent, taskID); err != nil {
		p.log.Warn("store: forget settled cancel", "agent", agent, "task_id", taskID, "err", err)
	}
}

// List returns the cancels an earlier process left pending (at most
// store.MaxPendingCancelsRead).
func (p *PendingCancels) List(ctx context.Context) ([]store.PendingCancel, error) {
	return p.st.PendingCancels(ctx, store.MaxPendingCancelsRead)
}

// CancelResumer continues one cancel an earlier process left pending; it is defined here
// and implemented by the run loop's package, which knows the agents and their credentials.
type CancelResumer interface {
	// ResumeCancel continues c's cancel: its retries and its final result are the
	// resumer's (which forgets it here once settled, as every cancel it follows). It
	// returns false when it cannot (c's agent is not configured here): the cancel is then
	// left to another replica until its horizon, then forgotten.
	ResumeCancel(c store.PendingCancel) bool
}

// Resume hands every cancel an earlier process left pending to r, at start, so that a
// restart continues them within the same horizon. One that r cannot continue (its agent is
// not configured here) is kept for the replicas that still have the agent (a rolling
// configuration change on a shared store) until horizon has passed since it was decided,
// then forgotten (and logged); horizon 0 forgets it at once. It returns how many r
// continues; an error is the store's (nothing is continued).
func (p *PendingCancels) Resume(ctx context.Context, r CancelResumer, horizon time.Duration) (int, error) {
	ctx, cancel := context.WithTimeout(ctx, StoreWriteTimeout)
	pending, err := p.List(ctx)
	cancel()
	if err != nil {
		return 0, fmt.Errorf("durable: resume pending cancels: %w", err)
	}
	n := 0
	for _, c := range pending {
		if !r.ResumeCancel(c) {
			if time.Since(c.Since) < horizon {
				p.log.Warn("pending cancel of an agent no longer configured here: left to a replica that still has it until its horizon", "agent", c.Agent, "task_id", c.TaskID)
				continue
			}
			p.log.Warn("pending cancel of an agent no longer configured, past its horizon: dropped", "agent", c.Agent, "task_id", c.TaskID)
			p.Forget(c.Agent, c.TaskID)
			continue
		}
		n++
	}
	if n > 0 {
		p.log.Info("continuing cancels left pending by an earlier process", "count", n)
	}
	return n, nil
}
