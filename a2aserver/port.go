package a2aserver

import (
	"context"
	"errors"
	"fmt"

	"github.com/baton-dev/baton/agui"
	"github.com/baton-dev/baton/cancel"
	"github.com/baton-dev/baton/runs"
)

// Port is the engine's port as the A2A surface uses it (coordinator.Runs fits): runs,
// tasks and the logs of runs relayed anywhere, every call naming its principal.
type Port interface {
	Start(ctx context.Context, in *agui.RunAgentInput, principal string, opts runs.StartOptions) (*runs.Started, error)
	Stop(threadID, runID, principal string) error
	Tasks
	Log
}

// portEngine starts and stops runs through the port, admitted against maxActive
// (server.max_active_runs) in the same step as every other start, and answers the port's
// refusals as this surface's errors.
type portEngine struct {
	port      Port
	maxActive int
}

func (p portEngine) Start(ctx context.Context, in *agui.RunAgentInput, principal string) (Run, error) {
	st, err := p.port.Start(ctx, in, principal, runs.StartOptions{MaxActive: p.maxActive})
	var budget *runs.BudgetExceededError
	switch {
	case err == nil:
		return startedRun{st}, nil
	case errors.As(err, &budget):
		return nil, &BudgetExceededError{Message: budget.Message, ResetsAt: budget.ResetsAt}
	case errors.Is(err, runs.ErrThreadBusy), errors.Is(err, runs.ErrTooManyRuns):
		return nil, fmt.Errorf("%w: %w", ErrBusy, err)
	case errors.Is(err, runs.ErrForbidden):
		return nil, fmt.Errorf("%w: %w", ErrForbidden, err)
	case errors.Is(err, runs.ErrShuttingDown):
		return nil, fmt.Errorf("%w: %w", ErrShuttingDown, err)
	case errors.Is(err, runs.ErrTooDeep):
		return nil, fmt.Errorf("%w: %w", ErrTooDeep, err)
	case errors.Is(err, runs.ErrTooManyThreads):
		return nil, fmt.Errorf("%w: %w", ErrTooManyThreads, err)
	default:
		return nil, err
	}
}

func (p portEngine) Stop(threadID, runID, principal string) error {
	return p.port.Stop(threadID, runID, principal)
}

// startedRun is a run the port started, as this surface reads it.
type startedRun struct{ s *runs.Started }

func (r startedRun) NextFrom() (int64, []agui.Event, bool) { return r.s.Stream.NextFrom() }
func (r startedRun) Wake() <-chan struct{}                 { return r.s.Stream.Wake() }
func (r startedRun) Done() <-chan struct{}                 { return r.s.Done }
func (r startedRun) Cancellations() []cancel.Report        { return r.s.Cancellations() }
