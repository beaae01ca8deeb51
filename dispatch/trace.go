package dispatch

import "context"

// Tracer runs a call in its span (OpenTelemetry's execute_tool), which records the call's
// outcome.
type Tracer[O any] interface {
	Trace(ctx context.Context, c Call, next Handler[O]) (O, error)
}

// Trace is the step that runs the call in its span.
func Trace[O any](t Tracer[O]) Step[O] {
	return Step[O]{Name: "trace", Wrap: t.Trace}
}
