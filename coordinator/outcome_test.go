package coordinator

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/baton-dev/baton/agui"
	"github.com/baton-dev/baton/failure"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestFailureEventJSON(t *testing.T) {
	d := failure.Decision{Kind: failure.KindTransientProvider, Action: failure.ActionRetry, Attempt: 1, Wait: 2 * time.Second,
		Explanation: "The language model is rate limiting requests. Retrying in 2s (retry 1 of 3)."}
	raw, err := agui.MarshalEvent(FailureEvent(d))
	require.NoError(t, err)
	assert.JSONEq(t, `{"type":"CUSTOM","name":"baton.failure","value":{"kind":"transient_provider","action":"retry","explanation":"The language model is rate limiting requests. Retrying in 2s (retry 1 of 3).","attempt":1}}`, string(raw))
}

func TestHandoffFor(t *testing.T) {
	tests := []struct {
		d        failure.Decision
		blockers []string
		next     []string
	}{
		{failure.Decision{Kind: failure.KindTransientProvider, Action: failure.ActionHandoff, Wait: time.Hour, Explanation: "r."},
			[]string{"the language model provider asked to wait 1h0m0s"}, []string{"try again in 1h0m0s"}},
		{failure.Decision{Kind: failure.KindTransientProvider, Action: failure.ActionHandoff, Explanation: "r."},
			[]string{"the language model provider is unavailable"}, []string{"try again in a few minutes"}},
		{failure.Decision{Kind: failure.KindToolError, Tool: "demo__divide", Action: failure.ActionHandoff, Explanation: "r."},
			[]string{`the tool "demo__divide" keeps failing`}, []string{"try again later", `ask an operator to check the tool "demo__divide"`}},
		{failure.Decision{Kind: failure.KindPolicyViolation, Tool: "demo__deploy", Action: failure.ActionHandoff, Explanation: "r."},
			[]string{`the coordinator's policy does not allow this (demo__deploy)`}, []string{"ask an operator to review the coordinator's policy"}},
		{failure.Decision{Kind: failure.KindCapabilityGap, Action: failure.ActionHandoff, Explanation: "r."},
			[]string{"no available agent or tool can handle this (unknown tool)"}, []string{"ask an operator to add an agent or tool that can do this"}},
		{failure.Decision{Kind: failure.KindIterationLimit, Action: failure.ActionAskUser, Explanation: "r."},
			[]string{"the step limit was reached"}, []string{"continue the run", "ask again with a narrower request", "raise limits.max_iterations"}},
	}
	for _, tt := range tests {
		t.Run(string(tt.d.Kind), func(t *testing.T) {
			h := HandoffFor(tt.d)
			assert.Equal(t, Handoff{Rationale: "r.", Blockers: tt.blockers, NextSteps: tt.next}, h)
		})
	}
	for _, k := range append(failure.Kinds(), "mystery") {
		h := HandoffFor(failure.Decision{Kind: k, Explanation: "r."})
		assert.NotEmpty(t, h.Blockers, k)
		assert.NotEmpty(t, h.NextSteps, k)
	}
}

func TestTerminalEvents(t *testing.T) {
	h := Handoff{Rationale: "The tool failed.", Blockers: []string{"b1"}, NextSteps: []string{"n1", "n2"}}
	evs := TerminalEvents(EventHandoff, h, "msg-1")
	require.Len(t, evs, 4)
	want := []string{
		`{"type":"TEXT_MESSAGE_START","messageId":"msg-1","role":"assistant"}`,
		`{"type":"TEXT_MESSAGE_CONTENT","messageId":"msg-1","delta":"The tool failed.\n\nWhat blocks me:\n- b1\n\nWhat you can do:\n- n1\n- n2"}`,
		`{"type":"TEXT_MESSAGE_END","messageId":"msg-1"}`,
		`{"type":"CUSTOM","name":"baton.handoff","value":{"rationale":"The tool failed.","blockers":["b1"],"next_steps":["n1","n2"]}}`,
	}
	for i, ev := range evs {
		raw, err := agui.MarshalEvent(ev)
		require.NoError(t, err)
		assert.JSONEq(t, want[i], string(raw))
	}

	evs = TerminalEvents(EventPartial, Handoff{Rationale: "r"}, "m")
	raw, err := agui.MarshalEvent(evs[3])
	require.NoError(t, err)
	assert.JSONEq(t, `{"type":"CUSTOM","name":"baton.partial","value":{"rationale":"r","blockers":[],"next_steps":[]}}`, string(raw), "never null")
	assert.Equal(t, "r", Handoff{Rationale: "r"}.Text())
}

func TestTerminalNameAndResult(t *testing.T) {
	assert.Equal(t, EventHandoff, TerminalName(failure.ActionHandoff))
	assert.Equal(t, EventPartial, TerminalName(failure.ActionStop))
	assert.Equal(t, EventPartial, TerminalName(failure.ActionAskUser))
	raw, err := json.Marshal(RunResult(failure.Decision{Kind: failure.KindIterationLimit, Action: failure.ActionAskUser}))
	require.NoError(t, err)
	assert.JSONEq(t, `{"stopped":"iteration_limit","action":"ask_user"}`, string(raw))
}

func TestContinueQuestion(t *testing.T) {
	d := failure.Decision{Kind: failure.KindLoopDetected, Action: failure.ActionAskUser, Explanation: "The same call was repeated. Your decision is needed to go on."}
	assert.Equal(t, "The same call was repeated. Your decision is needed to go on. Continue?", ContinueQuestion(d))
}
