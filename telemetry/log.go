package telemetry

import (
	"context"
	"log/slog"

	"go.opentelemetry.io/otel/trace"
)

// LogHandler wraps h so that a record logged with a context (InfoContext and the like)
// carries trace_id and span_id of the span in that context, and thread_id and run_id
// when the context belongs to a run (WithRun). Records without such a context pass
// through unchanged.
func LogHandler(h slog.Handler) slog.Handler { return &logHandler{h: h} }

type logHandler struct{ h slog.Handler }

func (l *logHandler) Enabled(ctx context.Context, lv slog.Level) bool { return l.h.Enabled(ctx, lv) }

func (l *logHandler) Handle(ctx context.Context, r slog.Record) error {
	if ctx != nil {
		if ids, ok := ctx.Value(runKey{}).(runIDs); ok {
			r.AddAttrs(slog.String("thread_id", ids.thread), slog.String("run_id", ids.run))
		}
		if sc := trace.SpanContextFromContext(ctx); sc.IsValid() {
			r.AddAttrs(slog.String("trace_id", sc.TraceID().String()), slog.String("span_id", sc.SpanID().String()))
		}
	}
	return l.h.Handle(ctx, r)
}

func (l *logHandler) WithAttrs(as []slog.Attr) slog.Handler {
	return &logHandler{h: l.h.WithAttrs(as)}
}

func (l *logHandler) WithGroup(name string) slog.Handler {
	return &logHandler{h: l.h.WithGroup(name)}
}

type runKey struct{}

type runIDs struct {
	thread, run string
}

// WithRun marks ctx as a run's, so that log lines written with it by packages that do
// not know the run (mcpclient, a2a) name its thread and run.
func WithRun(ctx context.Context, threadID, runID string) context.Context {
	return context.WithValue(ctx, runKey{}, runIDs{thread: threadID, run: runID})
}
