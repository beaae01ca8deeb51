package store

import (
	"context"
	"errors"
	"time"
)

// PendingCancel is an A2A CancelTask that the agent has not confirmed yet: the engine
// retries it until it is confirmed or its horizon passes, and records it here so that a
// restart continues it.
type PendingCancel struct {
	Agent  string
	TaskID string
	// Since is when the cancel was decided; the horizon counts from it.
	Since time.Time
	// Owner is the principal whose task it is (the engine's principal id, as threads keep
	// it; never a token): a restart continues the cancel with that principal's agent
	// credentials. "" is the anonymous principal, and the owner of cancels recorded before
	// schema version 8.
	Owner string
}

// MaxPendingCancelsRead bounds one PendingCancels call.
const MaxPendingCancelsRead = 10000

// Cancels holds the pending cancels.
type Cancels interface {
	// SavePendingCancel records a pending cancel; recording one that exists keeps its
	// first Since and Owner.
	SavePendingCancel(ctx context.Context, c PendingCancel) error
	// DeletePendingCancel forgets a cancel (confirmed, refused or abandoned); deleting an
	// absent one is no error.
	DeletePendingCancel(ctx context.Context, agent, taskID string) error
	// PendingCancels returns the pending cancels, oldest first, at most limit (capped at
	// MaxPendingCancelsRead).
	PendingCancels(ctx context.Context, limit int) ([]PendingCancel, error)
}

func checkCancel(c PendingCancel) error {
	if c.Agent == "" || c.TaskID == "" {
		return errors.New("store: pending cancel: the agent and the task id are required")
	}
	return nil
}
