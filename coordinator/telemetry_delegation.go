package coordinator

import (
	"context"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/baton-dev/baton/subagent"
)

// delegationSpan starts the client invoke_agent span of one A2A delegation.
func (t *runTrace) delegationSpan(ctx context.Context, a *Agent) (context.Context, trace.Span, trace.SpanID) {
	parent := trace.SpanContextFromContext(ctx).SpanID()
	ctx, span := t.spanTracer().Start(ctx, "invoke_agent "+a.Name, trace.WithSpanKind(trace.SpanKindClient), trace.WithAttributes(
		attribute.String("gen_ai.operation.name", "invoke_agent"),
		attribute.String("gen_ai.provider.name", "a2a"),
		attribute.String("gen_ai.agent.name", a.Name),
	))
	return ctx, span, parent
}

// endDelegationSpan records an A2A delegation span's task id and final state. Like the
// execute_tool spans, the span is ended (at the time the call ended) once the policy has
// decided about the turn's results, so that a failure's baton.failure.kind and the action
// taken are on this client span too (decision matches it by the agent's tool name).
func (t *runTrace) endDelegationSpan(span trace.Span, parent trace.SpanID, a *Agent, res *subagent.Result, err error) {
	defer func() {
		if t == nil || !span.IsRecording() {
			span.End()
			return
		}
		t.mu.Lock()
		defer t.mu.Unlock()
		if t.ended {
			span.End()
			return
		}
		t.tools = append(t.tools, toolSpan{name: a.Name, span: span, end: time.Now(), parent: parent})
	}()
	switch {
	case res != nil:
		span.SetAttributes(attribute.String("a2a.task.id", res.TaskID), attribute.String("a2a.task.state", string(res.State)))
		if res.ContextID != "" {
			span.SetAttributes(attribute.String("gen_ai.agent.conversation.id", res.ContextID))
		}
		switch res.State {
		case subagent.StateFailed, subagent.StateRejected:
			span.SetAttributes(attribute.String("error.type", string(res.State)))
			span.SetStatus(codes.Error, string(res.State))
		}
	case err != nil:
		if id := subagent.TaskIDOf(err); id != "" {
			span.SetAttributes(attribute.String("a2a.task.id", id))
		}
		span.SetAttributes(attribute.String("error.type", "unreachable"))
		span.SetStatus(codes.Error, "delegation failed")
	}
}
