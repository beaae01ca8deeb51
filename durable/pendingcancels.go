package durable

import (
	"context"
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
	ctx, cancel := context.WithTimeout(context.Background(), StoreWriteTimeout)
	defer cancel()
	if err := p.st.SavePendingCancel(ctx, store.PendingCancel{Agent: agent, TaskID: taskID, Since: since, Owner: owner}); err != nil {
		p.log.Warn("store: record pending cancel; a restart would not continue it", "agent", agent, "task_id", taskID, "err", err)
	}
}

// Forget forgets a cancel that has its final result (confirmed, refused or abandoned).
func (p *PendingCancels) Forget(agent, taskID string) {
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
