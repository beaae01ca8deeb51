package coordinator

import (
	"context"
	"encoding/json"

	"github.com/baton-dev/baton/bridge"
	"github.com/baton-dev/baton/dispatch"
	"github.com/baton-dev/baton/durable"
	"github.com/baton-dev/baton/llm"
	"github.com/baton-dev/baton/store"
)

// The step journal (design/journal.md) is package durable's Journal; here is what the run
// records in it, and when.

// cancelEnd is the journal's outcome of a cancel.
func cancelEnd(err error) store.StepEnd {
	if err != nil {
		return store.StepEnd{Outcome: store.StepError, Detail: "not confirmed yet: " + errString(err)}
	}
	return store.StepEnd{Outcome: store.StepOK}
}

// toolStep is the journal's kind and target of a backend call, and whether it may be sent
// although its intent could not be recorded (a call a replica taking the run over may
// re-issue: an idempotent or read-only MCP tool). Kind "" means the call has no side
// effect to record (ask_user, an unknown tool).
func toolStep(t *toolset, c llm.ToolCall) (kind, target string, safe bool) {
	if a, ok := t.agents[c.Name]; ok {
		var args struct {
			TaskID any `json:"task_id"`
		}
		_ = json.Unmarshal([]byte(c.Arguments), &args)
		if args.TaskID != nil && args.TaskID != "" {
			return store.StepA2AContinue, a.Name, false
		}
		return store.StepA2ASend, a.Name, false
	}
	if mt, ok := t.mcp[c.Name]; ok {
		return store.StepToolCall, c.Name, mt.Idempotent
	}
	return "", "", true
}

// journaled returns next run between the call's intent and its outcome in the journal,
// the call's Note recorded with its intent: the chain's journal step (chainSteps). A call
// that could not be re-issued safely is not sent when its intent cannot be recorded: a
// replica taking the run over reads a call without an intent as never sent. The step is
// one frame, with no closure of its own: a delegation waits for its agent under it.
func journaled(next dispatch.Handler[chainRun, *toolOutcome]) dispatch.Handler[chainRun, *toolOutcome] {
	return func(ctx context.Context, run chainRun, c dispatch.Call) (*toolOutcome, error) {
		r := run.run
		kind, target, safe := toolStep(run.tools, toolCall(c))
		if kind == "" {
			return next(ctx, run, c)
		}
		detail := c.Note
		if kind == store.StepA2ASend {
			// What identifies the message goes into its intent, so that a replica taking
			// the run over finds its task even if the agent never named it here
			// (delegate_find.go).
			ids := newSentIDs()
			// One context per (thread, agent): the agent sees one conversation.
			var release func()
			ids.contextID, release = threadContext(ctx, r.e, r.ThreadID, target, r.newThread)
			defer release()
			detail = withDetail(detail, ids.detail())
			ctx = withSentIDs(ctx, ids)
		}
		// A call that may be re-issued goes out even unrecorded; one that could not be
		// re-issued safely waits for its intent to be recorded (the store asked again
		// while the run may act), or is not sent.
		s, err := r.dur.steps.Before(ctx, durable.StepIntent{Kind: kind, Target: target, Ref: c.ID, Attempt: 1, Detail: detail}, !safe, r.dur.mayAct)
		if err != nil {
			return ptr(taggedOutcome(bridge.TagError, bridge.Error("The call was not sent: the coordinator could not record it first (its store is unavailable). Try again later."))), nil
		}
		out, err := next(ctx, run, c)
		if out == nil {
			s.End(stepEnd(ctx, toolOutcome{}))
		} else {
			s.End(stepEnd(ctx, *out))
		}
		return out, err
	}
}

// stepEnd is the journal's outcome of a call's result.
func stepEnd(ctx context.Context, out toolOutcome) store.StepEnd {
	end := store.StepEnd{Outcome: store.StepOK, Tag: out.Tag, FailureKind: out.Code}
	switch {
	case len(out.interrupts) > 0:
		end.Outcome = "interrupted"
	case ctx.Err() != nil:
		end.Outcome = "cancelled"
	case out.Tag == bridge.TagError || out.Tag == bridge.TagRetry:
		end.Outcome = store.StepError
	}
	return end
}
