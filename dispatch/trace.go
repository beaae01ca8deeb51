package dispatch

// Tracer runs calls in their span (OpenTelemetry's execute_tool), which records each call's
// outcome.
type Tracer[R, O any] interface {
	// Trace returns next run in the call's span.
	Trace(next Handler[R, O]) Handler[R, O]
}

// Trace is the step that runs the call in its span.
func Trace[R, O any](t Tracer[R, O]) Step[R, O] {
	return Step[R, O]{Name: "trace", Wrap: t.Trace}
}
