package coordinator

import (
	"encoding/json"
	"fmt"
	"time"

	"github.com/baton-dev/baton/agui"
	"github.com/baton-dev/baton/bridge"
	"github.com/baton-dev/baton/durable"
	"github.com/baton-dev/baton/llm"
)

// checkpointVersion is the version of the checkpoint document; a replica refuses (and
// ends) a run whose checkpoint it does not know.
const checkpointVersion = 1

// checkpoint is what a replica needs to continue a run (durable.Work.Checkpoint).
type checkpoint struct {
	V     int    `json:"v"`
	Owner string `json:"owner,omitempty"`
	// Input is the run's input; its messages are left out once Conv holds the history.
	Input json.RawMessage `json:"input"`
	// Prepended says that Input's messages are only those of the client's messages that
	// the thread does not keep (without an id): the engine prepended the thread's stored
	// history to them, and the run's start saved the others to the thread, which a
	// replica taking the run over before Conv is set reads again rather than a copy here
	// (a copy of the whole conversation per run, written at every start).
	Prepended bool `json:"prepended,omitempty"`
	// Conv is the model history after the last completed turn; absent until the run's
	// setup is done (the run then starts over from its input).
	Conv json.RawMessage `json:"conv,omitempty"`
	// State is the failure state (counters, lessons, loop signatures, budget use, active
	// time) when the checkpoint was taken.
	State json.RawMessage `json:"state,omitempty"`
	// Seq is the event log's last number when the checkpoint was taken (informative: the
	// replica continues after the log's actual end).
	Seq int64 `json:"seq"`
	// Depth is the run's nesting depth (nesting.go), which its input does not carry.
	Depth int `json:"depth,omitempty"`
	// Budget is what is left, past State's budget use, of the budget the run's caller gave
	// it (spend_tree.go), which its input does not carry either.
	Budget *agui.CallerBudget `json:"budget,omitempty"`
}

// noteCheckpoint records a checkpoint of the run with conv (nil before setup), replacing
// the previous one and the results of its calls.
func (d *durability) noteCheckpoint(conv []llm.Message) {
	r := d.run
	if doc := r.dur.checkpointDoc(conv); doc != nil {
		r.elog.NoteCheckpoint(doc)
	}
}

// checkpointDoc encodes a checkpoint of the run with conv (nil before setup); nil when the
// input cannot be encoded (the run then cannot be taken over).
func (d *durability) checkpointDoc(conv []llm.Message) json.RawMessage {
	r := d.run
	in := *r.in
	cp := checkpoint{V: checkpointVersion, Owner: r.owner, Depth: r.in.Depth, Budget: r.in.Budget}
	if conv == nil && d.prepended > 0 && d.prepended <= len(in.Messages) {
		// The run's start saves the client's messages that have an id to the thread too:
		// only those without one are kept here.
		var own []agui.Message
		for _, m := range in.Messages[d.prepended:] {
			if m.ID == "" {
				own = append(own, m)
			}
		}
		in.Messages = own
		cp.Prepended = true
	}
	if conv != nil {
		in.Messages = nil
		cp.Conv = mustJSON(conv)
		fs := r.fs
		fs.Active += time.Since(r.start)
		cp.State = mustJSON(&fs)
		cp.Budget = callerLeft(r, fs.Budget)
	}
	b, err := json.Marshal(&in)
	if err != nil {
		r.log.Warn("checkpoint: input not encodable; the run cannot be taken over", "err", err)
		return nil
	}
	cp.Input = b
	return mustJSON(&cp)
}

// noteResult records the result of one of the current turn's tool calls.
func (d *durability) noteResult(toolCallID string, o toolOutcome) {
	r := d.run
	if len(o.interrupts) > 0 || toolCallID == "" {
		return
	}
	r.elog.NoteResult(toolCallID, o.ToolResult)
}

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
