package dispatch

import (
	"context"
	"errors"
	"fmt"
)

// ErrFenced: the run may not act now (another replica owns it, its lease was lost, or it
// ended while it waited for the lease), so the call was not run.
var ErrFenced = errors.New("dispatch: the run may not act")

// Fencer says whether this replica may still start a side effect for a run.
type Fencer[R any] interface {
	// MayAct waits until run may act, and returns an error when it may not.
	MayAct(ctx context.Context, run R) error
}

// Fence is the first step: no call goes out while this replica cannot be sure it still
// owns the call's run. It waits for the run's lease, or stops the call with ErrFenced. It
// is a check: it has nothing to do once the call runs.
func Fence[R, O any](f Fencer[R]) Step[R, O] {
	return Step[R, O]{Name: "fence", Check: func(ctx context.Context, run R, c Call) error {
		if err := f.MayAct(ctx, run); err != nil {
			return fenced(c, err)
		}
		return nil
	}}
}

// fenced is the error of a call the fence stopped.
func fenced(c Call, err error) error {
	return fmt.Errorf("%w: call %s: %w", ErrFenced, c.ID, err)
}
