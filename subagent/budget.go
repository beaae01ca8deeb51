package subagent

import (
	"encoding/json"
	"fmt"
	"math"
)

// Budgets down a tree of Batons (contract §7, §9c): a Baton delegating to an agent sends
// its run's remaining budget in the message metadata (BudgetKey); an agent that is a
// Baton runs the message within it and reports what its run used in the metadata of the
// task's final status (UsageKey). Both are plain JSON objects, so that an agent that is
// not a Baton can ignore them, and both are untrusted on arrival.

// BudgetKey is the message metadata key of the caller's remaining budget.
const BudgetKey = "baton/budget"

// UsageKey is the task (final status) metadata key of what the agent's run used.
const UsageKey = "baton/usage"

// Bounds of what a peer may claim: far beyond any real budget or run, and small enough
// that sums of them never overflow an int64 or lose a cent in a float64.
const (
	// MaxReportedTokens bounds a token count in a budget or a usage report.
	MaxReportedTokens = 1 << 40
	// MaxReportedUSD bounds a dollar amount in a budget or a usage report.
	MaxReportedUSD = 1e9
)

// Budget is what a caller lets the agent spend on one message: its run's remaining
// budget. A zero field is no limit in that unit (it is left out of the metadata).
type Budget struct {
	Tokens  int64   `json:"tokens,omitempty"`
	CostUSD float64 `json:"costUsd,omitempty"`
}

// Metadata is the budget as metadata: plain JSON values (SDKs copy metadata with gob,
// which knows no types of ours).
func (b Budget) Metadata() map[string]any {
	m := map[string]any{}
	if b.Tokens > 0 {
		m["tokens"] = float64(b.Tokens)
	}
	if b.CostUSD > 0 {
		m["costUsd"] = b.CostUSD
	}
	return m
}

// IsZero reports whether the budget limits nothing.
func (b Budget) IsZero() bool { return b.Tokens <= 0 && b.CostUSD <= 0 }

// Usage is what an agent's run used on one message, as the agent reports it.
type Usage struct {
	InputTokens  int64   `json:"inputTokens"`
	OutputTokens int64   `json:"outputTokens"`
	CostUSD      float64 `json:"costUsd"`
	// MessageID is the message the run answered: a report about another message (an
	// earlier one of the same task, merged into the task's metadata) is not this one's.
	MessageID string `json:"messageId"`
}

// Metadata is the usage as metadata: plain JSON values, as Budget.Metadata.
func (u Usage) Metadata() map[string]any {
	return map[string]any{"inputTokens": float64(u.InputTokens), "outputTokens": float64(u.OutputTokens),
		"costUsd": u.CostUSD, "messageId": u.MessageID}
}

// ParseBudget reads a caller's budget from message metadata (nil: none). Every field
// present must be a number above zero, whole for tokens, within the bounds above, and
// at least one must be present; anything else is an error and the budget is to be
// ignored (a bad budget never raises a limit: the agent's own budget still holds).
func ParseBudget(v any) (*Budget, error) {
	if v == nil {
		return nil, nil
	}
	var raw struct {
		Tokens  *float64 `json:"tokens"`
		CostUSD *float64 `json:"costUsd"`
	}
	if err := remarshal(v, &raw); err != nil {
		return nil, fmt.Errorf("%s is not an object of numbers: %w", BudgetKey, err)
	}
	var b Budget
	if raw.Tokens != nil {
		t := *raw.Tokens
		if t != math.Trunc(t) || t <= 0 || t > MaxReportedTokens {
			return nil, fmt.Errorf("%s.tokens must be a whole number from 1 to %d", BudgetKey, int64(MaxReportedTokens))
		}
		b.Tokens = int64(t)
	}
	if raw.CostUSD != nil {
		c := *raw.CostUSD
		if math.IsNaN(c) || c <= 0 || c > MaxReportedUSD {
			return nil, fmt.Errorf("%s.costUsd must be a number above 0 and at most %g", BudgetKey, float64(MaxReportedUSD))
		}
		b.CostUSD = c
	}
	if b.IsZero() {
		return nil, fmt.Errorf("%s has neither tokens nor costUsd", BudgetKey)
	}
	return &b, nil
}

// ParseUsage reads an agent's usage report for message messageID from task metadata
// (nil: none, or a report about another message). A report that is not an object of
// numbers is an error; negative numbers count as zero and larger ones than the bounds
// as the bound, so that a peer can neither lower the caller's meter nor overflow it.
func ParseUsage(v any, messageID string) (*Usage, error) {
	u, err := ParseCallUsage(v)
	if u == nil || err != nil {
		return nil, err
	}
	if u.MessageID != messageID || messageID == "" {
		return nil, nil
	}
	return u, nil
}

// ParseCallUsage reads a usage report that belongs to one call by construction, as the
// _meta of an MCP tool result does (no message id to match), with ParseUsage's bounds:
// nil for none, an error for a report that is not an object of numbers.
func ParseCallUsage(v any) (*Usage, error) {
	if v == nil {
		return nil, nil
	}
	var raw struct {
		InputTokens  float64 `json:"inputTokens"`
		OutputTokens float64 `json:"outputTokens"`
		CostUSD      float64 `json:"costUsd"`
		MessageID    string  `json:"messageId"`
	}
	if err := remarshal(v, &raw); err != nil {
		return nil, fmt.Errorf("%s is not an object of numbers: %w", UsageKey, err)
	}
	if math.IsNaN(raw.CostUSD) {
		return nil, fmt.Errorf("%s.costUsd is not a number", UsageKey)
	}
	tokens := func(f float64) int64 { return int64(math.Floor(min(max(f, 0), MaxReportedTokens))) }
	return &Usage{InputTokens: tokens(raw.InputTokens), OutputTokens: tokens(raw.OutputTokens),
		CostUSD: min(max(raw.CostUSD, 0), MaxReportedUSD), MessageID: raw.MessageID}, nil
}

// remarshal copies v into out through JSON: metadata arrives as decoded JSON.
func remarshal(v, out any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	return json.Unmarshal(b, out)
}

// noteUsage keeps the usage report of metadata, when it has one.
func (d *delegation) noteUsage(md map[string]any) {
	if v, ok := md[UsageKey]; ok {
		d.usage = v
	}
}

// reportedUsage is the agent's report of what this message's run used, nil when it
// made none (or a bad one, which is logged and counts nothing).
func (d *delegation) reportedUsage() *Usage {
	u, err := ParseUsage(d.usage, d.msgID)
	if err != nil {
		d.a.logger.Warn("a2a: the agent's usage report is ignored", "error", err)
		return nil
	}
	return u
}
