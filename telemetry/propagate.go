package telemetry

import (
	"context"
	"net/http"

	"go.opentelemetry.io/otel/baggage"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
)

// Transport returns base wrapped so that every request carries the W3C trace context of
// its context (traceparent, tracestate, baggage). A request without a span is sent as it
// is. nil base means http.DefaultTransport.
func Transport(base http.RoundTripper) http.RoundTripper {
	if base == nil {
		base = http.DefaultTransport
	}
	return &transport{base: base}
}

type transport struct{ base http.RoundTripper }

// RoundTrip implements http.RoundTripper. The request is cloned before its headers are
// set: a RoundTripper must not modify the caller's request.
func (t *transport) RoundTrip(req *http.Request) (*http.Response, error) {
	ctx := req.Context()
	if !trace.SpanContextFromContext(ctx).IsValid() && baggage.FromContext(ctx).Len() == 0 {
		return t.base.RoundTrip(req)
	}
	out := req.Clone(ctx)
	Propagator.Inject(ctx, propagation.HeaderCarrier(out.Header))
	return t.base.RoundTrip(out)
}

// CloseIdleConnections forwards to the wrapped transport (http.Client looks for it).
func (t *transport) CloseIdleConnections() {
	if c, ok := t.base.(interface{ CloseIdleConnections() }); ok {
		c.CloseIdleConnections()
	}
}

// Unwrap returns the wrapped transport.
func (t *transport) Unwrap() http.RoundTripper { return t.base }

// Client returns an HTTP client without a timeout (streams outlive any whole-request
// timeout) whose transport is a clone of the default one, wrapped by Transport.
func Client() *http.Client {
	return &http.Client{Transport: Transport(http.DefaultTransport.(*http.Transport).Clone())}
}

// Extract is HTTP middleware: the trace context of an incoming request (traceparent,
// tracestate, baggage) becomes the remote parent in the request's context.
func Extract(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("traceparent") != "" || r.Header.Get("baggage") != "" {
			r = r.WithContext(Propagator.Extract(r.Context(), propagation.HeaderCarrier(r.Header)))
		}
		next.ServeHTTP(w, r)
	})
}

// Detached returns a context that carries only the span context (and baggage) of ctx:
// work that outlives a request, such as a run, is parented by the request's trace without
// inheriting its cancellation or values.
func Detached(ctx context.Context) context.Context {
	out := context.Background()
	if sc := trace.SpanContextFromContext(ctx); sc.IsValid() {
		out = trace.ContextWithSpanContext(out, sc)
	}
	if b := baggage.FromContext(ctx); b.Len() > 0 {
		out = baggage.ContextWithBaggage(out, b)
	}
	return out
}
