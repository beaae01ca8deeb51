package a2aserver

import (
	"errors"
	"fmt"
	"testing"

	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/a2aproject/a2a-go/v2/a2asrv"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/baton-dev/baton/agui"
)

func TestStartErrorBudgetExceeded(t *testing.T) {
	t.Parallel()
	err := startError(fmt.Errorf("start: %w", &BudgetExceededError{Message: "You have used your daily budget of $5.00; it resets at 2026-12-08T00:00:00Z (UTC midnight)."}))
	assert.True(t, errors.Is(err, a2a.ErrInvalidRequest))
	assert.Contains(t, err.Error(), "resets at 2026-12-08T00:00:00Z")
}

// A principal over its day gets its task rejected with the budget's words (a calling
// Baton's model reads [REJECTED] and the reason), never an invalid-request error.
func TestBudgetExceededIsRejectedTask(t *testing.T) {
	t.Parallel()
	ec := &a2asrv.ExecutorContext{TaskID: "task-1", ContextID: "ctx-1", Message: a2a.NewMessage(a2a.MessageRoleUser, a2a.NewTextPart("go"))}
	ev := refusal(ec, fmt.Errorf("start: %w", &BudgetExceededError{Message: "You have used your daily budget of $5.00; it resets at 2026-12-08T00:00:00Z (UTC midnight)."}))
	task, ok := ev.(*a2a.Task)
	require.True(t, ok, "a rejected task, got %T", ev)
	assert.Equal(t, a2a.TaskStateRejected, task.Status.State)
	require.NotNil(t, task.Status.Message)
	text := task.Status.Message.Parts[0].Text()
	assert.Contains(t, text, "resets at 2026-12-08T00:00:00Z")
}

// TestBudgetWarningIsProgress: the engine's CUSTOM baton.budget_warning reaches an A2A
// caller as a working status carrying the [BUDGET_WARNING] note.
func TestBudgetWarningIsProgress(t *testing.T) {
	t.Parallel()
	ec := &a2asrv.ExecutorContext{TaskID: "task-1", ContextID: "ctx-1"}
	r := &relay{ec: ec, lt: &liveTask{threadID: "ctx-1", runID: "run-1"}}
	evs := r.event(&agui.Custom{Name: "baton.budget_warning", Value: map[string]any{"budget": "run", "unit": "usd", "used": 0.8, "limit": 1, "remaining": 0.2}})
	require.Len(t, evs, 1)
	st, ok := evs[0].(*a2a.TaskStatusUpdateEvent)
	require.True(t, ok)
	assert.Equal(t, a2a.TaskStateWorking, st.Status.State)
	require.NotNil(t, st.Status.Message)
	text := st.Status.Message.Parts[0].Text()
	assert.Equal(t, `[BUDGET_WARNING] {"budget":"run","unit":"usd","used":0.8,"limit":1,"remaining":0.2}`, text)
	assert.Equal(t, "usd", st.Metadata["baton/budget_warning"].(map[string]any)["unit"], "plain JSON values (a2a-go copies metadata with gob)")
	assert.Empty(t, r.event(&agui.Custom{Name: "baton.budget_warning", Value: "not an object"}))
}

// TestCallerBudget: a caller's baton/budget becomes the run's budget; a malformed,
// negative or empty one is ignored (the run keeps its own budget), never raised.
func TestCallerBudget(t *testing.T) {
	t.Parallel()
	msg := func(v any) *a2a.Message {
		m := a2a.NewMessage(a2a.MessageRoleUser, a2a.NewTextPart("go"))
		m.Metadata = map[string]any{"baton/budget": v}
		return m
	}
	assert.Equal(t, &agui.CallerBudget{Tokens: 900, CostUSD: 0.25}, callerBudget(msg(map[string]any{"tokens": 900.0, "costUsd": 0.25})))
	assert.Equal(t, &agui.CallerBudget{Tokens: 12}, callerBudget(msg(map[string]any{"tokens": 12.0})))
	for _, bad := range []any{nil, "lots", map[string]any{"tokens": -1.0}, map[string]any{"costUsd": -0.5}, map[string]any{}, map[string]any{"tokens": 0.5}} {
		assert.Nil(t, callerBudget(msg(bad)), "%#v", bad)
	}
	assert.Nil(t, callerBudget(a2a.NewMessage(a2a.MessageRoleUser, a2a.NewTextPart("go"))), "no metadata")
	assert.Nil(t, callerBudget(nil))
}

// TestUsageInFinalStatus: the run's last baton.usage reaches the task's final status as
// baton/usage, for the message that started the run; a run that reported none adds none.
func TestUsageInFinalStatus(t *testing.T) {
	t.Parallel()
	m := a2a.NewMessage(a2a.MessageRoleUser, a2a.NewTextPart("go"))
	ec := &a2asrv.ExecutorContext{TaskID: "task-1", ContextID: "ctx-1", Message: m}
	r := &relay{ec: ec, lt: &liveTask{threadID: "ctx-1", runID: "run-1"}}
	assert.Empty(t, r.event(&agui.Custom{Name: "baton.usage", Value: map[string]any{"inputTokens": 10, "outputTokens": 1, "costUsd": 0.1}}))
	assert.Empty(t, r.event(&agui.Custom{Name: "baton.usage", Value: map[string]any{"inputTokens": 40, "outputTokens": 5, "costUsd": 0.5}}))
	r.event(&agui.RunFinished{ThreadID: "ctx-1", RunID: "run-1"})
	st, ok := r.final.(*a2a.TaskStatusUpdateEvent)
	require.True(t, ok, "%T", r.final)
	assert.Equal(t, a2a.TaskStateCompleted, st.Status.State)
	assert.Equal(t, map[string]any{"inputTokens": 40.0, "outputTokens": 5.0, "costUsd": 0.5, "messageId": m.ID}, st.Metadata["baton/usage"],
		"plain JSON values (a2a-go copies metadata with gob)")

	r = &relay{ec: ec, lt: &liveTask{threadID: "ctx-1", runID: "run-2"}}
	r.event(&agui.RunError{Code: "MODEL_UNAVAILABLE", Message: "down"})
	st = r.final.(*a2a.TaskStatusUpdateEvent)
	assert.NotContains(t, st.Metadata, "baton/usage")
}
