package dispatch

// Tracer runs calls in their span (OpenTelemetry's execute_tool), which records each call's
// outcome.
type Tracer[O any] interface {
	// Trace returns next run in the call's span.
	Trace(next Handler[O]) Handler[O]
}

// Trace is the step that runs the call in its span.
func Trace[O any](t Tracer[O]) Step[O] {
	return Step[O]{Name: "trace", Wrap: t.Trace}
}
