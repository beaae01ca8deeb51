package agui

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestSequencerRestoreAndCloseOpen: a sequencer rebuilt from events another process sent
// (Restore, nothing forwarded) goes on from there; CloseOpen closes what is open except the
// subagents kept (and their parents), and the run can then finish.
func TestSequencerRestoreAndCloseOpen(t *testing.T) {
	t.Parallel()
	var sent []Event
	s := NewSequencer(func(ev Event) error { sent = append(sent, ev); return nil }, SequencerOptions{})
	for _, ev := range []Event{
		&RunStarted{ThreadID: "t", RunID: "r"},
		&ToolCallStart{ToolCallID: "c1", ToolCallName: "peer"},
		&SubagentStarted{SubagentRunID: "outer", Name: "peer"},
		&SubagentStarted{SubagentRunID: "inner", Name: "peer", ParentSubagentRunID: "outer"},
		&SubagentStarted{SubagentRunID: "other", Name: "peer"},
		&TextMessageStart{MessageID: "m1", Role: RoleAssistant, SubagentRunID: "inner"},
		&TextMessageContent{MessageID: "m1", Delta: "hi", SubagentRunID: "inner"},
	} {
		require.NoError(t, s.Restore(ev))
	}
	assert.Empty(t, sent, "restored events are not sent again")
	require.Error(t, s.Restore(&TextMessageEnd{MessageID: "nope"}), "restoring checks the order too")
	require.Error(t, s.Emit(&RunStarted{ThreadID: "t", RunID: "r"}), "the run is running already")

	require.NoError(t, s.CloseOpen(func(id string) bool { return id == "inner" }))
	var types []EventType
	for _, ev := range sent {
		types = append(types, ev.EventType())
	}
	assert.Equal(t, []EventType{EventTextMessageEnd, EventToolCallEnd, EventSubagentError}, types)
	assert.Equal(t, "other", sent[2].(*SubagentError).SubagentRunID)
	assert.Equal(t, []string{"outer", "inner"}, s.Open().Subagents, "the kept subagent and its parent stay open")

	require.NoError(t, s.Emit(&SubagentFinished{SubagentRunID: "inner"}))
	require.NoError(t, s.Emit(&SubagentFinished{SubagentRunID: "outer"}))
	require.NoError(t, s.Finish("", "", &Outcome{Type: OutcomeSuccess}, nil))
	assert.Equal(t, EventRunFinished, sent[len(sent)-1].EventType())
}
