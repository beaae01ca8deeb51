package dispatch

import (
	"context"
	"errors"
	"fmt"
)

// ErrFenced: the run may not act now (another replica owns it, its lease was lost, or it
// ended while it waited for the lease), so the call was not run.
var ErrFenced = errors.New("dispatch: the run may not act")

// Fencer says whether this replica may still start a side effect for the run.
type Fencer interface {
	// MayAct waits until the run may act, and returns an error when it may not.
	MayAct(ctx context.Context) error
}

// Fence is the first step: no call goes out while this replica cannot be sure it still
// owns the run. It waits for the run's lease, or stops the call with ErrFenced.
func Fence[O any](f Fencer) Step[O] {
	return Step[O]{Name: "fence", Wrap: func(next Handler[O]) Handler[O] {
		return func(ctx context.Context, c Call) (O, error) {
			if err := f.MayAct(ctx); err != nil {
				var zero O
				return zero, fmt.Errorf("%w: call %s: %w", ErrFenced, c.ID, err)
			}
			return next(ctx, c)
		}
	}}
}
