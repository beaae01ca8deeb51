package coordinator

import (
	"context"

	"github.com/baton-dev/baton/agui"
	"github.com/baton-dev/baton/failure"
	"github.com/baton-dev/baton/spend"
	"github.com/baton-dev/baton/subagent"
)

// Budgets down the tree (DESIGN §7, §9c; design/spend.md): a delegation carries the run's
// remaining budget (baton/budget); a run another Baton started keeps the smaller of its
// own budget and the one it was given, and reports what it used (CUSTOM baton.usage,
// which the A2A door puts in the task's final status as baton/usage); the caller counts
// a sub-agent's report like a model call of its own, against its run budget and its
// principal's day.

// CustomUsage is the CUSTOM event of what a run another Baton started has used so far
// (its model calls and its sub-agents' reports): {inputTokens, outputTokens, costUsd}.
const CustomUsage = "baton.usage"

// countUsage adds one increment of usage (a model call's, or a sub-agent's report) to the
// run's budget, the principal's day and the thread, and warns about every threshold it
// crossed. Safe from the run's sub-agent calls as from its loop.
func countUsage(ctx context.Context, r *Run, u spend.Usage) {
	warnings, _ := r.guard.AddUsage(u)
	// Counted even when the run is being stopped: the provider billed the call. Bounded
	// like any store write of the run.
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), storeWriteTimeout)
	pw, over, err := r.e.cfg.Spend.Record(rctx, r.owner, r.ThreadID, u)
	cancel()
	if err != nil {
		// The day's increment is lost: the run goes on; the next run's admission reads the
		// day as the store has it (design/spend.md).
		r.log.Warn("record model usage", "err", err)
	}
	warnings = append(warnings, pw...)
	r.sp.mu.Lock()
	if over != nil {
		r.sp.principalOver = over
	}
	for _, w := range warnings {
		r.sp.notes = append(r.sp.notes, w.Note())
	}
	r.sp.used = r.sp.used.Plus(u)
	used := r.sp.used
	r.sp.mu.Unlock()
	for _, w := range warnings {
		r.emit(&agui.Custom{Name: CustomBudgetWarning, Value: w})
	}
	if r.in.Depth > 0 {
		// Started by another Baton, which counts what this run used against its own.
		r.emit(&agui.Custom{Name: CustomUsage, Value: used})
	}
}

// guardPolicy is the policy of the run's guard: the engine's, or for a run whose caller
// gave it a budget, a copy whose token and cost budget is the smaller of the two. The
// given budget is for this run: it is added to what the thread's earlier runs (the ones
// it resumes) used. It also fixes the run's limits (runSpend.limits).
func guardPolicy(r *Run) *failure.GuardPolicy {
	p := &r.e.cfg.Guard
	if b := r.in.Budget; b != nil {
		cp := *p
		used := r.fs.Budget
		if b.Tokens > 0 {
			if limit := int64(used.Tokens) + min(b.Tokens, subagent.MaxReportedTokens); cp.Budget.MaxTokens <= 0 || limit < int64(cp.Budget.MaxTokens) {
				cp.Budget.MaxTokens, cp.Budget.GivenTokens = int(limit), true
			}
		}
		if b.CostUSD > 0 {
			if limit := used.CostUSD + min(b.CostUSD, subagent.MaxReportedUSD); cp.Budget.MaxCostUSD <= 0 || limit < cp.Budget.MaxCostUSD {
				cp.Budget.MaxCostUSD, cp.Budget.GivenCostUSD = limit, true
			}
		}
		p = &cp
	}
	r.sp.limits = spend.Limits{Tokens: int64(p.Budget.MaxTokens), CostUSD: p.Budget.MaxCostUSD}
	return p
}

// callerLeft is what is left of the budget the run's caller gave it, past used (the
// run's budget use, as its checkpoint keeps it): a replica that takes the run over keeps
// the same limit (used + left). The given budget as it came before the run's guard exists;
// nil without one.
func callerLeft(r *Run, used failure.BudgetUsage) *agui.CallerBudget {
	b := r.in.Budget
	if b == nil || !r.sp.limits.Set() {
		return b
	}
	left := *b
	if b.Tokens > 0 {
		left.Tokens = max(r.sp.limits.Tokens-int64(used.Tokens), leastTokens)
	}
	if b.CostUSD > 0 {
		left.CostUSD = max(r.sp.limits.CostUSD-used.CostUSD, leastUSD)
	}
	return &left
}

// Least budget sent for a spent unit: zero would mean no limit.
const (
	leastTokens = 1
	leastUSD    = 1e-9
)

// remainingBudget is the budget a delegation carries: what is left of the run's budget and of
// the principal's day (one store read, when a daily budget is set), the smaller in each
// unit; nil when neither has a limit. A spent unit is sent as the least amount (the agent
// may make one model call, as the run itself may overshoot by one), never as zero.
func remainingBudget(ctx context.Context, r *Run) *subagent.Budget {
	var b subagent.Budget
	take := func(tokens int64, usd float64, limits spend.Limits) {
		if limits.Tokens > 0 {
			if t := max(tokens, leastTokens); b.Tokens == 0 || t < b.Tokens {
				b.Tokens = t
			}
		}
		if limits.CostUSD > 0 {
			if c := max(usd, leastUSD); b.CostUSD == 0 || c < b.CostUSD {
				b.CostUSD = c
			}
		}
	}
	if l := r.sp.limits; l.Set() && r.guard != nil {
		spent := r.guard.Spent()
		take(l.Tokens-spent.Tokens(), l.CostUSD-spent.CostUSD, l)
	}
	if m := r.e.cfg.Spend; m.DailyBudget() {
		dctx, cancel := context.WithTimeout(ctx, storeWriteTimeout)
		left, err := m.DayLeft(dctx, r.owner)
		cancel()
		if err != nil {
			// The day cannot be read: the run's own remainder still goes down.
			r.log.Warn("read the principal's day", "err", err)
		} else {
			take(left.Tokens, left.CostUSD, m.Daily())
		}
	}
	if b.IsZero() {
		return nil
	}
	return &b
}

// countSubtree counts what a sub-agent that is a Baton reports its run used (its model
// calls and its own sub-agents'), as the run's own spend. The report is bounded
// (subagent.ParseUsage): never negative, never beyond a2a's bounds.
func countSubtree(r *Run, agent string, u *subagent.Usage) {
	if u == nil || (u.InputTokens == 0 && u.OutputTokens == 0 && u.CostUSD == 0) {
		return
	}
	r.log.Debug("sub-agent usage", "agent", agent, "input_tokens", u.InputTokens, "output_tokens", u.OutputTokens, "cost_usd", u.CostUSD)
	countUsage(context.Background(), r, spend.Usage{InputTokens: u.InputTokens, OutputTokens: u.OutputTokens, CostUSD: u.CostUSD})
}

// countCallUsage counts what an MCP server that is another Baton reports its run used,
// in the tool result's _meta (baton/usage), as countSubtree counts an agent's report. A
// result answers one call, so the report needs no message id; a bad one is logged and
// counts nothing.
func countCallUsage(r *Run, tool string, meta map[string]any) {
	v, ok := meta[subagent.UsageKey]
	if !ok {
		return
	}
	u, err := subagent.ParseCallUsage(v)
	if err != nil {
		r.log.Warn("mcp: the server's usage report is ignored", "tool", tool, "err", err)
		return
	}
	countSubtree(r, tool, u)
}
