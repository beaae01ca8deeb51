package a2aserver

import (
	"encoding/json"
	"fmt"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/a2aproject/a2a-go/v2/a2asrv"
)

// BudgetExceededError refuses a run of a principal whose daily model budget is spent
// (policy.principal_budget), before the run starts: the A2A equivalent of AG-UI's 429
// BUDGET_EXCEEDED is a task rejected with the message (refusal), so that a caller, or a
// calling Baton's model, can tell the refusal from its own mistake.
type BudgetExceededError struct {
	// Message is safe to show: the budget and when it resets.
	Message  string
	ResetsAt time.Time
}

func (e *BudgetExceededError) Error() string { return "a2aserver: budget exceeded: " + e.Message }

// a2aError is the A2A error of the refusal where no task can be rejected: an invalid
// request (the caller may send it again after ResetsAt), with the message.
func (e *BudgetExceededError) a2aError() error {
	return fmt.Errorf("%w: %s", a2a.ErrInvalidRequest, e.Message)
}

// eventBudgetWarning is the engine's CUSTOM event of a budget that passed its warn_at.
const eventBudgetWarning = "baton.budget_warning"

// budgetWarningStatus is a budget warning as A2A progress: a working status whose message
// is the "[BUDGET_WARNING] {json}" note, with the warning in the metadata
// ("baton/budget_warning"). Nil when the value is not an object.
func budgetWarningStatus(ec *a2asrv.ExecutorContext, v any) *a2a.TaskStatusUpdateEvent {
	var w budgetWarning
	if !remarshal(v, &w) || w.Budget == "" {
		return nil
	}
	b, err := json.Marshal(w)
	if err != nil {
		return nil
	}
	m := a2a.NewMessageForTask(a2a.MessageRoleAgent, ec, a2a.NewTextPart("[BUDGET_WARNING] "+string(b)))
	ev := a2a.NewStatusUpdateEvent(ec, a2a.TaskStateWorking, m)
	ev.Metadata = map[string]any{"baton/budget_warning": w}
	return ev
}

// budgetWarning is the warning's JSON (DESIGN §7), in the note's field order.
type budgetWarning struct {
	Budget    string  `json:"budget"`
	Unit      string  `json:"unit"`
	Used      float64 `json:"used"`
	Limit     float64 `json:"limit"`
	Remaining float64 `json:"remaining"`
}
