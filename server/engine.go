package server

import (
	"context"
	"iter"

	"github.com/baton-dev/baton/agui"
	"github.com/baton-dev/baton/runs"
)

// Engine is the engine's port as the AG-UI surface uses it (coordinator.Runs fits). Every
// method names the principal and checks ownership itself: another principal's thread or
// run is not found.
type Engine interface {
	// Start starts a run of principal, admitted against opts.
	Start(ctx context.Context, in *agui.RunAgentInput, principal string, opts runs.StartOptions) (*runs.Started, error)
	// Stop stops a run of principal's thread.
	Stop(threadID, runID, principal string) error
	// SessionHome names the replica that holds the live session a resume must answer, or
	// "" when the resume runs here.
	SessionHome(ctx context.Context, threadID, principal string) (string, error)
	// RunEpoch returns a run's fencing epoch (0: none) and whether the thread is principal's.
	RunEpoch(ctx context.Context, principal, threadID, runID string) (epoch int64, yours bool, err error)
	// Thread, Threads and ThreadDoc read principal's threads.
	Thread(ctx context.Context, principal, threadID string) (*runs.Thread, error)
	Threads(ctx context.Context, principal string, limit int) ([]runs.Thread, error)
	ThreadDoc(ctx context.Context, principal, threadID string) (*runs.ThreadDoc, error)
	// DeleteThread deletes principal's thread.
	DeleteThread(ctx context.Context, threadID, principal string) error
	// Steps reads principal's thread's journal.
	Steps(ctx context.Context, principal, threadID string, after int64, limit int) ([]runs.Step, error)
	// Events follows a run of principal's thread from a position, on any replica.
	Events(ctx context.Context, principal, threadID, runID string, after int64, opts runs.FollowOptions) (iter.Seq2[[]runs.Event, error], error)
}
