package failure

import (
	"fmt"
	"github.com/baton-dev/baton/internal/retry"
	"math/rand/v2"
	"time"
)

// Policy decides what to do about failures (DESIGN §6).
type Policy interface {
	// RetryBudget is the number of quiet retries a kind gets (per tool for tool_error); 0
	// for kinds that are never retried.
	RetryBudget(kind Kind) int
	// Backoff is the wait before retry number attempt (1-based). A retryAfter > 0 from
	// the provider is honoured exactly; report is true when the wait is longer than the
	// policy sleeps, in which case the wait is reported to the user and not slept.
	Backoff(kind Kind, attempt int, retryAfter time.Duration) (wait time.Duration, report bool)
	// Decide records f in st (attempt counters, strikes, lessons, the pending corrective
	// instruction) and returns the decision.
	Decide(f Failure, st *State) Decision
}

// Default retry settings of DESIGN §6.
const (
	defaultBackoffBase = 500 * time.Millisecond
	defaultBackoffCap  = 30 * time.Second
)

// DefaultPolicy is the table of DESIGN §6. The zero value is ready to use.
//
// Escalation order: a kind with a retry budget (transient_provider 3, output_truncated 1,
// tool_error 2 per tool) is retried while the budget lasts; once it is spent, the
// model-fixable kinds (output_truncated, tool_error) escalate to narrow_scope, a one-shot
// corrective instruction, and a second strike of narrow_scope for the same kind (any
// tool) escalates to handoff: retry → narrow_scope → handoff. no_progress starts at
// narrow_scope (→ handoff). transient_provider goes from retry straight to handoff: the
// model cannot fix a provider outage, and a Retry-After longer than the cap is a handoff at
// once (reported, not slept). loop_detected, ambiguous_input, iteration_limit and
// time_limit ask the user; output_refused, capability_gap and policy_violation hand off.
type DefaultPolicy struct {
	// BackoffBase is the first backoff; it doubles with each attempt. Default 500 ms.
	BackoffBase time.Duration
	// BackoffCap caps the backoff, and is the longest Retry-After that is slept. Default
	// 30 s.
	BackoffCap time.Duration
	// Jitter returns a duration in [0, d]; default uniform random. Tests fix it.
	Jitter func(d time.Duration) time.Duration
}

var _ Policy = (*DefaultPolicy)(nil)

// RetryBudget implements Policy.
func (p *DefaultPolicy) RetryBudget(kind Kind) int {
	switch kind {
	case KindTransientProvider:
		return 3
	case KindOutputTruncated:
		return 1
	case KindToolError:
		return 2
	case KindContextOverflow:
		return 1
	}
	return 0
}

// Backoff implements Policy: exponential (base, 2×base, 4×base…) with jitter over the
// upper half, capped. Only transient_provider waits; the other kinds retry at once.
func (p *DefaultPolicy) Backoff(kind Kind, attempt int, retryAfter time.Duration) (time.Duration, bool) {
	if kind != KindTransientProvider {
		return 0, false
	}
	limit := p.cap()
	if retryAfter > 0 {
		return retryAfter, retryAfter > limit
	}
	base := p.BackoffBase
	if base <= 0 {
		base = defaultBackoffBase
	}
	d := retry.Backoff(base, limit, attempt)
	half := d / 2
	return half + p.jitter(d-half), false
}

func (p *DefaultPolicy) cap() time.Duration {
	if p.BackoffCap > 0 {
		return p.BackoffCap
	}
	return defaultBackoffCap
}

func (p *DefaultPolicy) jitter(d time.Duration) time.Duration {
	if d <= 0 {
		return 0
	}
	if p.Jitter != nil {
		return min(max(p.Jitter(d), 0), d)
	}
	return rand.N(d + 1)
}

// Decide implements Policy.
func (p *DefaultPolicy) Decide(f Failure, st *State) Decision {
	st.init()
	st.Learn(f)
	d := Decision{Kind: f.Kind, Tool: f.Tool}
	switch f.Kind {
	case KindTransientProvider, KindOutputTruncated, KindToolError:
		n := st.bump(f.Kind, f.Tool)
		d.Attempt = n
		budget := p.RetryBudget(f.Kind)
		if n <= budget {
			wait, report := p.Backoff(f.Kind, n, f.RetryAfter)
			d.Wait = wait
			if report {
				d.Action = ActionHandoff
				d.Explanation = fmt.Sprintf("%s It asked to wait %s before trying again, which is longer than this coordinator waits (%s).",
					f.Explanation, RoundWait(wait), RoundWait(p.cap()))
				return d
			}
			d.Action = ActionRetry
			d.Explanation = retryExplanation(f, wait, n, budget)
			return d
		}
		if f.Kind == KindTransientProvider {
			d.Action = ActionHandoff
			d.Explanation = fmt.Sprintf("%s It is still failing after %d retries.", f.Explanation, budget)
			return d
		}
		return p.escalate(f, st, d)
	case KindContextOverflow:
		return decideOverflow(p, f, st, d)
	case KindNoProgress:
		return p.escalate(f, st, d)
	case KindLoopDetected, KindAmbiguousInput, KindIterationLimit, KindTimeLimit:
		d.Attempt = st.bump(f.Kind, "")
		d.Action = ActionAskUser
		d.Explanation = f.Explanation + " Your decision is needed to go on."
		return d
	default: // output_refused, capability_gap, policy_violation, and anything unknown
		d.Attempt = st.bump(f.Kind, "")
		d.Action = ActionHandoff
		d.Explanation = f.Explanation
		return d
	}
}

// escalate gives the first strike of a kind a corrective instruction and hands off on the
// second.
func (p *DefaultPolicy) escalate(f Failure, st *State, d Decision) Decision {
	if st.Strikes == nil {
		st.Strikes = map[Kind]int{}
	}
	st.Strikes[f.Kind]++
	strike := st.Strikes[f.Kind]
	if d.Attempt == 0 {
		d.Attempt = strike
	}
	if strike == 1 {
		st.Corrective = &Corrective{Kind: f.Kind, Tool: f.Tool, Attempts: d.Attempt}
		d.Action = ActionNarrowScope
		d.Explanation = f.Explanation + " The model is asked to change its approach."
		return d
	}
	d.Action = ActionHandoff
	d.Explanation = f.Explanation + " It happened again after a corrective instruction."
	return d
}

func retryExplanation(f Failure, wait time.Duration, attempt, budget int) string {
	switch f.Kind {
	case KindTransientProvider:
		return fmt.Sprintf("%s Retrying in %s (retry %d of %d).", f.Explanation, RoundWait(wait), attempt, budget)
	case KindOutputTruncated:
		return fmt.Sprintf("%s Asking again (retry %d of %d).", f.Explanation, attempt, budget)
	}
	return fmt.Sprintf("%s The model may correct the call (retry %d of %d).", f.Explanation, attempt, budget)
}

// RoundWait renders a wait for people: whole seconds from 1 s up, milliseconds below.
func RoundWait(d time.Duration) time.Duration {
	if d >= time.Second {
		return d.Round(time.Second)
	}
	return d.Round(time.Millisecond)
}

// State is the failure bookkeeping of one run, carried across suspension and
// resume (it is stored with the suspension as JSON). It is owned by the run loop and not
// safe for concurrent use.
type State struct {
	// Attempts counts failures per kind ("tool_error:<tool>" for tool errors).
	Attempts map[string]int `json:"attempts,omitempty"`
	// Strikes counts narrow-scope escalations per kind.
	Strikes map[Kind]int `json:"strikes,omitempty"`
	// Lessons holds the latest failure of at most five distinct kinds, oldest first.
	Lessons []Lesson `json:"lessons,omitempty"`
	// Corrective is the pending one-shot corrective instruction, nil when none.
	Corrective *Corrective `json:"corrective,omitempty"`
	// Signatures counts call and error signatures for the loop detector.
	Signatures map[string]int `json:"signatures,omitempty"`
	// Iterations counts the LLM calls made in the current iteration allowance.
	Iterations int `json:"iterations"`
	// Active is the active time spent in earlier parts of the run (before suspensions) in
	// the current time allowance.
	Active time.Duration `json:"active_ns"`
	// NoProgress counts consecutive tool rounds in which no tool call succeeded.
	NoProgress int `json:"no_progress_rounds"`
	// Budget is the run's usage of its tool-call and token budget.
	Budget BudgetUsage `json:"budget"`
	// TraceParent is the W3C traceparent of the run that was suspended last: the run that
	// resumes it links to it (design/telemetry.md).
	TraceParent string `json:"traceparent,omitempty"`
	// Declined holds the signatures (CallSignature) of the calls the user declined to
	// approve: the same call is refused for the rest of the run.
	Declined []string `json:"declined,omitempty"`
}

// init makes the maps that are shared or written on every run. Attempts and Strikes are
// made by their first failure (bump, escalate): most runs have none, and an open run
// should not retain empty maps.
func (st *State) init() {
	if st.Signatures == nil {
		st.Signatures = map[string]int{}
	}
}

// attemptKey keys tool errors per tool, every other kind per kind.
func attemptKey(kind Kind, tool string) string {
	if kind == KindToolError {
		return string(kind) + ":" + tool
	}
	return string(kind)
}

func (st *State) bump(kind Kind, tool string) int {
	if st.Attempts == nil {
		st.Attempts = map[string]int{}
	}
	k := attemptKey(kind, tool)
	st.Attempts[k]++
	return st.Attempts[k]
}

// AttemptsOf returns the failures counted for kind (and tool, for tool_error).
func (st *State) AttemptsOf(kind Kind, tool string) int {
	return st.Attempts[attemptKey(kind, tool)]
}

// Recovered resets the retry budget of kind (and tool, for tool_error) after a success:
// budgets count consecutive failures. Call it after a model turn that succeeded
// (transient_provider, and output_truncated when the turn was complete) and after a tool
// result that made progress (tool_error for that tool). Strikes are not reset: a second
// strike of a kind escalates anywhere in the run.
func (st *State) Recovered(kind Kind, tool string) {
	delete(st.Attempts, attemptKey(kind, tool))
}

// Resume gives a run resumed after an ask_user decision a fresh allowance of what stopped
// it, and only that (DESIGN §6): iteration_limit resets the iteration count, time_limit
// the active time, loop_detected the loop signatures, no_progress the stall count.
func (st *State) Resume(kind Kind) {
	switch kind {
	case KindIterationLimit:
		st.Iterations = 0
	case KindTimeLimit:
		st.Active = 0
	case KindLoopDetected:
		clear(st.Signatures)
	case KindNoProgress:
		st.NoProgress = 0
	}
}

// ObserveRound updates the stall count with the results of one tool round: a round in
// which some call made progress (see IsProgress) resets it, any other round adds one.
func (st *State) ObserveRound(results []ToolResult) {
	for _, r := range results {
		if IsProgress(r) {
			st.NoProgress = 0
			return
		}
	}
	if len(results) > 0 {
		st.NoProgress++
	}
}

// TurnState returns what DetectBeforeTurn needs before the next LLM call; sinceStart is
// the active time of the current part of the run.
func (st *State) TurnState(sinceStart time.Duration) TurnState {
	return TurnState{Iterations: st.Iterations, Elapsed: st.Active + sinceStart, RoundsWithoutProgress: st.NoProgress}
}
