package coordinator

import (
	"context"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/baton-dev/baton/bridge"
	"github.com/baton-dev/baton/hitl"
	"github.com/baton-dev/baton/store"
	"github.com/baton-dev/baton/subagent"
)

// toolHome is one kind of tool that can wait for the user (A2A delegation, MCP call,
// ask_user). Everything about a kind's interrupts lives in its home: no switch on the
// interrupt kind elsewhere. Calls themselves start in the run's chain (dispatch.go), where
// the toolset says which kind a name is.
type toolHome interface {
	// deliver gives the user's answers to the call suspended on ins (one tool call's
	// interrupts) and returns its outcome.
	deliver(ctx context.Context, r *Run, t *toolset, callID string, ins []store.Interrupt, answers map[string]hitl.Answer) toolOutcome
	// abandon cancels the work parked on ins, which nobody will answer.
	abandon(ctx context.Context, e *Engine, owner, threadID string, ins []store.Interrupt)
	// toolName is the name of the call an interrupt suspended, as the model called it.
	toolName(in store.Interrupt) string
}

// homeOf returns the home of an interrupt's kind; nil for "continue?" questions, which
// belong to the run itself.
func homeOf(kind string) toolHome {
	switch kind {
	case hitl.KindA2AInput, hitl.KindA2AAuth:
		return a2aHome{}
	case hitl.KindMCPForm, hitl.KindMCPURL, hitl.KindMCPSession:
		return mcpHome{}
	case hitl.KindAskUser:
		return askUserHome{}
	case hitl.KindApproval:
		return approvalHome{}
	case hitl.KindMCPAuth:
		return signInHome{}
	}
	return nil
}

// interruptTool is the tool name of the call an interrupt suspended.
func interruptTool(in store.Interrupt) string {
	if h := homeOf(in.Kind); h != nil {
		return h.toolName(in)
	}
	return ""
}

// deliver routes the user's answers for one suspended tool call to its home.
func deliver(ctx context.Context, r *Run, t *toolset, callID string, ins []store.Interrupt, answers map[string]hitl.Answer) toolOutcome {
	h := homeOf(ins[0].Kind)
	if h == nil {
		return taggedOutcome(bridge.TagError, bridge.Error("This question can no longer be answered."))
	}
	return h.deliver(ctx, r, t, callID, ins, answers)
}

// a2aHome: A2A input-required and auth-required tasks.
type a2aHome struct{}

func (a2aHome) toolName(in store.Interrupt) string { return decodeHandle(in).Agent }

func (a2aHome) deliver(ctx context.Context, r *Run, t *toolset, callID string, ins []store.Interrupt, answers map[string]hitl.Answer) toolOutcome {
	first := ins[0]
	h := decodeHandle(first)
	ans := answers[first.ID]
	a := r.e.agents[h.Agent]
	if a == nil {
		return taggedOutcome(bridge.TagUnreachable, bridge.Unreachable(h.Agent))
	}
	if ans.Cancelled {
		// Confirmed like a run's cancels: retried in the background until the agent
		// confirms (cancels.go), every attempt with the user's agent credentials.
		st, _ := r.dur.intent(store.StepCancel, a.Name, h.TaskID, 1, "the user cancelled a waiting task")
		err := r.e.cancels.cancelTask(ctx, r.owner, a, h.TaskID, r.log, "user cancelled a waiting task")
		st.End(cancelEnd(err))
		if err != nil {
			r.log.Warn("user cancelled a waiting task; the cancel failed", "agent", a.Name, "task_id", h.TaskID, "err", errString(err))
		}
		return a2aOutcome(&subagent.Result{State: subagent.StateCanceled, TaskID: h.TaskID, Text: "The user cancelled the request."})
	}
	text, _ := ans.Payload["text"].(string)
	if strings.TrimSpace(text) == "" {
		text = "done" // auth-required: the user says the sign-in is done
	}
	var out toolOutcome
	if answerMaySent(r, h.TaskID) {
		// Taken over from a replica that had recorded the task before sending the answer
		// (onTask): the answer may have reached the agent, which may not have moved on yet.
		// It is never sent twice: the task is followed by id (a task still waiting gets
		// the question raised again).
		r.log.Info("resume taken over: the answer may have reached the task; following it", "agent", a.Name, "task_id", h.TaskID)
		out = exchange(ctx, r, t, a, callID, subIDAfterTakeover(r, first.SubagentRunID), subagent.Request{TaskID: h.TaskID, ContextID: h.ContextID}, true)
	} else {
		if rec := recoverTask(ctx, r, a, callID, first, h); rec != nil {
			return *rec
		}
		r.e.rememberTask(r.ThreadID, h.TaskID, taskRef{agent: a.Name, contextID: h.ContextID, state: subagent.StateInputRequired})
		out = send(ctx, r, t, a, callID, subIDAfterTakeover(r, first.SubagentRunID), subagent.Request{Prompt: text, TaskID: h.TaskID, ContextID: h.ContextID})
	}
	if out.Text != "" {
		// The model's history shows the exchange as a continuation of the task: what the
		// agent asked and what the user answered, after the outcome's own text.
		out.Text += "\n\n" + bridge.ContinuationNote(h.TaskID, first.Message, text)
	}
	return out
}

func (a2aHome) abandon(ctx context.Context, e *Engine, owner, threadID string, ins []store.Interrupt) {
	seen := map[string]bool{}
	for _, in := range ins {
		h := decodeHandle(in)
		if a := e.agents[h.Agent]; a != nil && !seen[h.TaskID] {
			seen[h.TaskID] = true
			if err := e.cancels.cancelTask(ctx, owner, a, h.TaskID, e.log.With("thread_id", threadID), "abandoned interrupt: task cancelled"); err != nil {
				e.log.Warn("abandoned interrupt: the cancel of its task failed", "thread_id", threadID, "agent", a.Name, "task_id", h.TaskID, "err", errString(err))
			}
		}
	}
}

// askUserHome: the built-in ask_user tool.
type askUserHome struct{}

func (askUserHome) toolName(store.Interrupt) string { return askUserTool }

func (askUserHome) deliver(_ context.Context, _ *Run, _ *toolset, _ string, ins []store.Interrupt, answers map[string]hitl.Answer) toolOutcome {
	ans := answers[ins[0].ID]
	if ans.Cancelled {
		return taggedOutcome(bridge.TagDeclined, bridge.Declined("The user declined to answer."))
	}
	text, _ := ans.Payload["text"].(string)
	return taggedOutcome(bridge.TagAnswered, bridge.Answered(text))
}

// abandon: nothing waits remotely for an ask_user question.
func (askUserHome) abandon(context.Context, *Engine, string, string, []store.Interrupt) {}

// mcpHome: MCP elicitations, parked (MRTR, URL) or waiting in session.
type mcpHome struct{}

func (mcpHome) toolName(in store.Interrupt) string {
	// The catalog name the call was made under, when the handle has it: it matches the
	// model's history even where the name had to be disambiguated.
	if h := decodeHandle(in); h.MCP != nil && h.MCP.Tool != "" {
		return h.MCP.Tool
	}
	return metaTool(in)
}

func (mcpHome) deliver(ctx context.Context, r *Run, t *toolset, callID string, ins []store.Interrupt, answers map[string]hitl.Answer) toolOutcome {
	// The handle, not the kind, says where the call waits: a URL question can come
	// in-session as well as parked.
	if decodeHandle(ins[0]).Session != "" {
		return deliverSession(ctx, r, t, callID, ins[0], answers[ins[0].ID])
	}
	return deliverMCP(ctx, r, t, callID, ins, answers)
}

func (mcpHome) abandon(ctx context.Context, e *Engine, _, threadID string, ins []store.Interrupt) {
	seen := map[string]bool{}
	for _, in := range ins {
		h := decodeHandle(in)
		if h.Session != "" {
			e.sessions.answer(h.Session, &mcp.ElicitResult{Action: "cancel"})
			continue
		}
		if h.MCP != nil && e.cfg.Tools != nil && !seen[in.ToolCallID] {
			seen[in.ToolCallID] = true
			err := e.cfg.Tools.Abandon(ctx, h.MCP)
			e.log.Info("abandoned interrupt: mcp request abandoned", "thread_id", threadID, "tool", h.MCP.Tool, "err", errString(err))
		}
	}
}

// approvalHome: a call waiting for the user's approval (approval.go). Nothing waits
// remotely: the call was not sent.
type approvalHome struct{}

func (approvalHome) toolName(in store.Interrupt) string {
	if h := decodeHandle(in).Approval; h != nil {
		return h.Tool
	}
	return ""
}

func (approvalHome) deliver(ctx context.Context, r *Run, t *toolset, callID string, ins []store.Interrupt, answers map[string]hitl.Answer) toolOutcome {
	return deliverApproval(ctx, r, t, callID, ins[0], answers[ins[0].ID])
}

func (approvalHome) abandon(context.Context, *Engine, string, string, []store.Interrupt) {}
