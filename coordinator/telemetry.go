package coordinator

import (
	"context"
	"errors"

	"sync"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"

	"github.com/baton-dev/baton/bridge"
	"github.com/baton-dev/baton/failure"
	"github.com/baton-dev/baton/llm"
	"github.com/baton-dev/baton/store"
	"github.com/baton-dev/baton/telemetry"
)

// Tracing is how the engine reports its runs as OpenTelemetry spans (design/telemetry.md).
// The zero value traces nothing.
type Tracing struct {
	// Tracer creates the spans; nil means a no-op tracer.
	Tracer trace.Tracer
	// Provider is gen_ai.provider.name of the model ("openai", "anthropic", "scripted").
	Provider string
	// Model is gen_ai.request.model (the configured model name).
	Model string
}

// ModelMetrics is implemented by a Metrics that also records model calls; the engine
// reports them when it is (package metrics does).
type ModelMetrics interface {
	ModelCall(provider, model, outcome string, d time.Duration, inputTokens, outputTokens int)
}

// RunDurationMetrics is implemented by a Metrics that records how long runs take.
type RunDurationMetrics interface {
	RunDuration(outcome string, d time.Duration)
}

// ToolCallMetrics is implemented by a Metrics that records tool calls per target: kind is
// "agent" or "mcp", target the configured agent or MCP server name (never a peer's name).
type ToolCallMetrics interface {
	ToolCall(kind, target, tag, code string, d time.Duration)
}

// Attribute keys of Baton's own (DESIGN §10a) next to the GenAI and MCP conventions.
const (
	attrFailureKind  = attribute.Key("baton.failure.kind")
	attrPolicyAction = attribute.Key("baton.policy.action")
	attrTag          = attribute.Key("baton.tag")
	attrRunID        = attribute.Key("baton.run.id")
	attrOutcome      = attribute.Key("baton.run.outcome")
)

// noopTracer is the tracer of an engine configured without one.
var noopTracer = noop.NewTracerProvider().Tracer("")

// tracerOf is t's tracer, or the no-op one.
func tracerOf(t Tracing) trace.Tracer {
	if t.Tracer == nil {
		return noopTracer
	}
	return t.Tracer
}

// runTrace is a run's telemetry: its span, the spans of the current turn's tool calls
// (which stay open until the policy has decided about their results), and the metrics it
// reports. Its methods do nothing on a nil runTrace (a run built without startTrace).
type runTrace struct {
	span            trace.Span
	tracer          trace.Tracer
	tracing         Tracing
	metrics         Metrics
	threadID, runID string

	mu    sync.Mutex
	tools []toolSpan
	// ended: the run span has ended, so a delegation that settles later (a timed-out
	// request left to finish in the background) ends its own span at once.
	ended bool
}

type toolSpan struct {
	name string
	span trace.Span
	end  time.Time
	// parent is the execute_tool span a delegation span runs under (zero for the
	// execute_tool spans themselves): the tool call's tag is copied to it.
	parent trace.SpanID
}

// traced returns ctx with the run's span and ids (the run's own context descends from
// context.Background, not from the request).
func (t *runTrace) traced(ctx context.Context) context.Context {
	if t == nil {
		return ctx
	}
	ctx = trace.ContextWithSpan(ctx, t.span)
	return telemetry.WithRun(ctx, t.threadID, t.runID)
}

// end ends the run span with the run's typed end reason: the outcome is the span's
// outcome, and an error's detail its error.type.
func (t *runTrace) end(reason EndReason, d time.Duration) {
	if t == nil {
		return
	}
	outcome := string(reason.Outcome)
	if m, ok := t.metrics.(RunDurationMetrics); ok {
		m.RunDuration(outcome, d)
	}
	t.mu.Lock()
	t.ended = true
	t.mu.Unlock()
	t.endToolSpans()
	span := t.span
	span.SetAttributes(attrOutcome.String(outcome))
	if reason.Outcome == OutcomeError {
		span.SetAttributes(attribute.String("error.type", reason.Detail))
		span.SetStatus(codes.Error, reason.String())
	}
	span.End()
}

// decision records a policy decision: an event on the run span, the kind and action
// on the run span when the decision ends the run, and on the spans of the tool it is about.
func (t *runTrace) decision(d failure.Decision) {
	if t == nil {
		return
	}
	attrs := []attribute.KeyValue{attrFailureKind.String(string(d.Kind)), attrPolicyAction.String(string(d.Action)), attribute.Int("baton.failure.attempt", d.Attempt)}
	if d.Tool != "" {
		attrs = append(attrs, attribute.String("gen_ai.tool.name", d.Tool))
	}
	t.span.AddEvent("baton.failure", trace.WithAttributes(attrs...))
	if d.Action.Terminal() {
		t.span.SetAttributes(attrFailureKind.String(string(d.Kind)), attrPolicyAction.String(string(d.Action)))
	}
	if d.Tool == "" {
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, ts := range t.tools {
		if ts.name == d.Tool {
			ts.span.SetAttributes(attrFailureKind.String(string(d.Kind)), attrPolicyAction.String(string(d.Action)))
			ts.span.SetStatus(codes.Error, string(d.Kind))
		}
	}
}

// toolCall runs one tool call in an execute_tool span. The span is ended (with the time
// the call ended) once the policy has seen the turn's results, so that it carries the
// decision about its failure; see endToolSpans. sent tells whether the call went out
// (only those are counted in the tool-call metrics). The calls that go out run through
// the run's chain, whose trace step is chainSteps.Trace (the same span).
func (t *runTrace) toolCall(ctx context.Context, ts *toolset, c llm.ToolCall, run func(context.Context) toolOutcome, sent bool) toolOutcome {
	tc := t.startToolSpan(ctx, ts, c)
	out := run(tc.ctx)
	t.endToolSpan(tc, c, &out, sent)
	return out
}

// toolCallSpan is a tool call's span while the call runs, started and ended by functions
// of their own (startToolSpan, endToolSpan) so that toolCall reads as the call itself.
type toolCallSpan struct {
	ctx          context.Context
	span         trace.Span
	kind, target string
	start        time.Time
}

func (t *runTrace) startToolSpan(ctx context.Context, ts *toolset, c llm.ToolCall) *toolCallSpan {
	tc := &toolCallSpan{}
	if a, ok := ts.agents[c.Name]; ok {
		tc.kind, tc.target = "agent", a.Name
	} else if mt, ok := ts.mcp[c.Name]; ok {
		tc.kind, tc.target = "mcp", mt.Server
	}
	tc.ctx, tc.span = t.spanTracer().Start(ctx, "execute_tool "+c.Name, trace.WithSpanKind(trace.SpanKindInternal), trace.WithAttributes(
		attribute.String("gen_ai.operation.name", "execute_tool"),
		attribute.String("gen_ai.tool.name", c.Name),
		attribute.String("gen_ai.tool.call.id", c.ID),
		attribute.String("gen_ai.tool.type", toolType(tc.kind)),
	))
	tc.start = time.Now()
	return tc
}

func (t *runTrace) endToolSpan(tc *toolCallSpan, c llm.ToolCall, out *toolOutcome, sent bool) {
	d := time.Since(tc.start)
	span := tc.span
	tag, metricTag := "", ""
	if len(out.interrupts) > 0 {
		tag, metricTag = "INTERRUPT", "INTERRUPT"
		span.AddEvent("baton.interrupt", trace.WithAttributes(attribute.Int("baton.interrupts", len(out.interrupts))))
	} else if out.Tag != "" {
		tag, metricTag = out.Tag, out.Tag
		if out.Tag == bridge.TagRetry {
			tag += ":" + out.Code
		}
		span.SetAttributes(attrTag.String(tag))
		if f := failure.DetectToolResult(c.Name, out.ToolResult); f != nil {
			span.SetAttributes(attrFailureKind.String(string(f.Kind)), attribute.String("error.type", tag))
		}
		t.tagChildSpans(span.SpanContext().SpanID(), tag)
	}
	if t == nil {
		span.End()
		return
	}
	if m, ok := t.metrics.(ToolCallMetrics); ok && tc.kind != "" && sent {
		m.ToolCall(tc.kind, tc.target, metricTag, out.Code, d)
	}
	if !span.IsRecording() {
		span.End()
		return
	}
	t.mu.Lock()
	t.tools = append(t.tools, toolSpan{name: c.Name, span: span, end: time.Now()})
	t.mu.Unlock()
}

// tagChildSpans copies a tool call's tag to the delegation spans that ran under its
// execute_tool span (a failure's spans all carry baton.tag).
func (t *runTrace) tagChildSpans(parent trace.SpanID, tag string) {
	if t == nil || !parent.IsValid() {
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, ts := range t.tools {
		if ts.parent == parent {
			ts.span.SetAttributes(attrTag.String(tag))
		}
	}
}

func toolType(kind string) string {
	if kind == "" {
		return "function"
	}
	return "extension"
}

// endToolSpans ends the turn's tool spans at the times their calls ended.
func (t *runTrace) endToolSpans() {
	if t == nil {
		return
	}
	t.mu.Lock()
	spans := t.tools
	t.tools = nil
	t.mu.Unlock()
	for _, ts := range spans {
		ts.span.End(trace.WithTimestamp(ts.end))
	}
}

// interrupts records the interrupts a run ends with, as an event of the run span.
func (t *runTrace) interrupts(open []store.Interrupt) {
	if t == nil || len(open) == 0 {
		return
	}
	reasons := make([]string, 0, len(open))
	for _, in := range open {
		reasons = append(reasons, string(in.Kind))
	}
	t.span.AddEvent("baton.interrupt", trace.WithAttributes(attribute.Int("baton.interrupts", len(open)), attribute.StringSlice("baton.interrupt.kinds", reasons)))
}

// parent is the W3C traceparent of the run span, saved with a suspension so that the
// run that resumes it can link to it.
func (t *runTrace) parent() string {
	if t == nil {
		return ""
	}
	c := propagation.MapCarrier{}
	propagation.TraceContext{}.Inject(trace.ContextWithSpan(context.Background(), t.span), c)
	return c["traceparent"]
}

// resume records that this run resumes a suspended one: an event, and a link to the
// run that was suspended (traceparent from its saved state).
func (t *runTrace) resume(traceparent string, answers int) {
	if t == nil {
		return
	}
	t.span.AddEvent("baton.resume", trace.WithAttributes(attribute.Int("baton.resume.entries", answers)))
	if traceparent == "" {
		return
	}
	ctx := propagation.TraceContext{}.Extract(context.Background(), propagation.MapCarrier{"traceparent": traceparent})
	if sc := trace.SpanContextFromContext(ctx); sc.IsValid() {
		t.span.AddLink(trace.Link{SpanContext: sc, Attributes: []attribute.KeyValue{attribute.String("baton.link", "resumes")}})
	}
}

// modelSpan starts the chat span of one model turn (all its attempts).
func (t *runTrace) modelSpan(ctx context.Context) (context.Context, trace.Span) {
	var tc Tracing
	if t != nil {
		tc = t.tracing
	}
	name := "chat"
	if tc.Model != "" {
		name += " " + tc.Model
	}
	return t.spanTracer().Start(ctx, name, trace.WithSpanKind(trace.SpanKindClient), trace.WithAttributes(
		attribute.String("gen_ai.operation.name", "chat"),
		attribute.String("gen_ai.provider.name", tc.Provider),
		attribute.String("gen_ai.request.model", tc.Model),
		attribute.String("gen_ai.conversation.id", t.thread()),
	))
}

// endModelSpan ends a chat span with the turn's completion, or its error. provider and
// model name the fallback the turn ended on ("": the configured model), for the metrics.
func (t *runTrace) endModelSpan(span trace.Span, provider, model string, start time.Time, res turnResult, err error) {
	outcome := "ok"
	in, out := 0, 0
	if err != nil {
		outcome = "error"
		span.SetAttributes(attribute.String("error.type", modelErrorType(err)))
		span.SetStatus(codes.Error, modelErrorType(err))
	} else if c := res.completion; c != nil {
		in, out = c.Usage.InputTokens, c.Usage.OutputTokens
		span.SetAttributes(
			attribute.StringSlice("gen_ai.response.finish_reasons", []string{c.FinishReason}),
			attribute.Int("gen_ai.usage.input_tokens", in),
			attribute.Int("gen_ai.usage.output_tokens", out),
		)
	}
	if t != nil {
		if m, ok := t.metrics.(ModelMetrics); ok {
			if model == "" {
				provider, model = t.tracing.Provider, t.tracing.Model
			}
			m.ModelCall(provider, model, outcome, time.Since(start), in, out)
		}
	}
	span.End()
}

// traceModelRetry records a failed attempt of a model turn and what the policy decided.
func traceModelRetry(span trace.Span, d failure.Decision) {
	span.AddEvent("baton.retry", trace.WithAttributes(attrFailureKind.String(string(d.Kind)), attrPolicyAction.String(string(d.Action)),
		attribute.Int("baton.failure.attempt", d.Attempt), attribute.Int64("baton.retry.wait_ms", d.Wait.Milliseconds())))
	span.SetAttributes(attrFailureKind.String(string(d.Kind)), attrPolicyAction.String(string(d.Action)))
}

func modelErrorType(err error) string {
	if f := failure.ClassifyModelError(err); f != nil {
		return string(f.Kind)
	}
	var d *decidedError
	if errors.As(err, &d) {
		return string(d.f.Kind)
	}
	return "_OTHER"
}

// spanTracer is the tracer of the run's spans (a no-op one for a run without telemetry).
func (t *runTrace) spanTracer() trace.Tracer {
	if t == nil {
		return noopTracer
	}
	return t.tracer
}

// thread is the run's thread id, as its spans name the conversation.
func (t *runTrace) thread() string {
	if t == nil {
		return ""
	}
	return t.threadID
}
