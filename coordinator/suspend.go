package coordinator

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/baton-dev/baton/agui"
	"github.com/baton-dev/baton/failure"
	"github.com/baton-dev/baton/hitl"
	"github.com/baton-dev/baton/llm"
	"github.com/baton-dev/baton/mcpclient"
	"github.com/baton-dev/baton/store"
)

// handle is the protocol handle of an interrupt, persisted with it: what is needed to
// deliver the answer to the right protocol, also after a restart.
type handle struct {
	// A2A input-required / auth-required.
	Agent     string `json:"agent,omitempty"`
	TaskID    string `json:"taskId,omitempty"`
	ContextID string `json:"contextId,omitempty"`
	// MCP: the parked call and the key of this request within it (MRTR), or the
	// in-memory waiter's id (2025-11-25 in-session elicitation).
	MCP     *mcpclient.InputRequired `json:"mcp,omitempty"`
	Key     string                   `json:"key,omitempty"`
	Session string                   `json:"session,omitempty"`
	// Home is the advertised URL of the replica whose memory holds Session's waiter.
	Home string `json:"home,omitempty"`
	// ask_user.
	Question string   `json:"question,omitempty"`
	Choices  []string `json:"choices,omitempty"`
	// "continue?" after a failure (loop_detected, limits).
	Failure *failureRef `json:"failure,omitempty"`
	// A call waiting for the user's approval, and what became of it (approval.go).
	Approval *approvalHandle `json:"approval,omitempty"`
	// An MCP call that waits for the user to sign in to its server (signin.go).
	SignIn *mcpclient.SignInRequired `json:"signIn,omitempty"`
}

// runState is what a suspension saves of the run besides its history: the failure state
// (its fields at the top level, as before) and the tasks the thread started, so that a
// continuation is checked against them after a restart or on another replica.
type runState struct {
	failure.State
	Tasks map[string]TaskRecord `json:"tasks,omitempty"`
	// Depth is the run's nesting depth (nesting.go): a resume goes on at it.
	Depth int `json:"depth,omitempty"`
	// Budget is what was left, past State's budget use, of the budget the run's caller gave
	// it (spend_tree.go): a resume that comes with no budget of its own (after a sign-in,
	// the door resumes the run without a message from the caller) goes on within it. Not
	// "budget": that is the embedded State's use of the run's budget.
	CallerBudget *agui.CallerBudget `json:"callerBudget,omitempty"`
}

func mustJSON(v any) json.RawMessage {
	b, err := json.Marshal(v)
	if err != nil {
		panic(fmt.Sprintf("coordinator: marshal %T: %v", v, err)) // only engine-owned plain structs
	}
	return b
}

func decodeHandle(in store.Interrupt) handle {
	var h handle
	_ = json.Unmarshal(in.Handle, &h)
	return h
}

// suspendRun persists the run: the conversation so far, the open interrupts, and the failure
// state (counters, lessons, loop signatures, budget usage, and the active time used so far,
// which counts against the time limit of the resumed run).
func suspendRun(ctx context.Context, r *Run, conv []llm.Message, open []store.Interrupt) error {
	now := r.e.cfg.Now()
	r.fs.Active += time.Since(r.start)
	r.start = time.Now()
	r.fs.TraceParent = r.trace.parent()
	s := &store.Suspension{
		ThreadID: r.ThreadID, RunID: r.RunID, Owner: r.owner,
		History: mustJSON(conv), State: mustJSON(&runState{State: r.fs, Tasks: r.e.tasks.records(r.ThreadID), Depth: r.in.Depth,
			CallerBudget: callerLeft(r, r.fs.Budget)}),
		Interrupts: open, CreatedAt: now, UpdatedAt: now,
	}
	// Saved only while this replica owns the run (durable.RunSuspension: under its epoch,
	// on a context of its own, so that a client that disconnects right now does not lose
	// the question).
	if err := r.dur.susp.Save(ctx, s, "the store refused its suspension"); err != nil {
		if errors.Is(err, store.ErrFenced) {
			// Another replica owns the run now and parks (or goes on with) its work:
			// nothing is cancelled from here.
			return err
		}
		// Nobody can answer a question that was not saved: the work parked on it is
		// cancelled now (A2A CancelTask, MCP abandon), not left waiting at the peer.
		r.e.abandon(context.WithoutCancel(ctx), r.owner, r.ThreadID, open)
		return err
	}
	if m := r.e.cfg.Metrics; m != nil {
		m.InterruptsOpen(len(open))
	}
	return nil
}

// finishInterrupted ends the run with the interrupt outcome.
func finishInterrupted(r *Run, open []store.Interrupt) {
	r.trace.interrupts(open)
	out := &agui.Outcome{Type: agui.OutcomeInterrupt}
	for _, in := range open {
		out.Interrupts = append(out.Interrupts, hitl.ToAGUI(in))
	}
	r.seq.Finish(r.ThreadID, r.RunID, out, nil)
}

// resumeRun delivers the answers of a resume run to the parked work, streams the results
// against the original tool calls and returns the conversation to continue with. done is
// true when the run has already ended (bad resume, new interrupts, cancellation).
func resumeRun(ctx context.Context, r *Run, t *toolset, susp *store.Suspension) ([]llm.Message, bool, EndReason) {
	var conv []llm.Message
	if err := json.Unmarshal(susp.History, &conv); err != nil {
		r.log.Error("suspension history unreadable", "err", err)
		r.seq.Fail("STORE_UNAVAILABLE", "This conversation's saved state could not be read.")
		return nil, true, ended(OutcomeError, "store")
	}
	answers, ignored, err := hitl.Validate(susp.Interrupts, r.in.Resume, r.e.cfg.Now())
	if len(ignored) > 0 {
		r.log.Warn("resume entries for unknown interrupts ignored", "interrupt_ids", ignored)
	}
	if err != nil {
		var re *hitl.ResumeError
		if !errors.As(err, &re) {
			re = &hitl.ResumeError{Code: "INVALID_RESUME", Message: "The answers could not be read."}
		}
		if re.Code == "INTERRUPT_EXPIRED" {
			// The parked work is abandoned: cancel it downstream and free the thread.
			r.e.jobs.Expiry().Expire(context.WithoutCancel(ctx), susp)
		}
		r.seq.Fail(re.Code, re.Message)
		return nil, true, ended(OutcomeError, strings.ToLower(re.Code))
	}

	calls, stop := answerContinues(r, susp.Interrupts, answers)
	if stop != nil {
		// The user stops the run: the work parked on the other interrupts is abandoned.
		if len(calls) > 0 {
			r.e.abandon(context.WithoutCancel(ctx), r.owner, r.ThreadID, calls)
		}
		if err := closeSuspension(ctx, r, susp); err != nil {
			return conv, true, failUnrecorded(ctx, r, err)
		}
		return conv, true, r.finishDecision(stop.stopDecision())
	}
	groups := groupByCall(calls)
	outcomes := make([]toolOutcome, len(groups))
	// Approved calls record their start and result in the suspension (approval.go).
	r.dur.susp.Hold(susp)
	var wg sync.WaitGroup
	for i, g := range groups {
		wg.Go(func() {
			var ran bool
			outcomes[i], ran = answerCall(ctx, r, t, g, answers)
			if ran {
				r.emitResult(ctx, g.callID, outcomes[i])
			}
		})
	}
	wg.Wait()
	r.dur.susp.Hold(nil)
	if errors.Is(context.Cause(ctx), ErrHandoff) && onlyA2A(calls) {
		// Handed to another replica while the answers were out: the suspension stays, so
		// that the replica taking the run over runs this resume again. It follows the
		// tasks the answers went to (answerMaySent) and sends nothing twice; settling
		// here would leave it a "duplicate resume" and lose the tasks' outcomes.
		return conv, true, r.finishCancelled(ctx)
	}
	if errors.Is(context.Cause(ctx), ErrRunMoved) {
		// Another replica owns the run now (the store refused one of this replica's
		// writes): it resumes from the suspension, so settling it here would delete what
		// the new owner works from.
		return conv, true, r.finishCancelled(ctx)
	}
	if err := closeSuspension(ctx, r, susp); err != nil {
		// The answers went out but the store does not know: going on would report a
		// success that a repeated resume contradicts. The next resume finds the
		// suspension still open and recovers the outcomes from the agents (recoverTask).
		return conv, true, failUnrecorded(ctx, r, err)
	}

	resumed := make([]llm.ToolCall, len(groups))
	sent := make([]bool, len(groups))
	for i, g := range groups {
		resumed[i] = llm.ToolCall{ID: g.callID, Name: interruptTool(g.ins[0])}
		sent[i] = true
	}
	return r.afterTools(ctx, conv, resumed, outcomes, sent, nil, nil)
}

// answerCall delivers the user's answers to the call suspended on g to the interrupt's
// home (deliver) through the run's chain: fenced and traced as the call's continuation,
// not journaled (what the home sends it records itself) nor validated. An approval's
// answer goes to its home directly: the approved call goes through the chain itself
// (sendApproved), journaled. ran is false when the fence stopped the answer (the run
// moved, or ended while it waited for its lease): nothing was delivered.
func answerCall(ctx context.Context, r *Run, t *toolset, g *callGroup, answers map[string]hitl.Answer) (out toolOutcome, ran bool) {
	deliverTo := func(ctx context.Context) toolOutcome { return deliver(ctx, r, t, g.callID, g.ins, answers) }
	if _, ok := homeOf(g.ins[0].Kind).(approvalHome); ok {
		return deliverTo(ctx), true
	}
	return continueCall(ctx, r, llm.ToolCall{ID: g.callID, Name: interruptTool(g.ins[0])}, deliverTo, "journal", "validate")
}

// onlyA2A reports whether every interrupt parks an A2A task (a resume of them can be run
// again after a hand-off: a task the answer may have reached is followed, not answered).
func onlyA2A(ins []store.Interrupt) bool {
	for _, in := range ins {
		if _, ok := homeOf(in.Kind).(a2aHome); !ok {
			return false
		}
	}
	return len(ins) > 0
}

// answerContinues applies the answers to "continue?" interrupts (loop_detected, limits),
// which have no tool call: the run goes on with a fresh allowance of what stopped it, or
// stops (stop is the failure the user chose to stop on). calls are the other interrupts.
func answerContinues(r *Run, ins []store.Interrupt, answers map[string]hitl.Answer) (calls []store.Interrupt, stop *failureRef) {
	for _, in := range ins {
		if in.Kind != hitl.KindContinue {
			calls = append(calls, in)
			continue
		}
		ref := decodeHandle(in).Failure
		if ref == nil {
			ref = &failureRef{Kind: failure.Kind(metaKind(in)), Explanation: in.Message}
		}
		ans := answers[in.ID]
		if yes, _ := ans.Payload["continue"].(bool); !yes || ans.Cancelled {
			stop = ref
			continue
		}
		r.fs.Resume(ref.Kind)
		if ref.Kind == failure.KindTimeLimit {
			r.start = time.Now()
			r.resetHardStop()
		}
		r.log.Info("user chose to continue", "kind", ref.Kind)
	}
	return calls, stop
}

// closeSuspension records that the suspension's answers went out, so that a repeated resume
// sends nothing twice, and removes the suspension, in one write that the store makes only
// while this replica owns the run (durable.RunSuspension.Settle). It reports a failure of
// the write: the resume is then not recorded. A refusal (store.ErrFenced) stops the run
// here as moved: its new owner resumes from the suspension, which is kept.
func closeSuspension(ctx context.Context, r *Run, susp *store.Suspension) error {
	var ids []string
	for _, in := range susp.Interrupts {
		ids = append(ids, in.ID)
	}
	if err := r.dur.susp.Settle(ctx, r.RunID, ids); err != nil {
		return err
	}
	if m := r.e.cfg.Metrics; m != nil {
		m.InterruptsOpen(-len(susp.Interrupts))
	}
	return nil
}

// failUnrecorded ends a resume whose answers were delivered but could not be recorded. A
// refused record means another replica owns the run now: the run stops here as moved,
// without an error of its own, and its new owner goes on.
func failUnrecorded(ctx context.Context, r *Run, err error) EndReason {
	if errors.Is(err, store.ErrFenced) {
		return r.finishCancelled(ctx)
	}
	r.log.Error("resume delivered but not recorded", "err", err)
	r.seq.Fail("STORE_UNAVAILABLE", "Your answer was delivered, but the coordinator could not record it. Send the same answer again to pick up the result.")
	return ended(OutcomeError, "store")
}

// recoverPoll is how often recoverTask reads a task that is still working.
const recoverPoll = 500 * time.Millisecond

// metaKind returns metadata.baton.kind of a "continue?" interrupt.
func metaKind(in store.Interrupt) string {
	m, _ := in.Metadata["baton"].(map[string]any)
	kind, _ := m["kind"].(string)
	return kind
}

// callGroup is the interrupts of one suspended tool call.
type callGroup struct {
	callID string
	ins    []store.Interrupt
}

// groupByCall groups interrupts by tool call, in order: an MCP call may have asked several
// questions.
func groupByCall(ins []store.Interrupt) []*callGroup {
	var groups []*callGroup
	byCall := map[string]*callGroup{}
	for _, in := range ins {
		g := byCall[in.ToolCallID]
		if g == nil {
			g = &callGroup{callID: in.ToolCallID}
			byCall[in.ToolCallID] = g
			groups = append(groups, g)
		}
		g.ins = append(g.ins, in)
	}
	return groups
}
