package a2aserver

import (
	"encoding/json"
	"strings"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/a2aproject/a2a-go/v2/a2asrv"

	"github.com/baton-dev/baton/agui"
)

// Names of Baton's CUSTOM events that decide a task's terminal state (the engine's
// baton.failure and baton.handoff, DESIGN §8).
const (
	eventFailure = "baton.failure"
	eventHandoff = "baton.handoff"
	// kindPolicy is the failure kind of a refusal by policy: a handoff after it rejects
	// the task rather than failing it.
	kindPolicy = "policy_violation"
)

// relay turns one run's AG-UI events into A2A events.
type relay struct {
	ec   *a2asrv.ExecutorContext
	lt   *liveTask
	open []Question // the questions a resume answered, asked again after a bad answer
	// signIns: questions that only wait for sign-ins put the task in auth-required.
	signIns bool

	// answer is the artifact that carries the run's own text (not its sub-agents').
	answer a2a.ArtifactID
	// pending is the run's text not sent yet: text deltas are coalesced into appended
	// artifact chunks (flush), since a2a-go copies the whole task for every artifact event.
	pending  strings.Builder
	messages map[string]bool // top-level assistant messages
	sep      bool            // a message ended: the next one starts on a new paragraph

	lastKind string   // the last baton.failure kind
	handoff  *handoff // the run ended on a handoff

	// ended: the terminal event was seen; final is the terminal A2A event (nil when
	// CancelTask reports it).
	ended bool
	final a2a.Event
	// asked are the questions of an auth-required end.
	asked []Question
	// stopped: the run was stopped, not by a CancelTask here (a stop on another replica,
	// or on the AG-UI side); awaitDownstream, when set, then names the downstream cancels that were
	// not confirmed, for the task's status message (as Cancel's).
	stopped         bool
	awaitDownstream func(Run) string
	// usage is what the run used so far (budget.go), reported with its final status.
	usage *runUsage
}

type handoff struct {
	Rationale string   `json:"rationale"`
	Blockers  []string `json:"blockers"`
	NextSteps []string `json:"next_steps"`
}

// text renders a handoff as the failed task's explanation.
func (h handoff) text() string {
	var b strings.Builder
	b.WriteString(h.Rationale)
	if len(h.Blockers) > 0 {
		b.WriteString("\nWhat blocks it: " + strings.Join(h.Blockers, "; "))
	}
	if len(h.NextSteps) > 0 {
		b.WriteString("\nWhat can be done: " + strings.Join(h.NextSteps, "; "))
	}
	return b.String()
}

// event maps one AG-UI event to the A2A events to send (often none).
func (r *relay) event(ev agui.Event) []a2a.Event {
	switch e := ev.(type) {
	case *agui.TextMessageStart:
		if e.SubagentRunID == "" && (e.Role == "" || e.Role == "assistant") {
			if r.messages == nil {
				r.messages = map[string]bool{}
			}
			r.messages[e.MessageID] = true
		}
	case *agui.TextMessageEnd:
		if r.messages[e.MessageID] {
			r.sep = r.answer != ""
		}
	case *agui.TextMessageContent:
		if !r.messages[e.MessageID] || e.Delta == "" {
			return nil
		}
		if r.sep {
			r.pending.WriteString("\n\n")
			r.sep = false
		}
		r.pending.WriteString(e.Delta)
		return nil
	case *agui.Custom:
		switch e.Name {
		case eventFailure:
			var v struct {
				Kind string `json:"kind"`
			}
			if remarshal(e.Value, &v) {
				r.lastKind = v.Kind
			}
		case eventHandoff:
			var h handoff
			if remarshal(e.Value, &h) {
				r.handoff = &h
			}
		case eventBudgetWarning:
			if ev := budgetWarningStatus(r.ec, e.Value); ev != nil {
				return []a2a.Event{ev}
			}
		case eventUsage:
			r.noteUsage(e.Value)
		}
	case *agui.RunFinished:
		r.ended = true
		r.finish(e)
		r.reportUsage()
	case *agui.RunError:
		r.ended = true
		r.fail(e)
		r.reportUsage()
	}
	return nil
}

// Coalescing of the answer's text (DESIGN §9c): at most one artifact update per
// chunkEvery or per chunkBytes of text, and every update before a status change.
const (
	chunkEvery = 50 * time.Millisecond
	chunkBytes = 16 << 10
)

// flush returns the text not sent yet as one artifact event: the answer's first chunk
// (a new artifact) or an appended one; nil when there is none.
func (r *relay) flush() *a2a.TaskArtifactUpdateEvent {
	if r.pending.Len() == 0 {
		return nil
	}
	text := r.pending.String()
	r.pending.Reset()
	if r.answer == "" {
		a := a2a.NewArtifactEvent(r.ec, a2a.NewTextPart(text))
		// One answer per run, named after it: a replica that reads the task back from
		// the event log (follow.go) names it the same.
		a.Artifact.ID, a.Artifact.Name = a2a.ArtifactID("answer-"+r.lt.runID), "answer"
		r.answer = a.Artifact.ID
		return a
	}
	return a2a.NewArtifactUpdateEvent(r.ec, r.answer, a2a.NewTextPart(text))
}

// finish decides the terminal event of a run that finished.
func (r *relay) finish(e *agui.RunFinished) {
	out := e.Outcome
	switch {
	case out != nil && out.Type == "interrupt":
		qs := make([]Question, 0, len(out.Interrupts))
		for _, in := range out.Interrupts {
			qs = append(qs, questionFrom(in))
		}
		state := a2a.TaskStateInputRequired
		if r.signIns && onlySignIns(qs) {
			state = a2a.TaskStateAuthRequired
			r.asked = qs
		}
		r.final = askIn(state, r.ec, r.lt.threadID, r.lt.runID, qs, "")
	case out != nil && out.Type == "cancelled":
		if r.lt.canceling.Load() {
			return // Cancel sets the state once the downstream cancels are settled
		}
		r.final = status(r.ec, a2a.TaskStateCanceled, "The run was stopped.")
		r.stopped = true
	case r.handoff != nil:
		state := a2a.TaskStateFailed
		if r.lastKind == kindPolicy {
			state = a2a.TaskStateRejected
		}
		r.final = status(r.ec, state, r.handoff.text())
	default:
		r.final = status(r.ec, a2a.TaskStateCompleted, "")
	}
}

// fail decides the terminal event of a run that ended with RUN_ERROR.
func (r *relay) fail(e *agui.RunError) {
	msg := e.Message
	if msg == "" {
		msg = "The run failed."
	}
	switch e.Code {
	case "INVALID_RESUME":
		// The answer did not fit: the questions stay open.
		r.final = askAgain(r.ec, r.open, msg)
	case "CANCELLED":
		if r.lt.canceling.Load() {
			return
		}
		r.final = status(r.ec, a2a.TaskStateCanceled, msg)
		r.stopped = true
	default:
		r.final = status(r.ec, a2a.TaskStateFailed, msg)
	}
}

// status is a terminal status update with an optional explanation; it clears the open
// questions.
func status(ec *a2asrv.ExecutorContext, state a2a.TaskState, text string) *a2a.TaskStatusUpdateEvent {
	var m *a2a.Message
	if text != "" {
		m = a2a.NewMessageForTask(a2a.MessageRoleAgent, ec, a2a.NewTextPart(text))
	}
	ev := a2a.NewStatusUpdateEvent(ec, state, m)
	ev.Metadata = map[string]any{metaKey: map[string]any{metaInterrupts: []any{}}}
	return ev
}

// remarshal copies v into out through JSON: the engine's event values are its own types.
func remarshal(v any, out any) bool {
	b, err := json.Marshal(v)
	return err == nil && json.Unmarshal(b, out) == nil
}
