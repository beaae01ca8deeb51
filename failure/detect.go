package failure

import (
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

// TurnState is the run's progress as DetectBeforeTurn sees it (see State.TurnState).
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
		return &Failure{Kind: KindTimeLimit, Explanation: fmt.Sprintf("The run reached its time limit of %s.", RoundWait(lim.MaxRunTime))}
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
// or a text-only turn while tool work is pending (pending; see PendingWork). A text-only
// turn with text is otherwise the answer, not a failure.
func DetectTurn(msg llm.Message, c *llm.Completion, pending bool) *Failure {
	if f := classifyCompletion(c); f != nil {
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

// DetectToolResult classifies a tool's typed result (never its text):
//   - [RETRY:tool_error], [RETRY:action_timeout], [ERROR], [UNREACHABLE], [TIMEOUT:…]:
//     tool_error;
//   - a result the protocol classified as a capability gap (Gap), [RETRY:capability…]:
//     capability_gap;
//   - [RETRY:policy_deny|rate_exceeded|budget_exceeded] (Guard refusals): policy_violation;
//   - anything else, including the model-fixable retry signals (validation_failed,
//     unknown_action, invalid_transition) and the A2A outcomes the model acts on
//     ([FAILED], [REJECTED], [CANCELED], [INPUT_REQUIRED…]): nil.
func DetectToolResult(tool string, res ToolResult) *Failure {
	if res.Tag == "" {
		return nil
	}
	label := toolLabel(tool)
	f := &Failure{Tool: tool, Code: res.Tag}
	switch {
	case res.Gap:
		f.Kind, f.Explanation = KindCapabilityGap, capitalise(label)+" cannot handle this kind of request."
	case res.Tag == bridge.TagRetry:
		f.Code = res.Tag + ":" + res.Code
		switch {
		case res.Code == "tool_error":
			f.Kind, f.Explanation = KindToolError, capitalise(label)+" reported an error."
		case res.Code == "action_timeout":
			f.Kind, f.Explanation = KindToolError, capitalise(label)+" did not answer in time."
		case strings.HasPrefix(res.Code, "capability"):
			f.Kind, f.Explanation = KindCapabilityGap, capitalise(label)+" cannot handle this kind of request."
		case res.Code == "policy_deny" || res.Code == "rate_exceeded" || res.Code == "budget_exceeded":
			f.Kind = KindPolicyViolation
			// The message of a Guard refusal is Baton's own text.
			f.Explanation = res.Message
			if f.Explanation == "" {
				f.Explanation = "The coordinator's policy does not allow this call."
			}
		default:
			return nil
		}
	case res.Tag == bridge.TagError:
		f.Kind, f.Explanation = KindToolError, capitalise(label)+" failed."
	case res.Tag == bridge.TagUnreachable:
		f.Kind, f.Explanation = KindToolError, capitalise(label)+" could not be reached."
	case res.Tag == bridge.TagTimeout:
		f.Kind, f.Explanation = KindToolError, capitalise(label)+" did not finish in time and was cancelled."
	default:
		return nil
	}
	return f
}

// DetectAgentQuestion classifies a sub-agent that stopped its task to ask for more input
// (A2A input-required, raised to the user): the agent says the request is underspecified,
// ambiguous_input. It reads the protocol's typed state, never the agent's text. The
// agent's own question is the ask_user action, so the caller reports the failure (event,
// lesson, metric) and raises that question rather than a "continue?" interrupt.
func DetectAgentQuestion(tool string) *Failure {
	return &Failure{Kind: KindAmbiguousInput, Tool: tool, Code: "input_required",
		Explanation: capitalise(toolLabel(tool)) + " needs more detail from the user."}
}

// PendingWork reports whether the tool work of a round is still pending once the round is
// over: every call got a model-fixable retry signal (validation_failed, unknown_action,
// invalid_transition), so nothing the model asked for ran and it was told how to ask
// again. A text-only reply to such a round is no_progress (DESIGN §6, text_only). A round
// with any other result is not pending: a success, a tool error the model may report, and
// above all a question ([INPUT_REQUIRED…], which the model relays to the user as text in
// model mode) all make text a fair reply.
func PendingWork(results []ToolResult) bool {
	if len(results) == 0 {
		return false
	}
	for _, r := range results {
		if !modelFixable(r) {
			return false
		}
	}
	return true
}

// modelFixable reports whether res is a retry signal for a call that was never run
// because the model can fix it.
func modelFixable(res ToolResult) bool {
	if res.Tag != bridge.TagRetry {
		return false
	}
	switch res.Code {
	case "validation_failed", "unknown_action", "invalid_transition":
		return true
	}
	return false
}

// IsProgress reports whether a tool result moved the work forward: a success, a question
// for the user, or the user's answer.
func IsProgress(res ToolResult) bool {
	switch res.Tag {
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
