package coordinator

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/baton-dev/baton/store"
	"github.com/baton-dev/baton/subagent"
)

// TestApprovedCallGoesThroughTheChain: the approved call runs through the run's chain
// (dispatch.Chain.RunTo): it has its execute_tool span, like any call that went out, and
// its journal step says why it went out; it is sent once.
func TestApprovedCallGoesThroughTheChain(t *testing.T) {
	exp := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp))
	tools := approvalTools()
	st, err := store.Open(t.Context(), "memory:")
	require.NoError(t, err)
	t.Cleanup(func() { _ = st.Close() })
	e := newEngine(t, &fakeModel{turn: callThenReport("demo__delete_release", `{"release":"v1"}`)}, &fakeAgent{send: finalResult(subagent.StateCompleted, "done")}, func(c *Config) {
		c.Tools = tools
		c.Store = st
		c.Approvals = ApprovalPolicy{Tools: []string{"demo__delete_*"}}
		c.Tracing = Tracing{Tracer: tp.Tracer("test"), Provider: "openai", Model: "fake-model"}
	})
	toolSpans := func() (n int) {
		for _, s := range exp.GetSpans().Snapshots() {
			if s.Name() == "execute_tool demo__delete_release" && spanAttrs(s)["gen_ai.tool.call.id"] == "call_1" {
				n++
			}
		}
		return n
	}

	ins := interruptsOf(t, startAndCollect(t, e, input("ap-chain")))
	require.Len(t, ins, 1)
	assert.Zero(t, toolSpans(), "a call held for approval is not sent, nor traced")

	startAndCollect(t, e, resumeInput("ap-chain", "r2", resolved(ins[0].ID, `{"approved":true}`)))
	assert.Equal(t, []string{`demo__delete_release {"release":"v1"}`}, tools.recorded())
	assert.Equal(t, 1, toolSpans(), "the approved call has its span")

	steps, err := st.Steps(t.Context(), "ap-chain", 0, 0)
	require.NoError(t, err)
	var journaled []store.Step
	for _, s := range steps {
		if s.Kind == store.StepToolCall && s.Ref == "call_1" {
			journaled = append(journaled, s)
		}
	}
	require.Len(t, journaled, 1)
	assert.Equal(t, "approved by the user", journaled[0].Detail)
}
