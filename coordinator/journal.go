package coordinator

import (
	"context"
	"encoding/json"

	"github.com/baton-dev/baton/bridge"
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

// journaled runs a backend call between its intent and its outcome in the journal. A call
// that could not be re-issued safely is not sent when its intent cannot be recorded: a
// replica taking the run over reads a call without an intent as never sent.
func journaled(ctx context.Context, r *Run, t *toolset, c llm.ToolCall, detail string, run func(context.Context) toolOutcome) toolOutcome {
	kind, target, safe := toolStep(t, c)
	if kind == "" {
		return run(ctx)
	}
	if kind == store.StepA2ASend {
		// What identifies the message goes into its intent, so that a replica taking the
		// run over finds its task even if the agent never named it here (delegate_find.go).
		ids := newSentIDs()
		// One context per (thread, agent): the agent sees one conversation.
		var release func()
		ids.contextID, release = threadContext(ctx, r.e, r.ThreadID, target, r.newThread)
		defer release()
		detail = withDetail(detail, ids.detail())
		ctx = withSentIDs(ctx, ids)
	}
	// A call that may be re-issued goes out even unrecorded; one that could not be
	// re-issued safely waits for its intent to be recorded (the store asked again while the
	// run may act), or is not sent.
	s, err := r.dur.steps.Before(ctx, durable.StepIntent{Kind: kind, Target: target, Ref: c.ID, Attempt: 1, Detail: detail}, !safe, r.dur.mayAct)
	if err != nil {
		return taggedOutcome(bridge.TagError, bridge.Error("The call was not sent: the coordinator could not record it first (its store is unavailable). Try again later."))
	}
	out := run(ctx)
	s.End(stepEnd(ctx, out))
	return out
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
