package coordinator

import (
	"fmt"

	"github.com/baton-dev/baton/bridge"
	"github.com/baton-dev/baton/durable"
	"github.com/baton-dev/baton/llm"
)

// resumeAction is what a run taken over does with a call of its last turn.
type resumeAction int

const (
	// resumeResult: the call's result was recorded; it is used as it is.
	resumeResult resumeAction = iota
	// resumeFollow: an A2A task whose id was recorded: followed by id, never sent again.
	resumeFollow
	// resumeReissue: a call that may be made again: an idempotent or read-only MCP
	// tool, or one without effects outside the run (ask_user, a frontend tool, a call
	// that was refused or needs approval and so was never sent).
	resumeReissue
	// resumeInDoubt: a call that may or may not have run: the model is told so.
	resumeInDoubt
)

func (a resumeAction) String() string {
	return [...]string{"result", "follow", "reissue", "in_doubt"}[a]
}

// resumeDecision decides what a run taken over does with call c of its last turn, from
// what the work document recorded; needsApproval: the call needs the user's approval
// (approvals), so the turn only asked for it.
func resumeDecision(t *toolset, c llm.ToolCall, w *durable.Work, needsApproval bool) (resumeAction, *durable.Task) {
	if _, ok := w.Results[c.ID]; ok {
		return resumeResult, nil
	}
	if t.isFrontend(c.Name) || needsApproval {
		// Never sent by the turn: a frontend call is the application's, and a call that
		// needs approval only raised its question.
		return resumeReissue, nil
	}
	if _, ok := t.agents[c.Name]; ok {
		for i := range w.A2A {
			if task := &w.A2A[i]; task.ToolCallID == c.ID && task.Agent == c.Name {
				return resumeFollow, task
			}
		}
		// The agent had not named its task when the replica died (or the record was not
		// written yet): the message may have reached it.
		return resumeInDoubt, nil
	}
	if mt, ok := t.mcp[c.Name]; ok {
		if mt.Idempotent {
			return resumeReissue, nil
		}
		return resumeInDoubt, nil
	}
	// ask_user, an unknown tool, or a tool of a server that is gone: nothing was sent.
	return resumeReissue, nil
}

// inDoubtText is the result of a call that may or may not have run before the replica
// that made it died.
func inDoubtText(tool string) string {
	return bridge.Error(fmt.Sprintf("The coordinator running this conversation stopped while the call to %s was in progress, "+
		"so it may or may not have run. Do not assume either: check its effect (or ask the user) before calling it again.", tool))
}
