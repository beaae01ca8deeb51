package a2aserver

import (
	"fmt"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2a"
)

// BudgetExceededError refuses a run of a principal whose daily model budget is spent
// (policy.principal_budget), before the run starts: the A2A equivalent of AG-UI's 429
// BUDGET_EXCEEDED.
type BudgetExceededError struct {
	// Message is safe to show: the budget and when it resets.
	Message  string
	ResetsAt time.Time
}

func (e *BudgetExceededError) Error() string { return "a2aserver: budget exceeded: " + e.Message }

// a2aError is the A2A error of the refusal: an invalid request (the caller may send it again
// after ResetsAt), with the message.
func (e *BudgetExceededError) a2aError() error {
	return fmt.Errorf("%w: %s", a2a.ErrInvalidRequest, e.Message)
}
