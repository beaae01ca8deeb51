package agui

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// recorder is a sink that keeps what it receives.
type recorder struct {
	mu     sync.Mutex
	events []Event
	failAt int // fail the n-th send (1-based); 0 never
}

func (r *recorder) sink(ev Event) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.failAt > 0 && len(r.events)+1 == r.failAt {
		return errors.New("client gone")
	}
	r.events = append(r.events, ev)
	return nil
}

func (r *recorder) types() []EventType {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make([]EventType, len(r.events))
	for i, ev := range r.events {
		out[i] = ev.EventType()
	}
	return out
}

func (r *recorder) jsons(t *testing.T) []string {
	t.Helper()
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make([]string, len(r.events))
	for i, ev := range r.events {
		b, err := MarshalEvent(ev)
		require.NoError(t, err)
		out[i] = string(b)
	}
	return out
}

var fixedNow = func() time.Time { return time.UnixMilli(1700000000000) }

func newTestSequencer(legacy bool) (*Sequencer, *recorder) {
	rec := &recorder{}
	return NewSequencer(rec.sink, SequencerOptions{Legacy: legacy, Now: fixedNow}), rec
}

func rs() Event { return &RunStarted{ThreadID: "t1", RunID: "r1"} }
func rf() Event { return &RunFinished{ThreadID: "t1", RunID: "r1"} }

// TestSequencerRules mirrors the rule list of verifyEvents (reference §5.1): each rule has
// an accepted and a rejected sequence. For a rejected sequence the last event is the violation
// and must be refused without reaching the sink.
func TestSequencerRules(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		events  []Event
		wantErr error // for the last event; nil: all accepted
	}{
		// First event.
		{"first RUN_STARTED", []Event{rs()}, nil},
		{"first RUN_ERROR", []Event{&RunError{Message: "no"}}, nil},
		{"first TEXT_MESSAGE_START", []Event{&TextMessageStart{MessageID: "m1"}}, ErrOrdering},
		{"first RUN_FINISHED", []Event{rf()}, ErrOrdering},
		{"first CUSTOM", []Event{&Custom{Name: "x"}}, ErrOrdering},
		{"RUN_STARTED needs ids", []Event{&RunStarted{ThreadID: "t1"}}, ErrOrdering},

		// Run lifecycle.
		{"second RUN_STARTED while active", []Event{rs(), rs()}, ErrOrdering},
		{"event after RUN_FINISHED", []Event{rs(), rf(), &Custom{Name: "x"}}, ErrTerminated},
		{"RUN_STARTED after RUN_FINISHED", []Event{rs(), rf(), rs()}, ErrTerminated},
		{"late RUN_ERROR after RUN_FINISHED", []Event{rs(), rf(), &RunError{Message: "late"}}, ErrTerminated},
		{"event after RUN_ERROR", []Event{rs(), &RunError{Message: "x"}, &Custom{Name: "x"}}, ErrTerminated},
		{"RUN_ERROR mid-run with open message", []Event{rs(), &TextMessageStart{MessageID: "m1"}, &RunError{Message: "x", Code: "E"}}, nil},

		// Text messages.
		{"text message lifecycle", []Event{rs(),
			&TextMessageStart{MessageID: "m1", Role: "assistant"},
			&TextMessageContent{MessageID: "m1", Delta: "hi"},
			&TextMessageContent{MessageID: "m1"},
			&TextMessageEnd{MessageID: "m1"}, rf()}, nil},
		{"duplicate TEXT_MESSAGE_START", []Event{rs(), &TextMessageStart{MessageID: "m1"}, &TextMessageStart{MessageID: "m1"}}, ErrOrdering},
		{"CONTENT without START", []Event{rs(), &TextMessageContent{MessageID: "m1", Delta: "x"}}, ErrOrdering},
		{"END without START", []Event{rs(), &TextMessageEnd{MessageID: "m1"}}, ErrOrdering},
		{"CONTENT after END", []Event{rs(), &TextMessageStart{MessageID: "m1"}, &TextMessageEnd{MessageID: "m1"},
			&TextMessageContent{MessageID: "m1", Delta: "x"}}, ErrOrdering},
		{"closed message id may be reopened", []Event{rs(), &TextMessageStart{MessageID: "m1"}, &TextMessageEnd{MessageID: "m1"},
			&TextMessageStart{MessageID: "m1"}, &TextMessageEnd{MessageID: "m1"}}, nil},
		{"interleaved messages", []Event{rs(), &TextMessageStart{MessageID: "m1"}, &TextMessageStart{MessageID: "m2"},
			&TextMessageContent{MessageID: "m1", Delta: "a"}, &TextMessageEnd{MessageID: "m2"}, &TextMessageEnd{MessageID: "m1"}}, nil},
		{"TEXT_MESSAGE_START needs an id", []Event{rs(), &TextMessageStart{}}, ErrOrdering},
		{"TEXT_MESSAGE_START role user", []Event{rs(), &TextMessageStart{MessageID: "m1", Role: RoleUser}}, nil},
		{"TEXT_MESSAGE_START role tool", []Event{rs(), &TextMessageStart{MessageID: "m1", Role: RoleTool}}, ErrOrdering},

		// Tool calls.
		{"tool call lifecycle", []Event{rs(),
			&ToolCallStart{ToolCallID: "tc1", ToolCallName: "search"},
			&ToolCallArgs{ToolCallID: "tc1", Delta: `{"q":`},
			&ToolCallArgs{ToolCallID: "tc1", Delta: `"x"}`},
			&ToolCallEnd{ToolCallID: "tc1"},
			&ToolCallResult{MessageID: "m2", ToolCallID: "tc1", Content: "[OK]"}, rf()}, nil},
		{"duplicate TOOL_CALL_START", []Event{rs(), &ToolCallStart{ToolCallID: "tc1", ToolCallName: "a"},
			&ToolCallStart{ToolCallID: "tc1", ToolCallName: "a"}}, ErrOrdering},
		{"ARGS without START", []Event{rs(), &ToolCallArgs{ToolCallID: "tc1", Delta: "{}"}}, ErrOrdering},
		{"END without START", []Event{rs(), &ToolCallEnd{ToolCallID: "tc1"}}, ErrOrdering},
		{"TOOL_CALL_RESULT needs no open call", []Event{rs(), &ToolCallResult{MessageID: "m9", ToolCallID: "old", Content: "x"}}, nil},
		{"TOOL_CALL_RESULT role tool", []Event{rs(), &ToolCallResult{MessageID: "m9", ToolCallID: "tc", Content: "x", Role: RoleTool}}, nil},
		{"TOOL_CALL_RESULT role assistant", []Event{rs(), &ToolCallResult{MessageID: "m9", ToolCallID: "tc", Content: "x", Role: RoleAssistant}}, ErrOrdering},
		{"TOOL_CALL_START needs a name", []Event{rs(), &ToolCallStart{ToolCallID: "tc1"}}, ErrOrdering},

		// Steps.
		{"step lifecycle", []Event{rs(), &StepStarted{StepName: "plan"}, &StepFinished{StepName: "plan"}, rf()}, nil},
		{"duplicate STEP_STARTED", []Event{rs(), &StepStarted{StepName: "plan"}, &StepStarted{StepName: "plan"}}, ErrOrdering},
		{"STEP_FINISHED not started", []Event{rs(), &StepFinished{StepName: "plan"}}, ErrOrdering},
		{"same step name for two owners", []Event{rs(), &StepStarted{StepName: "plan"},
			&StepStarted{StepName: "plan", SubagentRunID: "sa-1"},
			&StepFinished{StepName: "plan", SubagentRunID: "sa-1"}, &StepFinished{StepName: "plan"}}, nil},
		{"unattributed finish closes the only attributed step", []Event{rs(),
			&StepStarted{StepName: "plan", SubagentRunID: "sa-1"}, &StepFinished{StepName: "plan"}, rf()}, nil},
		{"step finished by the wrong owner", []Event{rs(), &StepStarted{StepName: "plan", SubagentRunID: "sa-1"},
			&StepFinished{StepName: "plan", SubagentRunID: "sa-2"}}, ErrOrdering},

		// Subagents.
		{"subagent lifecycle", []Event{rs(), &SubagentStarted{SubagentRunID: "sa-1", Name: "research"},
			&SubagentFinished{SubagentRunID: "sa-1"}, rf()}, nil},
		{"subagent error closes", []Event{rs(), &SubagentStarted{SubagentRunID: "sa-1", Name: "research"},
			&SubagentError{SubagentRunID: "sa-1", Message: "failed", Code: "failed"}, rf()}, nil},
		{"duplicate active SUBAGENT_STARTED", []Event{rs(), &SubagentStarted{SubagentRunID: "sa-1", Name: "a"},
			&SubagentStarted{SubagentRunID: "sa-1", Name: "a"}}, ErrOrdering},
		{"SUBAGENT_STARTED id reused in the run", []Event{rs(), &SubagentStarted{SubagentRunID: "sa-1", Name: "a"},
			&SubagentFinished{SubagentRunID: "sa-1"}, &SubagentStarted{SubagentRunID: "sa-1", Name: "a"}}, ErrOrdering},
		{"SUBAGENT_FINISHED not started", []Event{rs(), &SubagentFinished{SubagentRunID: "sa-1"}}, ErrOrdering},
		{"SUBAGENT_ERROR not started", []Event{rs(), &SubagentError{SubagentRunID: "sa-1", Message: "x"}}, ErrOrdering},
		{"SUBAGENT_STARTED needs a name", []Event{rs(), &SubagentStarted{SubagentRunID: "sa-1"}}, ErrOrdering},
		{"nested subagent with active parent", []Event{rs(), &SubagentStarted{SubagentRunID: "sa-1", Name: "a"},
			&SubagentStarted{SubagentRunID: "sa-2", Name: "b", ParentSubagentRunID: "sa-1"},
			&SubagentFinished{SubagentRunID: "sa-2"}, &SubagentFinished{SubagentRunID: "sa-1"}, rf()}, nil},
		{"parent subagent not active", []Event{rs(),
			&SubagentStarted{SubagentRunID: "sa-2", Name: "b", ParentSubagentRunID: "sa-1"}}, ErrOrdering},
		{"suspended outcome with interrupt ids", []Event{rs(), &SubagentStarted{SubagentRunID: "sa-1", Name: "a"},
			&SubagentFinished{SubagentRunID: "sa-1", Outcome: &SubagentOutcome{Type: SubagentOutcomeSuspended, InterruptIDs: []string{"i1"}}}}, nil},
		{"unknown subagent outcome", []Event{rs(), &SubagentStarted{SubagentRunID: "sa-1", Name: "a"},
			&SubagentFinished{SubagentRunID: "sa-1", Outcome: &SubagentOutcome{Type: "done"}}}, ErrOrdering},

		// RUN_FINISHED while anything is open.
		{"RUN_FINISHED with open message", []Event{rs(), &TextMessageStart{MessageID: "m1"}, rf()}, ErrOrdering},
		{"RUN_FINISHED with open tool call", []Event{rs(), &ToolCallStart{ToolCallID: "tc1", ToolCallName: "a"}, rf()}, ErrOrdering},
		{"RUN_FINISHED with open step", []Event{rs(), &StepStarted{StepName: "plan"}, rf()}, ErrOrdering},
		{"RUN_FINISHED with open subagent", []Event{rs(), &SubagentStarted{SubagentRunID: "sa-1", Name: "a"}, rf()}, ErrOrdering},

		// Attribution of continuations.
		{"continuation without subagentRunId", []Event{rs(), &TextMessageStart{MessageID: "m1", SubagentRunID: "sa-1"},
			&TextMessageContent{MessageID: "m1", Delta: "x"}, &TextMessageEnd{MessageID: "m1"}}, nil},
		{"continuation with matching subagentRunId", []Event{rs(), &ToolCallStart{ToolCallID: "tc1", ToolCallName: "a", SubagentRunID: "sa-1"},
			&ToolCallArgs{ToolCallID: "tc1", Delta: "{}", SubagentRunID: "sa-1"}, &ToolCallEnd{ToolCallID: "tc1", SubagentRunID: "sa-1"}}, nil},
		{"mismatched subagentRunId on CONTENT", []Event{rs(), &TextMessageStart{MessageID: "m1", SubagentRunID: "sa-1"},
			&TextMessageContent{MessageID: "m1", Delta: "x", SubagentRunID: "sa-2"}}, ErrOrdering},
		{"attributed END of unattributed message", []Event{rs(), &TextMessageStart{MessageID: "m1"},
			&TextMessageEnd{MessageID: "m1", SubagentRunID: "sa-1"}}, ErrOrdering},
		{"mismatched subagentRunId on TOOL_CALL_END", []Event{rs(), &ToolCallStart{ToolCallID: "tc1", ToolCallName: "a", SubagentRunID: "sa-1"},
			&ToolCallEnd{ToolCallID: "tc1", SubagentRunID: "sa-2"}}, ErrOrdering},

		// Events the client does not sequence-check.
		{"unchecked events mid-run", []Event{rs(), &Custom{Name: "baton.failure"}, &StateSnapshot{}, &StateDelta{},
			&MessagesSnapshot{}, &ActivitySnapshot{MessageID: "a1", ActivityType: "progress"}, rf()}, nil},
		{"CUSTOM needs a name", []Event{rs(), &Custom{}}, ErrOrdering},
		{"ACTIVITY_SNAPSHOT needs ids", []Event{rs(), &ActivitySnapshot{MessageID: "a1"}}, ErrOrdering},

		// Outcomes.
		{"interrupt outcome", []Event{rs(), &RunFinished{ThreadID: "t1", RunID: "r1", Outcome: &Outcome{Type: OutcomeInterrupt,
			Interrupts: []Interrupt{{ID: "i1", Reason: "input_required"}, {ID: "i2", Reason: "confirmation"}}}}}, nil},
		{"interrupt outcome without interrupts", []Event{rs(), &RunFinished{ThreadID: "t1", RunID: "r1",
			Outcome: &Outcome{Type: OutcomeInterrupt}}}, ErrOrdering},
		{"interrupt without reason", []Event{rs(), &RunFinished{ThreadID: "t1", RunID: "r1",
			Outcome: &Outcome{Type: OutcomeInterrupt, Interrupts: []Interrupt{{ID: "i1"}}}}}, ErrOrdering},
		{"repeated interrupt id", []Event{rs(), &RunFinished{ThreadID: "t1", RunID: "r1", Outcome: &Outcome{Type: OutcomeInterrupt,
			Interrupts: []Interrupt{{ID: "i1", Reason: "a"}, {ID: "i1", Reason: "b"}}}}}, ErrOrdering},
		{"unknown outcome type", []Event{rs(), &RunFinished{ThreadID: "t1", RunID: "r1", Outcome: &Outcome{Type: "done"}}}, ErrOrdering},
		{"success with interrupts", []Event{rs(), &RunFinished{ThreadID: "t1", RunID: "r1", Outcome: &Outcome{Type: OutcomeSuccess,
			Interrupts: []Interrupt{{ID: "i1", Reason: "a"}}}}}, ErrOrdering},
		{"cancelled with pending tool calls", []Event{rs(), &RunFinished{ThreadID: "t1", RunID: "r1", Outcome: &Outcome{Type: OutcomeCancelled,
			PendingToolCallIDs: []string{"x"}}}}, ErrOrdering},
		{"success with pending tool calls", []Event{rs(), &RunFinished{ThreadID: "t1", RunID: "r1", Outcome: &Outcome{Type: OutcomeSuccess,
			PendingToolCallIDs: []string{"ask1"}}}}, nil},

		// Nil events.
		{"nil event", []Event{rs(), nil}, ErrOrdering},
		{"nil pointer event", []Event{rs(), (*TextMessageStart)(nil)}, ErrOrdering},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, rec := newTestSequencer(false)
			last := len(tt.events) - 1
			for i, ev := range tt.events[:last] {
				require.NoError(t, s.Emit(ev), "event %d (%T)", i, ev)
			}
			err := s.Emit(tt.events[last])
			if tt.wantErr == nil {
				require.NoError(t, err)
				assert.Len(t, rec.types(), len(tt.events))
				return
			}
			require.ErrorIs(t, err, tt.wantErr)
			assert.Len(t, rec.types(), last, "a refused event must not reach the sink")
		})
	}
}

func TestSequencerErrorMessagesNameTheEvent(t *testing.T) {
	t.Parallel()
	s, _ := newTestSequencer(false)
	require.NoError(t, s.Emit(rs()))
	err := s.Emit(&TextMessageContent{MessageID: "m7", Delta: "x"})
	require.ErrorIs(t, err, ErrOrdering)
	assert.Contains(t, err.Error(), "TEXT_MESSAGE_CONTENT")
	assert.Contains(t, err.Error(), `"m7"`)

	require.NoError(t, s.Emit(&TextMessageStart{MessageID: "m1"}))
	err = s.Emit(rf())
	require.ErrorIs(t, err, ErrOrdering)
	assert.Contains(t, err.Error(), "text messages m1")
}

func TestSequencerFinishClosesInOrder(t *testing.T) {
	t.Parallel()
	s, rec := newTestSequencer(false)
	for _, ev := range []Event{
		rs(),
		&StepStarted{StepName: "outer"},
		&SubagentStarted{SubagentRunID: "sa-1", Name: "research", ParentToolCallID: "tc0"},
		&StepStarted{StepName: "inner", SubagentRunID: "sa-1"},
		&TextMessageStart{MessageID: "m2", SubagentRunID: "sa-1"},
		&SubagentStarted{SubagentRunID: "sa-2", Name: "child", ParentSubagentRunID: "sa-1"},
		&TextMessageStart{MessageID: "m1"},
		&ToolCallStart{ToolCallID: "tc2", ToolCallName: "b"},
		&ToolCallStart{ToolCallID: "tc1", ToolCallName: "a", SubagentRunID: "sa-2"},
		&ToolCallArgs{ToolCallID: "tc1", Delta: "{"},
	} {
		require.NoError(t, s.Emit(ev))
	}
	assert.Equal(t, OpenItems{
		Messages:  []string{"m2", "m1"},
		ToolCalls: []string{"tc2", "tc1"},
		Steps:     []string{"outer", "sa-1/inner"},
		Subagents: []string{"sa-1", "sa-2"},
	}, s.Open())
	n := len(rec.types())

	require.NoError(t, s.Finish("", "", &Outcome{Type: OutcomeCancelled}, nil))
	assert.True(t, s.Terminated())
	assert.True(t, s.Open().Empty())

	tail := rec.jsons(t)[n:]
	ts := `"timestamp":1700000000000,`
	assert.Equal(t, []string{
		`{"type":"TEXT_MESSAGE_END",` + ts + `"messageId":"m2","subagentRunId":"sa-1"}`,
		`{"type":"TEXT_MESSAGE_END",` + ts + `"messageId":"m1"}`,
		`{"type":"TOOL_CALL_END",` + ts + `"toolCallId":"tc2"}`,
		`{"type":"TOOL_CALL_END",` + ts + `"toolCallId":"tc1","subagentRunId":"sa-2"}`,
		`{"type":"STEP_FINISHED",` + ts + `"stepName":"inner","subagentRunId":"sa-1"}`,
		`{"type":"STEP_FINISHED",` + ts + `"stepName":"outer"}`,
		`{"type":"SUBAGENT_ERROR",` + ts + `"subagentRunId":"sa-2","message":"The sub-agent was stopped because the run ended.","code":"cancelled"}`,
		`{"type":"SUBAGENT_ERROR",` + ts + `"subagentRunId":"sa-1","message":"The sub-agent was stopped because the run ended.","code":"cancelled"}`,
		`{"type":"RUN_FINISHED",` + ts + `"threadId":"t1","runId":"r1","outcome":{"type":"cancelled"}}`,
	}, tail)

	require.ErrorIs(t, s.Finish("t1", "r1", nil, nil), ErrTerminated)
	require.ErrorIs(t, s.Fail("E", "x"), ErrTerminated)
	require.ErrorIs(t, s.Emit(&Custom{Name: "x"}), ErrTerminated)
	assert.Len(t, rec.types(), n+9)
}

func TestSequencerFinishAndFail(t *testing.T) {
	t.Parallel()
	t.Run("finish before start", func(t *testing.T) {
		s, rec := newTestSequencer(false)
		require.ErrorIs(t, s.Finish("t1", "r1", nil, nil), ErrOrdering)
		assert.Empty(t, rec.types())
		assert.False(t, s.Terminated())
	})
	t.Run("finish with result and explicit ids", func(t *testing.T) {
		s, rec := newTestSequencer(false)
		require.NoError(t, s.Emit(rs()))
		require.NoError(t, s.Finish("t1", "r1", &Outcome{Type: OutcomeSuccess}, map[string]any{"ok": true}))
		assert.Equal(t, `{"type":"RUN_FINISHED","timestamp":1700000000000,"threadId":"t1","runId":"r1","outcome":{"type":"success"},"result":{"ok":true}}`,
			rec.jsons(t)[1])
	})
	t.Run("bad outcome closes nothing", func(t *testing.T) {
		s, rec := newTestSequencer(false)
		require.NoError(t, s.Emit(rs()))
		require.NoError(t, s.Emit(&TextMessageStart{MessageID: "m1"}))
		require.ErrorIs(t, s.Finish("", "", &Outcome{Type: OutcomeInterrupt}, nil), ErrOrdering)
		assert.Len(t, rec.types(), 2)
		assert.False(t, s.Terminated())
		assert.Equal(t, []string{"m1"}, s.Open().Messages)
	})
	t.Run("fail closes and errors", func(t *testing.T) {
		s, rec := newTestSequencer(false)
		require.NoError(t, s.Emit(rs()))
		require.NoError(t, s.Emit(&ToolCallStart{ToolCallID: "tc1", ToolCallName: "a"}))
		require.NoError(t, s.Fail("LLM_UNAVAILABLE", "The model is unavailable."))
		assert.Equal(t, []EventType{EventRunStarted, EventToolCallStart, EventToolCallEnd, EventRunError}, rec.types())
		assert.Equal(t, `{"type":"RUN_ERROR","timestamp":1700000000000,"message":"The model is unavailable.","code":"LLM_UNAVAILABLE"}`, rec.jsons(t)[3])
		assert.True(t, s.Terminated())
	})
	t.Run("fail before start", func(t *testing.T) {
		s, rec := newTestSequencer(false)
		require.NoError(t, s.Fail("INVALID_RESUME", ""))
		assert.Equal(t, []EventType{EventRunError}, rec.types())
		assert.Contains(t, rec.jsons(t)[0], `"message":"The run failed."`)
	})
}

func TestSequencerSinkErrorTerminates(t *testing.T) {
	t.Parallel()
	rec := &recorder{failAt: 2}
	s := NewSequencer(rec.sink, SequencerOptions{})
	require.NoError(t, s.Emit(rs()))
	err := s.Emit(&TextMessageStart{MessageID: "m1"})
	require.Error(t, err)
	assert.Contains(t, err.Error(), "client gone")
	assert.True(t, s.Terminated())
	require.ErrorIs(t, s.Emit(&TextMessageContent{MessageID: "m1", Delta: "x"}), ErrTerminated)
	require.ErrorIs(t, s.Finish("", "", nil, nil), ErrTerminated)
}

func TestSequencerTimestamps(t *testing.T) {
	t.Parallel()
	s, rec := newTestSequencer(false)
	require.NoError(t, s.Emit(rs()))
	preset := &Custom{Base: Base{Timestamp: 42}, Name: "x"}
	require.NoError(t, s.Emit(preset))
	plain := &Custom{Name: "y"}
	require.NoError(t, s.Emit(plain))
	assert.Equal(t, int64(42), preset.Timestamp)
	assert.Equal(t, int64(1700000000000), plain.Timestamp)

	// Foreign events that embed Base are stamped too.
	foreign := &foreignEvent{X: "1"}
	require.NoError(t, s.Emit(foreign))
	assert.Equal(t, int64(1700000000000), foreign.Timestamp)
	assert.Len(t, rec.types(), 4)

	// The default clock is the real one.
	s2 := NewSequencer((&recorder{}).sink, SequencerOptions{})
	require.NoError(t, s2.Emit(&RunStarted{ThreadID: "t", RunID: "r"}))
	ev := &Custom{Name: "x"}
	before := time.Now().UnixMilli()
	require.NoError(t, s2.Emit(ev))
	assert.GreaterOrEqual(t, ev.Timestamp, before)
}

func TestSequencerProtocolVersion(t *testing.T) {
	t.Parallel()
	for _, legacy := range []bool{false, true} {
		t.Run(fmt.Sprint("legacy=", legacy), func(t *testing.T) {
			s, rec := newTestSequencer(legacy)
			ev := &RunStarted{ThreadID: "t1", RunID: "r1", ProtocolVersion: ""}
			require.NoError(t, s.Emit(ev))
			assert.Empty(t, ev.ProtocolVersion, "the caller's event is not changed")
			got := rec.jsons(t)[0]
			if legacy {
				assert.NotContains(t, got, "protocolVersion")
			} else {
				assert.Contains(t, got, `"protocolVersion":"1.0"`)
			}
		})
	}
	s, rec := newTestSequencer(true)
	require.NoError(t, s.Emit(&RunStarted{ThreadID: "t1", RunID: "r1", ProtocolVersion: "1.0"}))
	assert.NotContains(t, rec.jsons(t)[0], "protocolVersion")
}

func TestSequencerLegacyDowngrade(t *testing.T) {
	t.Parallel()
	interrupt := &Outcome{Type: OutcomeInterrupt, Interrupts: []Interrupt{{ID: "i1", Reason: "input_required", SubagentRunID: "sa-1"}}}
	tests := []struct {
		name    string
		outcome *Outcome
		legacy  string
		modern  string
	}{
		{
			name:    "cancelled",
			outcome: &Outcome{Type: OutcomeCancelled},
			legacy:  `{"type":"RUN_ERROR","timestamp":1700000000000,"message":"The run was cancelled.","code":"CANCELLED"}`,
			modern:  `{"type":"RUN_FINISHED","timestamp":1700000000000,"threadId":"t1","runId":"r1","outcome":{"type":"cancelled"}}`,
		},
		{
			name:    "success with pending tool calls",
			outcome: &Outcome{Type: OutcomeSuccess, PendingToolCallIDs: []string{"ask1"}},
			legacy:  `{"type":"RUN_FINISHED","timestamp":1700000000000,"threadId":"t1","runId":"r1"}`,
			modern:  `{"type":"RUN_FINISHED","timestamp":1700000000000,"threadId":"t1","runId":"r1","outcome":{"type":"success","pendingToolCallIds":["ask1"]}}`,
		},
		{
			name:    "bare success",
			outcome: &Outcome{Type: OutcomeSuccess},
			legacy:  `{"type":"RUN_FINISHED","timestamp":1700000000000,"threadId":"t1","runId":"r1"}`,
			modern:  `{"type":"RUN_FINISHED","timestamp":1700000000000,"threadId":"t1","runId":"r1","outcome":{"type":"success"}}`,
		},
		{
			name:    "interrupt is kept",
			outcome: interrupt,
			legacy:  `{"type":"RUN_FINISHED","timestamp":1700000000000,"threadId":"t1","runId":"r1","outcome":{"type":"interrupt","interrupts":[{"id":"i1","reason":"input_required","subagentRunId":"sa-1"}]}}`,
			modern:  `{"type":"RUN_FINISHED","timestamp":1700000000000,"threadId":"t1","runId":"r1","outcome":{"type":"interrupt","interrupts":[{"id":"i1","reason":"input_required","subagentRunId":"sa-1"}]}}`,
		},
	}
	for _, tt := range tests {
		for _, legacy := range []bool{true, false} {
			t.Run(fmt.Sprintf("%s/legacy=%v", tt.name, legacy), func(t *testing.T) {
				// Through Finish, with an open subagent that must be closed first.
				s, rec := newTestSequencer(legacy)
				require.NoError(t, s.Emit(rs()))
				require.NoError(t, s.Emit(&SubagentStarted{SubagentRunID: "sa-1", Name: "a"}))
				before := *tt.outcome
				require.NoError(t, s.Finish("t1", "r1", tt.outcome, nil))
				assert.Equal(t, before, *tt.outcome, "the caller's outcome is not changed")
				got := rec.jsons(t)
				require.Len(t, got, 4)
				assert.Contains(t, got[2], `"type":"SUBAGENT_ERROR"`)
				want := tt.modern
				if legacy {
					want = tt.legacy
				}
				assert.Equal(t, want, got[3])
				assert.True(t, s.Terminated())

				// Through Emit.
				s, rec = newTestSequencer(legacy)
				require.NoError(t, s.Emit(rs()))
				require.NoError(t, s.Emit(&RunFinished{Outcome: tt.outcome}))
				assert.Equal(t, want, rec.jsons(t)[1])
				assert.True(t, s.Terminated())
			})
		}
	}
}

func TestSequencerLegacyRejectsUnknownTypes(t *testing.T) {
	t.Parallel()
	s, rec := newTestSequencer(true)
	require.NoError(t, s.Emit(rs()))
	require.ErrorIs(t, s.Emit(&foreignEvent{}), ErrOrdering)
	// Every type this package defines is known to 0.0.59.
	for _, ev := range []Event{&Custom{Name: "x"}, &ActivitySnapshot{MessageID: "a", ActivityType: "progress"},
		&SubagentStarted{SubagentRunID: "sa", Name: "n"}, &SubagentFinished{SubagentRunID: "sa"}, &StateSnapshot{}} {
		require.NoError(t, s.Emit(ev))
	}
	assert.Len(t, rec.types(), 6)
	assert.True(t, s.Legacy())

	modern, _ := newTestSequencer(false)
	require.NoError(t, modern.Emit(rs()))
	require.NoError(t, modern.Emit(&foreignEvent{}))
}

// TestSequencerConcurrent runs tool calls and messages from many goroutines at once; the
// stream that reaches the sink must respect every ordering rule.
func TestSequencerConcurrent(t *testing.T) {
	t.Parallel()
	s, rec := newTestSequencer(false)
	require.NoError(t, s.Emit(rs()))
	const workers, deltas = 16, 50
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			tc := fmt.Sprintf("tc%d", w)
			m := fmt.Sprintf("m%d", w)
			assert.NoError(t, s.Emit(&ToolCallStart{ToolCallID: tc, ToolCallName: "tool"}))
			assert.NoError(t, s.Emit(&TextMessageStart{MessageID: m}))
			for range deltas {
				assert.NoError(t, s.Emit(&ToolCallArgs{ToolCallID: tc, Delta: "x"}))
				assert.NoError(t, s.Emit(&TextMessageContent{MessageID: m, Delta: "y"}))
				_ = s.Open()
				_ = s.Terminated()
			}
			assert.NoError(t, s.Emit(&ToolCallEnd{ToolCallID: tc}))
			// Every other worker leaves its message open for Finish to close.
			if w%2 == 0 {
				assert.NoError(t, s.Emit(&TextMessageEnd{MessageID: m}))
			}
			assert.NoError(t, s.Emit(&ToolCallResult{MessageID: "r" + tc, ToolCallID: tc, Content: "[OK]"}))
		})
	}
	wg.Wait()
	require.NoError(t, s.Finish("", "", nil, nil))

	// Replay the received stream through a fresh sequencer: it must be accepted as is.
	check := NewSequencer(func(Event) error { return nil }, SequencerOptions{Now: fixedNow})
	for i, ev := range rec.events {
		require.NoError(t, check.Emit(ev), "event %d %s", i, ev.EventType())
	}
	assert.True(t, check.Terminated())
	assert.Len(t, rec.events, 1+workers*(2+2*deltas+3)+1)
}

// TestSequencerToSSE runs the reference's compact valid stream (§3) through the Sequencer and
// the SSE writer and checks the exact bytes on the wire.
func TestSequencerToSSE(t *testing.T) {
	t.Parallel()
	w := httptest.NewRecorder()
	sse := NewSSEWriter(w)
	s := NewSequencer(sse.WriteEvent, SequencerOptions{Now: func() time.Time { return time.UnixMilli(1) }})
	events := []Event{
		&RunStarted{ThreadID: "t1", RunID: "r1"},
		&StepStarted{StepName: "plan"},
		&SubagentStarted{SubagentRunID: "sa-1", Name: "researcher", Description: "A2A research agent"},
		&TextMessageStart{MessageID: "m1", Role: "assistant", SubagentRunID: "sa-1"},
		&TextMessageContent{MessageID: "m1", Delta: "Hello"},
		&TextMessageEnd{MessageID: "m1"},
		&SubagentFinished{SubagentRunID: "sa-1"},
		&ToolCallStart{ToolCallID: "tc1", ToolCallName: "search", ParentMessageID: "m1"},
		&ToolCallArgs{ToolCallID: "tc1", Delta: `{"q":"go sse"}`},
		&ToolCallEnd{ToolCallID: "tc1"},
		&ToolCallResult{MessageID: "m2", ToolCallID: "tc1", Content: "3 results"},
		&StateSnapshot{Snapshot: map[string]any{"agents": map[string]any{"researcher": "idle"}}},
		&StateDelta{Delta: json.RawMessage(`[{"op":"replace","path":"/agents/researcher","value":"busy"}]`)},
		&ActivitySnapshot{MessageID: "act1", ActivityType: "progress", Content: map[string]any{"pct": 50}},
		&Custom{Name: "coordinator.progress", Value: map[string]any{"agent": "researcher", "pct": 100}},
		&StepFinished{StepName: "plan"},
	}
	for _, ev := range events {
		require.NoError(t, s.Emit(ev))
	}
	require.NoError(t, s.Finish("", "", &Outcome{Type: OutcomeSuccess}, map[string]any{"ok": true}))

	want := strings.Join([]string{
		`{"type":"RUN_STARTED","timestamp":1,"threadId":"t1","runId":"r1","protocolVersion":"1.0"}`,
		`{"type":"STEP_STARTED","timestamp":1,"stepName":"plan"}`,
		`{"type":"SUBAGENT_STARTED","timestamp":1,"subagentRunId":"sa-1","name":"researcher","description":"A2A research agent"}`,
		`{"type":"TEXT_MESSAGE_START","timestamp":1,"messageId":"m1","role":"assistant","subagentRunId":"sa-1"}`,
		`{"type":"TEXT_MESSAGE_CONTENT","timestamp":1,"messageId":"m1","delta":"Hello"}`,
		`{"type":"TEXT_MESSAGE_END","timestamp":1,"messageId":"m1"}`,
		`{"type":"SUBAGENT_FINISHED","timestamp":1,"subagentRunId":"sa-1"}`,
		`{"type":"TOOL_CALL_START","timestamp":1,"toolCallId":"tc1","toolCallName":"search","parentMessageId":"m1"}`,
		`{"type":"TOOL_CALL_ARGS","timestamp":1,"toolCallId":"tc1","delta":"{\"q\":\"go sse\"}"}`,
		`{"type":"TOOL_CALL_END","timestamp":1,"toolCallId":"tc1"}`,
		`{"type":"TOOL_CALL_RESULT","timestamp":1,"messageId":"m2","toolCallId":"tc1","content":"3 results"}`,
		`{"type":"STATE_SNAPSHOT","timestamp":1,"snapshot":{"agents":{"researcher":"idle"}}}`,
		`{"type":"STATE_DELTA","timestamp":1,"delta":[{"op":"replace","path":"/agents/researcher","value":"busy"}]}`,
		`{"type":"ACTIVITY_SNAPSHOT","timestamp":1,"messageId":"act1","activityType":"progress","content":{"pct":50}}`,
		`{"type":"CUSTOM","timestamp":1,"name":"coordinator.progress","value":{"agent":"researcher","pct":100}}`,
		`{"type":"STEP_FINISHED","timestamp":1,"stepName":"plan"}`,
		`{"type":"RUN_FINISHED","timestamp":1,"threadId":"t1","runId":"r1","outcome":{"type":"success"},"result":{"ok":true}}`,
	}, "\n\ndata: ")
	assert.Equal(t, "data: "+want+"\n\n", w.Body.String())
	assert.Equal(t, "text/event-stream", w.Header().Get("Content-Type"))
}
