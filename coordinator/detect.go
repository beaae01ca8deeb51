package coordinator

import (
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/baton-dev/baton/bridge"
	"github.com/baton-dev/baton/llm"
)

// Detectors. Each is pure and returns a *Failure or nil. They run at three points of the
// loop: before each LLM call (DetectBeforeTurn), after each LLM response (DetectTurn,
// plus LoopDetector.Predict per tool call), and after each tool result (DetectToolResult,
// plus LoopDetector.ObserveResult).

// TurnLimits are the limits checked before each LLM call.
type TurnLimits struct {
	// MaxIterations bounds the LLM calls of one allowance (limits.max_iterations).
	MaxIterations int
	// MaxRunTime bounds the active time of one allowance (limits.max_run_seconds).
	MaxRunTime time.Duration
	// StallRounds is the number of consecutive tool rounds without progress that count as
	// a stall (loop.stall_turns); 0 turns stall detection off.
	StallRounds int
}

// TurnState is the run's progress as DetectBeforeTurn sees it (see FailureState.TurnState).
type TurnState struct {
	// Iterations is the number of LLM calls already made in this allowance.
	Iterations int
	// Elapsed is the active time spent in this allowance.
	Elapsed time.Duration
	// RoundsWithoutProgress counts consecutive tool rounds in which no call succeeded.
	RoundsWithoutProgress int
}

// DetectBeforeTurn checks, before an LLM call, the time limit, then the iteration limit,
// then a stall.
func DetectBeforeTurn(lim TurnLimits, s TurnState) *Failure {
	switch {
	case lim.MaxRunTime > 0 && s.Elapsed >= lim.MaxRunTime:
		return &Failure{Kind: KindTimeLimit, Explanation: fmt.Sprintf("The run reached its time limit of %s.", roundWait(lim.MaxRunTime))}
	case lim.MaxIterations > 0 && s.Iterations >= lim.MaxIterations:
		return &Failure{Kind: KindIterationLimit, Explanation: fmt.Sprintf("The run reached its limit of %d steps without finishing.", lim.MaxIterations)}
	case lim.StallRounds > 0 && s.RoundsWithoutProgress >= lim.StallRounds:
		return &Failure{Kind: KindNoProgress, Code: "stall", Explanation: fmt.Sprintf("No tool call has succeeded in the last %d steps.", s.RoundsWithoutProgress)}
	}
	return nil
}

// DetectTurn checks an LLM turn once it has been received: a refusal or content filter
// (output_refused), a truncation (output_truncated), and a turn that makes no progress
// (no_progress): no tool call and no text, a turn that ended for tool calls without any,
// or a text-only turn while the engine knows tool work is pending (pending). A text-only
// turn with text is otherwise the answer, not a failure.
func DetectTurn(msg llm.Message, c *llm.Completion, pending bool) *Failure {
	if f := ClassifyCompletion(c); f != nil {
		return f
	}
	if len(msg.ToolCalls) > 0 {
		return nil
	}
	switch {
	case strings.TrimSpace(msg.Content) == "":
		return &Failure{Kind: KindNoProgress, Code: "empty_turn", Explanation: "The language model replied with neither an answer nor a tool call."}
	case c != nil && c.FinishReason == llm.FinishToolCalls:
		return &Failure{Kind: KindNoProgress, Code: "missing_tool_call", Explanation: "The language model announced a tool call but made none."}
	case pending:
		return &Failure{Kind: KindNoProgress, Code: "text_only", Explanation: "The language model replied with text while tool work was still pending."}
	}
	return nil
}

// DetectToolResult classifies a tool result (the tagged string the model reads):
//   - [RETRY:tool_error], [RETRY:action_timeout], [ERROR], [UNREACHABLE], [TIMEOUT:…]:
//     tool_error;
//   - [FAILED] that Baton wrote for a capability gap, [RETRY:capability…]: capability_gap;
//   - [RETRY:policy_deny|rate_exceeded|budget_exceeded] (Guard refusals): policy_violation;
//   - anything else, including the model-fixable retry signals (validation_failed,
//     unknown_action, invalid_transition) and the A2A outcomes the model acts on
//     ([FAILED], [REJECTED], [CANCELED], [INPUT_REQUIRED…]): nil.
func DetectToolResult(tool, result string) *Failure {
	tag, arg, ok := bridge.ParseTag(result)
	if !ok {
		return nil
	}
	label := toolLabel(tool)
	f := &Failure{Tool: tool, Code: tag}
	switch tag {
	case bridge.TagRetry:
		f.Code = tag + ":" + arg
		switch {
		case arg == "tool_error":
			f.Kind, f.Explanation = KindToolError, capitalise(label)+" reported an error."
		case arg == "action_timeout":
			f.Kind, f.Explanation = KindToolError, capitalise(label)+" did not answer in time."
		case strings.HasPrefix(arg, "capability"):
			f.Kind, f.Explanation = KindCapabilityGap, capitalise(label)+" cannot handle this kind of request."
		case arg == "policy_deny" || arg == "rate_exceeded" || arg == "budget_exceeded":
			f.Kind = KindPolicyViolation
			// The message of a Guard refusal is Baton's own text.
			f.Explanation = signalMessage(result)
			if f.Explanation == "" {
				f.Explanation = "The coordinator's policy does not allow this call."
			}
		default:
			return nil
		}
	case bridge.TagError:
		f.Kind, f.Explanation = KindToolError, capitalise(label)+" failed."
	case bridge.TagUnreachable:
		f.Kind, f.Explanation = KindToolError, capitalise(label)+" could not be reached."
	case bridge.TagTimeout:
		f.Kind, f.Explanation = KindToolError, capitalise(label)+" did not finish in time and was cancelled."
	case bridge.TagFailed:
		if !isCapabilityGap(result) {
			return nil
		}
		f.Kind, f.Explanation = KindCapabilityGap, capitalise(label)+" cannot handle this kind of request."
	default:
		return nil
	}
	return f
}

// isCapabilityGap recognises the [FAILED] result that bridge.FromA2AError writes for a
// capability gap: its first body line is Baton's sentence.
func isCapabilityGap(result string) bool {
	_, body, _ := strings.Cut(result, "\n")
	first, _, _ := strings.Cut(body, "\n")
	return strings.HasPrefix(first, "agent ") && strings.Contains(first, "cannot handle this request (capability gap:")
}

// signalMessage returns the "message" of a retry signal's JSON, "" when absent.
func signalMessage(result string) string {
	line, _, _ := strings.Cut(result, "\n")
	_, raw, ok := strings.Cut(line, "] ")
	if !ok {
		return ""
	}
	var s struct {
		Message string `json:"message"`
	}
	if json.Unmarshal([]byte(raw), &s) != nil {
		return ""
	}
	return s.Message
}

// IsProgress reports whether a tool result moved the work forward: a success, a question
// for the user, or the user's answer.
func IsProgress(result string) bool {
	tag, _, ok := bridge.ParseTag(result)
	if !ok {
		return false
	}
	switch tag {
	case bridge.TagOK, bridge.TagCompleted, bridge.TagInputRequired, bridge.TagAuthRequired, bridge.TagAnswered, bridge.TagDeclined:
		return true
	}
	return false
}

func capitalise(s string) string {
	if s == "" || s[0] < 'a' || s[0] > 'z' {
		return s
	}
	return string(s[0]-'a'+'A') + s[1:]
}
