package coordinator

import (
	"fmt"
	"strings"

	"github.com/baton-dev/baton/agui"
	"github.com/baton-dev/baton/failure"
)

// Terminal outcomes on the AG-UI stream (DESIGN §8): a baton.failure event for every
// handled failure, and for a run that ends on a failure a final assistant message with
// baton.handoff or baton.partial, or an interrupt asking the user whether to continue.

// Names of Baton's CUSTOM events.
const (
	EventFailure = "baton.failure"
	EventHandoff = "baton.handoff"
	EventPartial = "baton.partial"
)

// FailureValue is the value of a baton.failure event.
type FailureValue struct {
	Kind        failure.Kind   `json:"kind"`
	Action      failure.Action `json:"action"`
	Explanation string         `json:"explanation"`
	Attempt     int            `json:"attempt"`
}

// FailureEvent is CUSTOM{name:"baton.failure", value:{kind, action, explanation, attempt}}.
func FailureEvent(d failure.Decision) *agui.Custom {
	return &agui.Custom{Name: EventFailure, Value: FailureValue{Kind: d.Kind, Action: d.Action, Explanation: d.Explanation, Attempt: d.Attempt}}
}

// Handoff is the value of baton.handoff and baton.partial. Slices are never nil, so that
// no field is sent as null.
type Handoff struct {
	Rationale string   `json:"rationale"`
	Blockers  []string `json:"blockers"`
	NextSteps []string `json:"next_steps"`
}

// HandoffFor describes, for the user, a run that ends on decision d.
func HandoffFor(d failure.Decision) Handoff {
	tool := ToolName(d.Tool)
	h := Handoff{Rationale: d.Explanation, Blockers: []string{}, NextSteps: []string{}}
	add := func(blocker string, next ...string) {
		h.Blockers = append(h.Blockers, blocker)
		h.NextSteps = append(h.NextSteps, next...)
	}
	switch d.Kind {
	case failure.KindTransientProvider:
		if d.Wait > 0 {
			add(fmt.Sprintf("the language model provider asked to wait %s", failure.RoundWait(d.Wait)), fmt.Sprintf("try again in %s", failure.RoundWait(d.Wait)))
		} else {
			add("the language model provider is unavailable", "try again in a few minutes")
		}
	case failure.KindOutputTruncated:
		add("the language model's replies keep getting cut off", "ask for a shorter answer, or split the request into smaller parts")
	case failure.KindOutputRefused:
		add("the language model declined the request", "rephrase the request")
	case failure.KindToolError:
		add(fmt.Sprintf("the tool %q keeps failing", tool), "try again later", fmt.Sprintf("ask an operator to check the tool %q", tool))
	case failure.KindNoProgress:
		add("the work was not making progress", "ask again with a narrower, more specific request")
	case failure.KindLoopDetected:
		add("the same step kept repeating", "say whether to continue", "ask again with more detail")
	case failure.KindCapabilityGap:
		add(fmt.Sprintf("no available agent or tool can handle this (%s)", orUnknown(tool)), "ask an operator to add an agent or tool that can do this")
	case failure.KindPolicyViolation:
		add(fmt.Sprintf("the coordinator's policy does not allow this (%s)", orUnknown(tool)), "ask an operator to review the coordinator's policy")
	case failure.KindAmbiguousInput:
		add("the request is underspecified", "say more precisely what you need")
	case failure.KindIterationLimit:
		add("the step limit was reached", "continue the run", "ask again with a narrower request", "raise limits.max_iterations")
	case failure.KindTimeLimit:
		add("the time limit was reached", "continue the run", "ask again with a narrower request", "raise limits.max_run_seconds")
	default:
		add("an unexpected failure", "try again")
	}
	return h
}

func orUnknown(tool string) string {
	if tool == "" {
		return "unknown tool"
	}
	return tool
}

// Text renders h as the final assistant message.
func (h Handoff) Text() string {
	var b strings.Builder
	b.WriteString(h.Rationale)
	list := func(title string, items []string) {
		if len(items) == 0 {
			return
		}
		b.WriteString("\n\n")
		b.WriteString(title)
		for _, it := range items {
			b.WriteString("\n- ")
			b.WriteString(it)
		}
	}
	list("What blocks me:", h.Blockers)
	list("What you can do:", h.NextSteps)
	return b.String()
}

// TerminalEvents are the events that end a run on a handoff (name EventHandoff) or a
// partial stop (EventPartial), before RUN_FINISHED: the final assistant message with id
// messageID, then CUSTOM{name, value: h}. Emit them, then finish the run with the success
// outcome and RunResult.
func TerminalEvents(name string, h Handoff, messageID string) []agui.Event {
	if h.Blockers == nil {
		h.Blockers = []string{}
	}
	if h.NextSteps == nil {
		h.NextSteps = []string{}
	}
	return []agui.Event{
		&agui.TextMessageStart{MessageID: messageID, Role: "assistant"},
		&agui.TextMessageContent{MessageID: messageID, Delta: h.Text()},
		&agui.TextMessageEnd{MessageID: messageID},
		&agui.Custom{Name: name, Value: h},
	}
}

// TerminalName is the CUSTOM event that ends a run on action a: baton.partial for stop
// (and for ask_user while the run cannot raise interrupts), baton.handoff otherwise.
func TerminalName(a failure.Action) string {
	if a == failure.ActionHandoff {
		return EventHandoff
	}
	return EventPartial
}

// RunResult is the RUN_FINISHED result of a run that ended on decision d.
func RunResult(d failure.Decision) map[string]any {
	return map[string]any{"stopped": string(d.Kind), "action": string(d.Action)}
}

// ContinueQuestion is the question of the interrupt that an ask_user decision raises
// (loop_detected, limits): hitl.Continue(opts, ContinueQuestion(d), string(d.Kind)). On a
// resume that continues, call failure.State.Resume(d.Kind).
func ContinueQuestion(d failure.Decision) string {
	return d.Explanation + " Continue?"
}
