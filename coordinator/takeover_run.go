package coordinator

import (
	"context"
	"slices"
	"sync"
	"time"

	"github.com/baton-dev/baton/agui"
	"github.com/baton-dev/baton/bridge"
	"github.com/baton-dev/baton/durable"
	"github.com/baton-dev/baton/failure"
	"github.com/baton-dev/baton/llm"
	"github.com/baton-dev/baton/prompts"
	"github.com/baton-dev/baton/subagent"
)

// setupTakenOver is setup for a run taken over: the failure state, guard, loop detector
// and system prompt as the checkpoint left them, the stream's open items that cannot go on
// closed, and the calls of the last turn settled (finishTakenOverTurn). done is true when the run
// has already ended.
func setupTakenOver(ctx context.Context, r *Run, tools *toolset) (conv []llm.Message, system string, done bool, reason EndReason) {
	to := r.dur.resumed
	following := map[string]bool{}
	if to.conv != nil {
		for _, c := range pendingCalls(to.conv) {
			if act, task := resumeDecision(tools, c, &to.work, r.e.cfg.Approvals.needsApproval(tools, c)); act == resumeFollow {
				following[task.SubagentRunID] = true
			}
		}
	}
	if err := r.seq.CloseOpen(func(id string) bool { return following[id] }); err != nil {
		r.log.Warn("takeover: closing the stream's open items", "err", err)
	}
	if to.conv == nil {
		// Cut before its first checkpoint: nothing but the model was called; the run
		// starts over from its input.
		return r.setup(ctx, tools)
	}
	r.fs = to.fs
	r.resetHardStop()
	armTools(r, tools)
	r.loops = r.fs.Loops(r.e.cfg.Loop)
	system, err := prompts.System(r.e.tools.systemInput(r.in, tools))
	if err != nil {
		r.log.Error("system prompt", "err", err)
		r.seq.Fail("INTERNAL", "The coordinator could not prepare the request.")
		return nil, "", true, ended(OutcomeError, "system prompt")
	}
	conv = to.conv
	for _, m := range to.missingResults(conv) {
		r.log.Info("takeover: streaming a tool result the log was missing", "tool_call_id", m.ToolCallID)
		r.emit(&agui.ToolCallResult{MessageID: newID("tr"), ToolCallID: m.ToolCallID, Content: m.Content, Role: "tool"})
	}
	if calls := pendingCalls(conv); len(calls) > 0 {
		conv, done, reason = finishTakenOverTurn(ctx, r, tools, conv, calls)
	}
	return conv, system, done, reason
}

// missingResults returns the results that the checkpoint's conversation holds for calls of
// this run whose TOOL_CALL_START is in the log but whose TOOL_CALL_RESULT is not (the
// previous owner stored the checkpoint and died before the result's event was stored), and
// counts them as logged: the new owner streams each once, or a reconnecting client would
// never see those calls end.
func (to *takenOver) missingResults(conv []llm.Message) []llm.Message {
	var out []llm.Message
	for _, m := range conv {
		if m.Role != llm.RoleTool || !to.started[m.ToolCallID] || to.resulted[m.ToolCallID] {
			continue
		}
		to.resulted[m.ToolCallID] = true
		out = append(out, m)
	}
	return out
}

// loggedResult keeps a result that reached the log while the checkpoint, stored after
// the events of its round, did not get it: the call ended, and what the model is given is
// what the stream already showed, not a report that the call may or may not have run.
func (to *takenOver) loggedResult(toolCallID, content string) {
	if _, ok := to.work.Results[toolCallID]; ok {
		return
	}
	res := failure.ToolResult{Text: content}
	if tag, arg, ok := bridge.ParseTag(content); ok {
		res.Tag = tag
		if tag == bridge.TagRetry {
			res.Code = arg
		}
	}
	if to.work.Results == nil {
		to.work.Results = map[string]failure.ToolResult{}
	}
	to.work.Results[toolCallID] = res
}

// pendingCalls returns the tool calls of the last assistant message of conv when the
// conversation ends with that turn (its calls then have no result in conv yet).
func pendingCalls(conv []llm.Message) []llm.ToolCall {
	if n := len(conv); n > 0 && conv[n-1].Role == llm.RoleAssistant {
		return conv[n-1].ToolCalls
	}
	return nil
}

// finishTakenOverTurn finishes the tool round of the turn the run was in when it was taken over:
// each call is settled by resumeDecision, then the round ends as any other (toolRound).
func finishTakenOverTurn(ctx context.Context, r *Run, tools *toolset, conv []llm.Message, calls []llm.ToolCall) ([]llm.Message, bool, EndReason) {
	work := &r.dur.resumed.work
	var backend []llm.ToolCall
	var pending []string
	for _, c := range calls {
		if tools.isFrontend(c.Name) {
			pending = append(pending, c.ID)
			continue
		}
		backend = append(backend, c)
	}
	outcomes := make([]toolOutcome, len(backend))
	sent := make([]bool, len(backend))
	var again []int
	var predicted []failure.Failure
	var wg sync.WaitGroup
	for i, c := range backend {
		act, task := resumeDecision(tools, c, work, r.e.cfg.Approvals.needsApproval(tools, c))
		r.log.Info("takeover: settling a call of the interrupted turn", "tool", c.Name, "tool_call_id", c.ID, "action", act.String())
		switch act {
		case resumeResult:
			outcomes[i] = toolOutcome{ToolResult: work.Results[c.ID]}
			sent[i] = true
			if r.dur.resumed.started[c.ID] && !r.dur.resumed.resulted[c.ID] {
				// Recorded in the work document, not yet in the log: streamed now, once.
				r.emitResult(ctx, c.ID, outcomes[i])
			}
		case resumeInDoubt:
			sent[i] = true
			if a, ok := tools.agents[c.Name]; ok {
				// A new task whose id the previous owner never learned: found by the ids
				// its intent recorded, and followed (or cancelled), when the agent can.
				settleSent(ctx, r, &wg, c, &outcomes[i], func(ctx context.Context) toolOutcome {
					return recoverSend(ctx, r, tools, a, c)
				})
				continue
			}
			outcomes[i] = taggedOutcome(bridge.TagError, inDoubtText(c.Name))
			r.emitResult(ctx, c.ID, outcomes[i])
		case resumeFollow:
			sent[i] = true
			a := tools.agents[c.Name]
			req := subagent.Request{TaskID: task.TaskID, ContextID: task.ContextID}
			settleSent(ctx, r, &wg, c, &outcomes[i], func(ctx context.Context) toolOutcome {
				return exchange(ctx, r, tools, a, c.ID, task.SubagentRunID, req, true)
			})
		case resumeReissue:
			again = append(again, i)
		}
	}
	if len(again) > 0 {
		sub := make([]llm.ToolCall, len(again))
		for j, i := range again {
			sub[j] = backend[i]
		}
		outs, snt, pred := runCalls(ctx, r, tools, sub)
		for j, i := range again {
			outcomes[i], sent[i] = outs[j], snt[j]
		}
		predicted = pred
	}
	wg.Wait()
	conv, done, reason := r.afterTools(ctx, conv, backend, outcomes, sent, predicted, pending)
	if done {
		return conv, true, reason
	}
	if len(pending) > 0 {
		r.seq.Finish(r.ThreadID, r.RunID, &agui.Outcome{Type: agui.OutcomeSuccess, PendingToolCallIDs: pending}, nil)
		return conv, true, ended(OutcomeCompleted, "frontend tools pending")
	}
	return conv, false, EndReason{}
}

// settleSent settles, on a goroutine of wg, call c of the interrupted turn that the
// previous owner had sent: fn follows or recovers it through the run's chain, fenced and
// traced but not journaled (its intent is in the journal already), and its result is
// stored in out and streamed. A call the fence stopped (the run moved) has no result.
func settleSent(ctx context.Context, r *Run, wg *sync.WaitGroup, c llm.ToolCall, out *toolOutcome, fn func(context.Context) toolOutcome) {
	wg.Go(func() {
		var ran bool
		*out, ran = continueCall(ctx, r, c, fn, "journal", "validate")
		if ran {
			r.emitResult(ctx, c.ID, *out)
		}
	})
}

// taskFollower is a Delegate that can follow a task it did not start in this process
// (subagent.Agent.Follow).
type taskFollower interface {
	Follow(ctx context.Context, taskID, contextID string, obs subagent.Observer) (*subagent.Result, error)
}

// followRemote follows task taskID of agent a to its end: by subscription when the client
// can, else by reading it every recoverPoll.
func followRemote(ctx context.Context, a *Agent, taskID, contextID string, obs subagent.Observer) (*subagent.Result, error) {
	if f, ok := a.Client.(taskFollower); ok {
		return f.Follow(ctx, taskID, contextID, obs)
	}
	if obs.Task != nil {
		obs.Task(taskID, contextID)
	}
	for {
		got, err := a.Client.GetTask(ctx, taskID)
		if err != nil {
			return nil, &subagent.TaskError{TaskID: taskID, ContextID: contextID, Err: err}
		}
		if got.State.Terminal() || got.State.Interrupted() {
			return got, nil
		}
		t := time.NewTimer(recoverPoll)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil, &subagent.TaskError{TaskID: taskID, ContextID: contextID, Err: ctx.Err()}
		case <-t.C:
		}
	}
}

// answerMaySent reports whether this run was taken over from a replica that had recorded
// taskID in the run's work: a resume records its task before sending the answer, so that
// replica may have delivered it.
func answerMaySent(r *Run, taskID string) bool {
	return r.dur.resumed != nil && slices.ContainsFunc(r.dur.resumed.work.A2A, func(w durable.Task) bool { return w.TaskID == taskID })
}

// subIDAfterTakeover is the sub-agent id for a delegation of a run taken over: a stored
// id that the log already used and that is no longer open (CloseOpen ended it) cannot
// start again, so a new one is made.
func subIDAfterTakeover(r *Run, subID string) string {
	if r.dur.resumed == nil || subID == "" || slices.Contains(r.seq.Open().Subagents, subID) {
		return subID
	}
	return ""
}
