package failure

// Failure model (DESIGN §6).
//
// Design note: every failure is classified into one closed set of kinds by pure detectors
// (detect.go, loop.go, guard.go and the classifiers below); each returns a *Failure or nil,
// so nothing is swallowed and nothing is decided where it is detected. A Policy then turns
// a failure and the run's State into a Decision (retry, narrow_scope, ask_user,
// handoff, stop), and the engine (coordinator/outcome.go) turns decisions into AG-UI events. The state (attempt
// counters, narrow-scope strikes, lessons, loop signatures, budget usage) is plain data
// with JSON tags, so that it survives suspension and resume.

import (
	"github.com/baton-dev/baton/internal/toolname"

	"context"
	"errors"
	"fmt"
	"time"

	"github.com/baton-dev/baton/llm"
)

// Kind is one kind of the closed set of DESIGN §6.
type Kind string

// The failure kinds. The set is closed: a detector never invents another.
const (
	// KindTransientProvider: LLM 429, 5xx or network failure.
	KindTransientProvider Kind = "transient_provider"
	// KindOutputTruncated: the LLM stopped at its output length limit (finish_reason=length).
	KindOutputTruncated Kind = "output_truncated"
	// KindOutputRefused: the LLM refused, or its output was filtered.
	KindOutputRefused Kind = "output_refused"
	// KindToolError: an MCP isError, a tool timeout, or an A2A transport failure after its
	// own retries.
	KindToolError Kind = "tool_error"
	// KindNoProgress: a turn that neither calls a tool nor answers while tool work is
	// pending, or a stall (no tool call succeeded for several turns).
	KindNoProgress Kind = "no_progress"
	// KindLoopDetected: the same (tool, arguments) or (tool, error) repeated past the hard
	// threshold.
	KindLoopDetected Kind = "loop_detected"
	// KindCapabilityGap: no agent or tool can serve; an unsupported operation or content
	// type.
	KindCapabilityGap Kind = "capability_gap"
	// KindPolicyViolation: a denied agent or tool, a rate limit, a budget.
	KindPolicyViolation Kind = "policy_violation"
	// KindContextOverflow: the model refused the request as longer than its context window.
	KindContextOverflow Kind = "context_overflow"
	// KindAmbiguousInput: the request is underspecified.
	KindAmbiguousInput Kind = "ambiguous_input"
	// KindIterationLimit: limits.max_iterations was reached.
	KindIterationLimit Kind = "iteration_limit"
	// KindTimeLimit: limits.max_run_seconds was reached.
	KindTimeLimit Kind = "time_limit"
)

// Kinds returns the closed set of kinds, in the order of DESIGN §6.
func Kinds() []Kind {
	return []Kind{
		KindTransientProvider, KindOutputTruncated, KindOutputRefused, KindToolError,
		KindNoProgress, KindLoopDetected, KindCapabilityGap, KindPolicyViolation,
		KindContextOverflow, KindAmbiguousInput, KindIterationLimit, KindTimeLimit,
	}
}

// Valid reports whether k belongs to the closed set.
func (k Kind) Valid() bool {
	for _, v := range Kinds() {
		if k == v {
			return true
		}
	}
	return false
}

// Action is what the policy does about a failure.
type Action string

// The actions of DESIGN §6.
const (
	// ActionRetry: quietly, with backoff where the kind waits (the model is called again,
	// or reads the retry signal it was given).
	ActionRetry Action = "retry"
	// ActionNarrowScope: a one-shot corrective instruction in the next LLM call.
	ActionNarrowScope Action = "narrow_scope"
	// ActionAskUser: an AG-UI interrupt asking the user whether (and how) to continue.
	ActionAskUser Action = "ask_user"
	// ActionHandoff: terminal; rationale, blockers and next steps for the user.
	ActionHandoff Action = "handoff"
	// ActionStop: terminal; a partial summary.
	ActionStop Action = "stop"
)

// Terminal reports whether the action ends the run (ask_user ends it with an interrupt).
func (a Action) Terminal() bool {
	return a == ActionAskUser || a == ActionHandoff || a == ActionStop
}

// severity orders actions for MostSevere: a run that meets several failures in one step
// follows the most severe decision.
func (a Action) severity() int {
	switch a {
	case ActionRetry:
		return 1
	case ActionNarrowScope:
		return 2
	case ActionAskUser:
		return 3
	case ActionHandoff:
		return 4
	case ActionStop:
		return 5
	}
	return 0
}

// Failure is one classified failure.
type Failure struct {
	Kind Kind
	// Explanation is safe to show to the user (and to the model): no internal detail, no
	// text from outside.
	Explanation string
	// Tool is the tool name the failure concerns ("" for model failures and limits).
	Tool string
	// Code is the tag or retry code that revealed a tool failure ("RETRY:tool_error",
	// "ERROR", "TIMEOUT", "UNREACHABLE", "RETRY:policy_deny"…): Baton's own vocabulary,
	// used for lessons and loop signatures.
	Code string
	// RetryAfter is the wait the provider asked for (transient_provider), 0 if none.
	RetryAfter time.Duration
	// Err is the underlying error, for logs only.
	Err error
}

// Error implements error with the user-safe parts.
func (f *Failure) Error() string { return string(f.Kind) + ": " + f.Explanation }

// Unwrap returns the underlying error.
func (f *Failure) Unwrap() error { return f.Err }

// ClassifyModelError classifies an error of an LLM turn. Transient provider errors (429,
// 5xx, network, a stream cut short) are transient_provider, with the provider's
// Retry-After. It returns nil for a cancellation (not a failure: the run was cancelled)
// and for errors no retry or change of approach can fix: bad_request and auth mean the
// coordinator's configuration or request is wrong, so the run ends with RUN_ERROR and a
// user-facing message (the engine's userMessage), not with a handled failure.
func ClassifyModelError(err error) *Failure {
	if err == nil || errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return nil
	}
	var le *llm.Error
	if errors.As(err, &le) {
		if le.Kind == llm.ErrContextOverflow {
			return contextOverflow(err)
		}
		if !le.Transient() {
			return nil
		}
		f := &Failure{Kind: KindTransientProvider, RetryAfter: le.RetryAfter, Err: err}
		switch le.Kind {
		case llm.ErrRateLimited:
			f.Explanation = "The language model is rate limiting requests."
		case llm.ErrServer:
			f.Explanation = "The language model had a server error."
		case llm.ErrTimeout:
			f.Explanation = "The language model did not answer in time."
		default:
			f.Explanation = "The language model could not be reached."
		}
		return f
	}
	if errors.Is(err, llm.ErrNoCompletion) {
		return &Failure{Kind: KindTransientProvider, Explanation: "The language model's reply ended before it was complete.", Err: err}
	}
	return nil
}

// classifyCompletion classifies how a successful LLM turn ended: a refusal or a content
// filter is output_refused; finish_reason=length is output_truncated; anything else is
// nil.
func classifyCompletion(c *llm.Completion) *Failure {
	if c == nil {
		return nil
	}
	switch {
	case c.Refusal != "" || c.FinishReason == llm.FinishContentFilter:
		return &Failure{Kind: KindOutputRefused, Explanation: "The language model declined to answer this request."}
	case c.FinishReason == llm.FinishLength:
		return &Failure{Kind: KindOutputTruncated, Explanation: "The language model's reply was cut off at its output length limit."}
	}
	return nil
}

// Decision is what a Policy decided about one failure.
type Decision struct {
	Kind   Kind
	Tool   string
	Action Action
	// Wait is how long to wait before retrying (transient_provider); for a handoff
	// because the provider asked for a longer wait than the cap, the wait it asked for.
	Wait time.Duration
	// Attempt counts the failures of this kind (and tool, for tool_error) that the policy
	// has seen in the run, this one included; for narrow_scope and its escalation, the
	// strike.
	Attempt int
	// Explanation is for the user: the failure and what happens next.
	Explanation string
}

// MostSevere returns the most severe of ds (handoff over ask_user over narrow_scope over
// retry; the first of equals), and false when ds is empty. When one step meets several
// failures, each gets its baton.failure event and the run follows the most severe.
func MostSevere(ds []Decision) (Decision, bool) {
	if len(ds) == 0 {
		return Decision{}, false
	}
	best := ds[0]
	for _, d := range ds[1:] {
		if d.Action.severity() > best.Action.severity() {
			best = d
		}
	}
	return best, true
}

// toolLabel renders a tool name for an explanation. Names reach failures from the model
// (a call to an unknown tool), so they are sanitised like tool names and quoted.
func toolLabel(tool string) string {
	if tool == "" {
		return "the tool"
	}
	return fmt.Sprintf("the tool %q", toolname.Sanitize(tool))
}
