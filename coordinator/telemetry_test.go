package coordinator

import (
	"context"
	"fmt"
	"log/slog"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/baton-dev/baton/agui"
	"github.com/baton-dev/baton/failure"
	"github.com/baton-dev/baton/internal/testutil"
	"github.com/baton-dev/baton/subagent"
)

func spanAttrs(s sdktrace.ReadOnlySpan) map[string]string {
	out := map[string]string{}
	for _, a := range s.Attributes() {
		out[string(a.Key)] = a.Value.String()
	}
	return out
}

func TestRunSpans(t *testing.T) {
	exp := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp))
	var seen trace.SpanContext
	agent := &fakeAgent{send: func(ctx context.Context, req subagent.Request, obs subagent.Observer) (*subagent.Result, error) {
		seen = trace.SpanContextFromContext(ctx)
		return finalResult(subagent.StateFailed, "the archive is down")(ctx, req, obs)
	}}
	var logs testutil.SyncBuffer
	e := newEngine(t, &fakeModel{turn: callThenReport("research", `{"prompt":"go"}`)}, agent, func(c *Config) {
		c.Tracing = Tracing{Tracer: tp.Tracer("test"), Provider: "openai", Model: "gpt-test"}
		c.Logger = slog.New(slog.NewTextHandler(&logs, nil))
	})
	parent := trace.NewSpanContext(trace.SpanContextConfig{
		TraceID: trace.TraceID{0x4b, 0xf9, 1}, SpanID: trace.SpanID{0xf0, 0x67, 1}, TraceFlags: trace.FlagsSampled, Remote: true,
	})
	r, err := e.StartRun(trace.ContextWithRemoteSpanContext(context.Background(), parent), input("t-span"), "")
	require.NoError(t, err)
	collect(t, r)

	spans := exp.GetSpans().Snapshots()
	byName := map[string]sdktrace.ReadOnlySpan{}
	var chats int
	for _, s := range spans {
		byName[s.Name()] = s
		if s.Name() == "chat gpt-test" {
			chats++
		}
	}
	require.Contains(t, byName, "invoke_agent baton")
	require.Contains(t, byName, "execute_tool research")
	require.Contains(t, byName, "invoke_agent research")
	assert.Equal(t, 2, chats, "one chat span per model turn")

	run := byName["invoke_agent baton"]
	assert.Equal(t, parent.TraceID(), run.SpanContext().TraceID(), "the incoming traceparent is the parent")
	assert.Equal(t, parent.SpanID(), run.Parent().SpanID())
	ra := spanAttrs(run)
	assert.Equal(t, "t-span", ra["gen_ai.conversation.id"])
	assert.Equal(t, "r-t-span", ra["baton.run.id"])
	assert.Equal(t, "completed", ra["baton.run.outcome"])
	assert.Equal(t, "invoke_agent", ra["gen_ai.operation.name"])

	tool := byName["execute_tool research"]
	assert.Equal(t, run.SpanContext().SpanID(), tool.Parent().SpanID())
	ta := spanAttrs(tool)
	assert.Equal(t, "FAILED", ta["baton.tag"])

	del := byName["invoke_agent research"]
	assert.Equal(t, trace.SpanKindClient, del.SpanKind())
	assert.Equal(t, tool.SpanContext().SpanID(), del.Parent().SpanID())
	da := spanAttrs(del)
	assert.Equal(t, "task-1", da["a2a.task.id"])
	assert.Equal(t, "failed", da["a2a.task.state"])
	assert.Equal(t, del.SpanContext(), seen, "the sub-agent call runs in the delegation span (its traceparent)")

	for _, s := range spans {
		if s.Name() == "chat gpt-test" {
			assert.Equal(t, run.SpanContext().SpanID(), s.Parent().SpanID())
			ca := spanAttrs(s)
			assert.Equal(t, "openai", ca["gen_ai.provider.name"])
			assert.Equal(t, "gpt-test", ca["gen_ai.request.model"])
			assert.NotEmpty(t, ca["gen_ai.response.finish_reasons"])
		}
	}
	assert.Contains(t, logs.String(), "trace_id="+parent.TraceID().String(), "run log lines carry the trace id")
	assert.Contains(t, logs.String(), "span_id="+run.SpanContext().SpanID().String())
}

func TestRunWithoutTracingRecordsNothing(t *testing.T) {
	var logs testutil.SyncBuffer
	e := newEngine(t, &fakeModel{turn: callThenReport("research", `{"prompt":"go"}`)}, &fakeAgent{send: finalResult(subagent.StateCompleted, "ok")}, func(c *Config) {
		c.Logger = slog.New(slog.NewTextHandler(&logs, nil))
	})
	r, err := e.StartRun(context.Background(), input("t-off"), "")
	require.NoError(t, err)
	collect(t, r)
	assert.NotContains(t, logs.String(), "trace_id=")
	assert.Contains(t, logs.String(), "run_id=r-t-off")
}

func TestFailureOnSpans(t *testing.T) {
	exp := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp))
	agent := &fakeAgent{send: func(context.Context, subagent.Request, subagent.Observer) (*subagent.Result, error) {
		return nil, fmt.Errorf("dial: %w", subagent.ErrUnreachable)
	}}
	e := newEngine(t, &fakeModel{turn: callThenReport("research", `{"prompt":"go"}`)}, agent, func(c *Config) {
		c.Tracing = Tracing{Tracer: tp.Tracer("test"), Provider: "openai", Model: "m"}
	})
	r, err := e.StartRun(context.Background(), input("t-fail"), "")
	require.NoError(t, err)
	collect(t, r)
	var tool, run, del sdktrace.ReadOnlySpan
	for _, s := range exp.GetSpans().Snapshots() {
		switch s.Name() {
		case "execute_tool research":
			tool = s
		case "invoke_agent baton":
			run = s
		case "invoke_agent research":
			del = s
		}
	}
	require.NotNil(t, tool)
	require.NotNil(t, run)
	require.NotNil(t, del)
	ta := spanAttrs(tool)
	assert.Equal(t, "UNREACHABLE", ta["baton.tag"])
	assert.Equal(t, string(failure.KindToolError), ta["baton.failure.kind"])
	assert.Equal(t, string(failure.ActionRetry), ta["baton.policy.action"], "the policy's decision about the failure")
	assert.Equal(t, "unreachable", spanAttrs(del)["error.type"])
	da := spanAttrs(del)
	assert.Equal(t, string(failure.KindToolError), da["baton.failure.kind"], "the A2A client span of a failure carries the kind")
	assert.Equal(t, string(failure.ActionRetry), da["baton.policy.action"], "and the policy's action")
	assert.Equal(t, "UNREACHABLE", da["baton.tag"], "and the tag")
	var failureEvent bool
	for _, ev := range run.Events() {
		failureEvent = failureEvent || ev.Name == "baton.failure"
	}
	assert.True(t, failureEvent, "the decision is an event of the run span")
}

func TestInterruptAndResumeOnSpans(t *testing.T) {
	exp := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp))
	e := newEngine(t, &fakeModel{turn: callThenReport("research", `{"prompt":"book"}`)}, &fakeAgent{send: askingAgent("task-9")}, func(c *Config) {
		c.Tracing = Tracing{Tracer: tp.Tracer("test"), Provider: "openai", Model: "m"}
	})
	ins := interruptsOf(t, startAndCollect(t, e, input("t-res")))
	require.Len(t, ins, 1)
	evs := startAndCollect(t, e, resumeInput("t-res", "r-2", resolved(ins[0].ID, `{"text":"May 3"}`)))
	require.Equal(t, agui.EventRunFinished, lastEvent(evs).EventType())

	var runs []sdktrace.ReadOnlySpan
	for _, s := range exp.GetSpans().Snapshots() {
		if s.Name() == "invoke_agent baton" {
			runs = append(runs, s)
		}
	}
	require.Len(t, runs, 2)
	first, second := runs[0], runs[1]
	assert.Equal(t, "interrupt", spanAttrs(first)["baton.run.outcome"])
	var interrupted bool
	for _, ev := range first.Events() {
		interrupted = interrupted || ev.Name == "baton.interrupt"
	}
	assert.True(t, interrupted, "the interrupt is an event of the run span")
	var resumed bool
	for _, ev := range second.Events() {
		resumed = resumed || ev.Name == "baton.resume"
	}
	assert.True(t, resumed, "the resume is an event of the resumed run's span")
	require.Len(t, second.Links(), 1, "the resumed run links to the run it resumes")
	assert.Equal(t, first.SpanContext().SpanID(), second.Links()[0].SpanContext.SpanID())
	assert.Equal(t, first.SpanContext().TraceID(), second.Links()[0].SpanContext.TraceID())
}

func TestRefusedCallOnSpans(t *testing.T) {
	exp := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp))
	agent := &fakeAgent{send: finalResult(subagent.StateCompleted, "never")}
	e := newEngine(t, &fakeModel{turn: callThenReport("research", `{"prompt":"go"}`)}, agent, func(c *Config) {
		c.Tracing = Tracing{Tracer: tp.Tracer("test"), Provider: "openai", Model: "m"}
		c.Guard = failure.GuardPolicy{Agents: failure.AccessList{Deny: []string{"research"}}}
	})
	startAndCollect(t, e, input("t-deny"))
	assert.Empty(t, agent.sent, "the refused call is not sent")
	var tool sdktrace.ReadOnlySpan
	for _, s := range exp.GetSpans().Snapshots() {
		if s.Name() == "execute_tool research" {
			tool = s
		}
	}
	require.NotNil(t, tool, "a refused call has its execute_tool span")
	ta := spanAttrs(tool)
	assert.Equal(t, "RETRY:policy_deny", ta["baton.tag"])
	assert.Equal(t, string(failure.KindPolicyViolation), ta["baton.failure.kind"])
	assert.NotEmpty(t, ta["baton.policy.action"])
}
