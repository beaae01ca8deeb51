package dispatch

import (
	"context"
	"encoding/json"
)

// Validate is the step that decodes a call's arguments into Call.Args: a call whose
// arguments are not a JSON object is not run, and refuse(run, c) is its outcome.
func Validate[R, O any](refuse func(run R, c Call) O) Step[R, O] {
	return Step[R, O]{Name: "validate", Wrap: func(next Handler[R, O]) Handler[R, O] {
		return func(ctx context.Context, run R, c Call) (O, error) {
			var args map[string]any
			if err := json.Unmarshal([]byte(c.Arguments), &args); err != nil || args == nil {
				return refuse(run, c), nil
			}
			c.Args = args
			return next(ctx, run, c)
		}
	}}
}
