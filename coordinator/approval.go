package coordinator

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"path"
	"slices"
	"strings"
	"time"

	"github.com/baton-dev/baton/bridge"
	"github.com/baton-dev/baton/dispatch"
	"github.com/baton-dev/baton/failure"
	"github.com/baton-dev/baton/hitl"
	"github.com/baton-dev/baton/llm"
	"github.com/baton-dev/baton/store"
)

// Approvals (DESIGN §9, design/approvals.md): a call that the config says needs the
// user's approval is not sent; the run ends with a tool_call interrupt, and the resume
// decides. The approval's answer, the start of the approved call and its result are
// written into the suspension before the call is sent and when it returns, so that a
// resume that is repeated, or that comes after a crash, never sends the call twice.

// ApprovalPolicy is the config's approvals section. The zero value asks for nothing.
type ApprovalPolicy struct {
	// Tools are tool names as the model sees them (MCP tools and sub-agents); path.Match
	// patterns.
	Tools []string
	// Agents are sub-agent names; path.Match patterns.
	Agents []string
	// Destructive asks before every MCP tool annotated destructiveHint and not readOnlyHint.
	Destructive bool
}

// States of an approval record (approvalHandle.State).
const (
	approvalAsked   = ""        // waiting for the user
	approvalStarted = "started" // approved; the call is being sent (or was, before a crash)
	approvalDone    = "done"    // Result holds what the model gets
)

// approvalHandle is the handle of an approval interrupt: the call, and what became of it.
type approvalHandle struct {
	Tool string          `json:"tool"`
	Args json.RawMessage `json:"args"`
	// InDoubt marks the second question, after a crash while the call was out.
	InDoubt bool   `json:"inDoubt,omitempty"`
	State   string `json:"state,omitempty"`
	// Approved is the user's answer once given; Sent the arguments the call went out with.
	Approved bool            `json:"approved,omitempty"`
	Sent     json.RawMessage `json:"sent,omitempty"`
	Result   string          `json:"result,omitempty"`
	// ResultTag and ResultCode type the recorded Result (see ToolResult).
	ResultTag  string `json:"resultTag,omitempty"`
	ResultCode string `json:"resultCode,omitempty"`
}

// needsApproval reports whether the call c must be approved by the user before it is sent.
// Calls whose arguments are not a JSON object are not asked about: they are refused with
// validation_failed like any other.
func (p ApprovalPolicy) needsApproval(t *toolset, c llm.ToolCall) bool {
	_, isAgent := t.agents[c.Name]
	mt, isMCP := t.mcp[c.Name]
	if !isAgent && !isMCP {
		return false
	}
	var args map[string]any
	if json.Unmarshal([]byte(c.Arguments), &args) != nil || args == nil {
		return false
	}
	match := func(patterns []string) bool {
		return slices.ContainsFunc(patterns, func(p string) bool {
			ok, _ := path.Match(p, c.Name)
			return ok
		})
	}
	switch {
	case match(p.Tools):
		return true
	case isAgent:
		return match(p.Agents)
	default:
		return p.Destructive && mt.Destructive && !mt.ReadOnly
	}
}

// askApproval builds the approval interrupt of call c: the call is kept in its handle.
func askApproval(r *Run, t *toolset, c llm.ToolCall, inDoubt bool) store.Interrupt {
	args := json.RawMessage(failure.CanonicalArgs(c.Arguments))
	in := hitl.Approval(r.e.hitlOptions(), c.Name, approvalMessage(t, c.Name, args, inDoubt), args, toolSchema(t, c.Name), inDoubt)
	in.ToolCallID = c.ID
	in.Handle = mustJSON(handle{Approval: &approvalHandle{Tool: c.Name, Args: args, InDoubt: inDoubt}})
	return in
}

// approvalMessage names the tool and says what it will do. The description comes from a
// peer (an MCP server, an agent card) and the arguments from the model: both are escaped
// and capped as untrusted text.
func approvalMessage(t *toolset, tool string, args json.RawMessage, inDoubt bool) string {
	var b strings.Builder
	if inDoubt {
		b.WriteString(hitl.InDoubtMessage + "\n")
	}
	fmt.Fprintf(&b, "Approve the call to %s?", bridge.UntrustedN(tool, 64))
	if d := toolDescription(t, tool); d != "" {
		b.WriteString("\nWhat it does: " + bridge.UntrustedN(d, 500))
	}
	b.WriteString("\nArguments: " + bridge.UntrustedN(string(args), 2000))
	return b.String()
}

func toolDescription(t *toolset, tool string) string {
	if a, ok := t.agents[tool]; ok {
		return agentDescription(a)
	}
	if mt, ok := t.mcp[tool]; ok {
		return mt.Description
	}
	return ""
}

// toolSchema is the input schema of a backend tool, the schema of editedArgs.
func toolSchema(t *toolset, tool string) map[string]any {
	if _, ok := t.agents[tool]; ok {
		return agentParams
	}
	if mt, ok := t.mcp[tool]; ok && mt.InputSchema != nil {
		return mt.InputSchema
	}
	return map[string]any{"type": "object"}
}

// declinedRefusal refuses a call the user has declined earlier in this run: the same call
// (tool and arguments) is not asked about again. The refusal is a policy_deny signal, so
// the failure model treats it as a policy_violation.
func declinedRefusal(r *Run, t *toolset, c llm.ToolCall) (bridge.Signal, bool) {
	if !slices.Contains(r.fs.Declined, failure.CallSignature(c.Name, c.Arguments)) {
		return bridge.Signal{}, false
	}
	return bridge.Signal{
		Code: "policy_deny", Requested: c.Name,
		Message:          fmt.Sprintf("The user declined this call of %q earlier in this run; it is not sent again. Do something else, or tell the user what you need.", c.Name),
		ValidNextActions: nextActions(r.guard, t, c.Name),
		Resolution:       &bridge.Resolution{Type: failure.ResolutionHandoff},
	}, true
}

// deliverApproval acts on the user's answer to an approval: the call runs once (with the
// edited arguments when given), or the model is told it was declined.
func deliverApproval(ctx context.Context, r *Run, t *toolset, callID string, in store.Interrupt, ans hitl.Answer) toolOutcome {
	h := decodeHandle(in).Approval
	if h == nil {
		return taggedOutcome(bridge.TagError, bridge.Error("This approval can no longer be answered."))
	}
	approved, _ := ans.Payload["approved"].(bool)
	decision := store.StepEnd{Outcome: "approved"}
	if ans.Cancelled || !approved {
		decision.Outcome = "denied"
	}
	if h.InDoubt {
		decision.Detail = "asked again: the call may have run before the coordinator stopped"
	}
	r.dur.step(store.StepApproval, h.Tool, callID, decision)
	if ans.Cancelled || !approved {
		r.dur.declinedMu.Lock() // answers are delivered in parallel
		r.fs.Declined = append(r.fs.Declined, failure.CallSignature(h.Tool, string(h.Args)))
		r.dur.declinedMu.Unlock()
		reason, _ := ans.Payload["reason"].(string)
		msg := "The user declined this call; it was not sent."
		if h.InDoubt {
			msg = "The user chose not to run this call again. It may or may not have run before the coordinator stopped."
		}
		if strings.TrimSpace(reason) != "" {
			msg += " The user's reason: " + reason
		}
		out := taggedOutcome(bridge.TagDeclined, bridge.Declined(msg))
		if err := recordApproval(ctx, r, in.ID, func(a *approvalHandle) { a.State, a.Result, a.ResultTag = approvalDone, out.Text, out.Tag }); err != nil {
			r.log.Error("record declined approval", "tool", h.Tool, "err", err)
		}
		return out
	}
	args := h.Args
	if edited, ok := ans.Payload["editedArgs"].(map[string]any); ok {
		args = mustJSON(edited)
	}
	return sendApproved(ctx, r, t, callID, in.ID, h.Tool, args)
}

// sendApproved records the start of an approved call, sends it, and records its result.
// Nothing is sent when the start cannot be recorded: a call that nobody remembers having
// sent could be sent again.
func sendApproved(ctx context.Context, r *Run, t *toolset, callID, interruptID, tool string, args json.RawMessage) toolOutcome {
	if err := recordApproval(ctx, r, interruptID, func(a *approvalHandle) {
		a.State, a.Approved, a.Sent = approvalStarted, true, args
	}); err != nil {
		r.log.Error("record approved call", "tool", tool, "err", err)
		return taggedOutcome(bridge.TagError, bridge.Error("The approved call was not sent: the coordinator could not record it first. Ask the user to try again later."))
	}
	r.log.Info("approved call sent", "tool", tool, "tool_call_id", callID)
	// Through the run's chain like any call (fenced, traced, journaled with why it goes
	// out), to the tool it was approved for: its arguments were checked when it was asked
	// about (or edited to a JSON object by the user), so it is not validated again.
	c := dispatch.Call{ID: callID, Name: tool, Arguments: string(args), Note: "approved by the user"}
	o, err := callChain.RunTo(ctx, chainRun{run: r, tools: r.tools}, c, func(ctx context.Context, _ chainRun, c dispatch.Call) (*toolOutcome, error) {
		if a, ok := t.agents[tool]; ok {
			var m map[string]any
			_ = json.Unmarshal(args, &m)
			return ptr(delegate(ctx, r, t, a, callID, m)), nil
		}
		if _, ok := t.mcp[tool]; ok {
			return ptr(callMCPSession(ctx, r, t, toolCall(c), args)), nil
		}
		return ptr(taggedOutcome(bridge.TagUnreachable, bridge.Unreachable(tool))), nil
	}, "validate")
	if err != nil {
		// The fence stopped it: another replica owns the run now, and finds its start
		// recorded without a result (in doubt: asked again, or re-sent when idempotent).
		r.log.Warn("approved call not sent: the run may not act here", "tool", tool, "tool_call_id", callID, "err", err)
		return taggedOutcome(bridge.TagError, bridge.Error("The approved call was not sent: the coordinator running this conversation changed. Try again."))
	}
	out := *o
	if len(out.interrupts) == 0 && ctx.Err() == nil {
		if err := recordApproval(ctx, r, interruptID, func(a *approvalHandle) {
			a.State, a.Result, a.ResultTag, a.ResultCode = approvalDone, out.Text, out.Tag, out.Code
		}); err != nil {
			r.log.Error("record approved call result", "tool", tool, "err", err)
		}
	}
	return out
}

// recordApproval updates the approval record of interruptID in the suspension the run
// holds while it resumes, and saves it (durable.RunSuspension.Update: one update at a
// time, on a context of its own, so that a disconnect does not lose the record). Saved
// only while this replica owns the run that answers the suspension: a replica that lost
// it records nothing, so it sends no approved call either.
func recordApproval(ctx context.Context, r *Run, interruptID string, update func(*approvalHandle)) error {
	return r.dur.susp.Update(ctx, r.RunID, interruptID, func(raw json.RawMessage) (json.RawMessage, error) {
		h := decodeHandle(store.Interrupt{Handle: raw})
		if h.Approval == nil {
			return nil, fmt.Errorf("coordinator: interrupt %s is not an approval", interruptID)
		}
		update(h.Approval)
		return mustJSON(h), nil
	}, "the store refused its approval record")
}

// approvalsInFlight reports whether a suspension holds an approval that was answered
// (its call started or done) by a run that did not finish: that run's process stopped.
func approvalsInFlight(s *store.Suspension) bool {
	for _, in := range s.Interrupts {
		if in.Kind == hitl.KindApproval {
			if h := decodeHandle(in).Approval; h != nil && h.State != approvalAsked {
				return true
			}
		}
	}
	return false
}

// recoverApprovals takes over a suspension left by a run that stopped while it acted on
// approvals. Calls whose result was recorded are settled (their results go to the model,
// not sent again); calls that were sent without a recorded result are in doubt: an
// idempotent or read-only tool is called again, any other call becomes a second question
// to the user (metadata.baton.inDoubt). The remaining questions are asked again; when none
// remain, the run continues with the conversation. done is true when the run has ended.
func recoverApprovals(ctx context.Context, r *Run, t *toolset, susp *store.Suspension) (conv []llm.Message, done bool, reason EndReason) {
	if err := json.Unmarshal(susp.History, &conv); err != nil {
		r.log.Error("suspension history unreadable", "err", err)
		r.seq.Fail("STORE_UNAVAILABLE", "This conversation's saved state could not be read.")
		return nil, true, ended(OutcomeError, "store")
	}
	r.dur.susp.Hold(susp)
	// Idempotent or read-only calls that were out are sent again, once more recorded.
	for _, in := range susp.Interrupts {
		h := decodeHandle(in).Approval
		if in.Kind != hitl.KindApproval || h == nil || h.State != approvalStarted || !idempotentTool(t, h.Tool) {
			continue
		}
		r.log.Warn("approved call in doubt after a restart: sent again (idempotent)", "tool", h.Tool, "tool_call_id", in.ToolCallID)
		out := sendApproved(ctx, r, t, in.ToolCallID, in.ID, h.Tool, h.Sent)
		if len(out.interrupts) > 0 {
			// It asks the user something now: settled as an error rather than left open
			// under an interrupt that no longer matches.
			r.e.abandon(context.WithoutCancel(ctx), r.owner, r.ThreadID, out.interrupts)
			_ = recordApproval(ctx, r, in.ID, func(a *approvalHandle) {
				a.State, a.Result = approvalDone, bridge.Error("The call was sent again after a restart and asked a question that can no longer be answered.")
			})
		}
	}
	var open []store.Interrupt
	var settled []string
	for _, in := range susp.Interrupts {
		h := decodeHandle(in).Approval
		if in.Kind != hitl.KindApproval || h == nil || h.State == approvalAsked {
			open = append(open, in)
			continue
		}
		settled = append(settled, in.ID)
		switch h.State {
		case approvalDone:
			conv = append(conv, llm.Message{Role: llm.RoleTool, ToolCallID: in.ToolCallID, Content: h.Result})
			r.emitResult(ctx, in.ToolCallID, toolOutcome{ToolResult: failure.ToolResult{Text: h.Result, Tag: h.ResultTag, Code: h.ResultCode}})
		default: // started, not idempotent: ask again
			r.log.Warn("approved call in doubt after a restart: asking the user", "tool", h.Tool, "tool_call_id", in.ToolCallID)
			again := askApproval(r, t, llm.ToolCall{ID: in.ToolCallID, Name: h.Tool, Arguments: string(h.Sent)}, true)
			open = append(open, again)
		}
	}
	r.dur.susp.Hold(nil)
	if len(open) == 0 {
		// Every interrupt is settled: fenced as a resume's settle is, a replica that lost
		// the run deletes nothing its new owner resumes from, and stops here.
		if err := closeSuspension(ctx, r, susp); err != nil {
			if errors.Is(err, store.ErrFenced) {
				return conv, true, r.finishCancelled(ctx)
			}
			r.log.Error("settle recovered approvals", "err", err)
		}
		return conv, false, EndReason{}
	}
	next := *susp
	next.History, next.Interrupts = mustJSON(conv), open
	next.WriterRunID = r.RunID
	if err := r.dur.susp.Save(ctx, &next, "the store refused its recovered suspension"); err != nil {
		r.log.Error("save recovered suspension", "err", err)
		r.seq.Fail("STORE_UNAVAILABLE", "The coordinator could not save this conversation's question for later. Please try again.")
		return conv, true, ended(OutcomeError, "store")
	}
	// Marked after the fenced save, so that a replica that lost the run marks nothing.
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	if err := r.e.cfg.Store.MarkResolved(sctx, r.ThreadID, settled); err != nil {
		r.log.Error("mark settled approvals resolved", "err", err)
	}
	finishInterrupted(r, open)
	return conv, true, ended(OutcomeInterrupt, "approvals recovered")
}

// idempotentTool reports whether calling tool twice does no harm (MCP idempotentHint or
// readOnlyHint). Sub-agents never are: a delegation is a new task.
func idempotentTool(t *toolset, tool string) bool {
	mt, ok := t.mcp[tool]
	return ok && mt.Idempotent
}
