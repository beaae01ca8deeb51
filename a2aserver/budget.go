package a2aserver

import (
	"encoding/json"
	"fmt"
	"log/slog"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/a2aproject/a2a-go/v2/a2asrv"

	"github.com/baton-dev/baton/agui"
	"github.com/baton-dev/baton/subagent"
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
	// Plain JSON values: a2a-go copies metadata with gob, which knows no types of ours
	// (a struct here failed the task's store write).
	var md map[string]any
	if !remarshal(w, &md) {
		return nil
	}
	ev.Metadata = map[string]any{"baton/budget_warning": md}
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

// Budgets down the tree (contract §7, §9c): a calling Baton sends its run's remaining
// budget in the message metadata (baton/budget); the run started here keeps the smaller
// of its own budget and that one. What the run used comes back in the metadata of the
// task's final status (baton/usage), from the engine's CUSTOM baton.usage events (the
// run's usage so far, after each model call and each sub-agent's report).

// eventUsage is the engine's CUSTOM event of the run's usage so far.
const eventUsage = "baton.usage"

// callerBudget is the budget the message's sender gives the run, nil without one. A
// malformed budget is untrusted input: it is ignored (the run keeps its own budget, so
// nothing is ever raised) and logged.
func callerBudget(m *a2a.Message) *agui.CallerBudget {
	if m == nil {
		return nil
	}
	b, err := subagent.ParseBudget(m.Metadata[subagent.BudgetKey])
	if err != nil {
		slog.Warn("a2a: the caller's budget is ignored", "message_id", m.ID, "err", err)
		return nil
	}
	if b == nil {
		return nil
	}
	return &agui.CallerBudget{Tokens: b.Tokens, CostUSD: b.CostUSD}
}

// runUsage is the engine's baton.usage value.
type runUsage struct {
	InputTokens  int64   `json:"inputTokens"`
	OutputTokens int64   `json:"outputTokens"`
	CostUSD      float64 `json:"costUsd"`
}

// noteUsage keeps the run's latest usage (each event has the total so far).
func (r *relay) noteUsage(v any) {
	var u runUsage
	if remarshal(v, &u) {
		r.usage = &u
	}
}

// reportUsage adds what the run used to its final status, for the message that started
// it: a calling Baton counts it against its own run.
func (r *relay) reportUsage() {
	st, ok := r.final.(*a2a.TaskStatusUpdateEvent)
	if !ok || r.usage == nil || r.ec.Message == nil {
		return
	}
	if st.Metadata == nil {
		st.Metadata = map[string]any{}
	}
	st.Metadata[subagent.UsageKey] = subagent.Usage{InputTokens: r.usage.InputTokens, OutputTokens: r.usage.OutputTokens,
		CostUSD: r.usage.CostUSD, MessageID: r.ec.Message.ID}.Metadata()
}
