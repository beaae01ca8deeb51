package dispatch

import "context"

// Tracer runs its calls in their span (OpenTelemetry's execute_tool), which records each
// call's outcome.
type Tracer[R, O any] interface {
	// Trace runs c through next (next(ctx, run, c), the run itself passed on) in the call's
	// span.
	Trace(ctx context.Context, c Call, next Handler[R, O]) (O, error)
}

// Trace is the step that runs the call in its span.
func Trace[R Tracer[R, O], O any]() Step[R, O] {
	return Step[R, O]{Name: "trace", Wrap: func(next Handler[R, O]) Handler[R, O] {
		return func(ctx context.Context, run R, c Call) (O, error) {
			return run.Trace(ctx, c, next)
		}
	}}
}
