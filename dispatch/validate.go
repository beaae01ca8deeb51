package dispatch

import (
	"context"
	"encoding/json"
)

// Validate is the step that decodes a call's arguments into Call.Args: a call whose
// arguments are not a JSON object is not run, and refuse(c) is its outcome.
func Validate[O any](refuse func(c Call) O) Step[O] {
	return Step[O]{Name: "validate", Wrap: func(next Handler[O]) Handler[O] {
		return func(ctx context.Context, c Call) (O, error) {
			var args map[string]any
			if err := json.Unmarshal([]byte(c.Arguments), &args); err != nil || args == nil {
				return refuse(c), nil
			}
			c.Args = args
			return next(ctx, c)
		}
	}}
}
