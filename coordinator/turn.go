package coordinator

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/baton-dev/baton/agui"
	"github.com/baton-dev/baton/bridge"
	"github.com/baton-dev/baton/cancel"
	"github.com/baton-dev/baton/failure"
	"github.com/baton-dev/baton/hitl"
	"github.com/baton-dev/baton/llm"
	"github.com/baton-dev/baton/store"
)

// The run loop: setup (the thread's suspension, the guard, the system prompt), then LLM
// turns and their tool rounds until the run ends.

// loop runs LLM turns until the run ends, and returns why it ended.
func (r *Run) loop(ctx context.Context) EndReason {
	// Servers that sign each user in list their tools as the first signed-in user; this
	// principal may be one (mcpclient.Auth).
	if p, ok := r.e.cfg.Tools.(interface {
		Prepare(ctx context.Context, principal string)
	}); ok {
		p.Prepare(ctx, r.owner)
	}
	tools := r.e.tools.toolset(r.in)
	setup := r.setup
	if r.dur.resumed != nil {
		setup = func(ctx context.Context, tools *toolset) ([]llm.Message, string, bool, EndReason) {
			return setupTakenOver(ctx, r, tools)
		}
	}
	conv, system, done, reason := setup(ctx, tools)
	if done {
		return reason
	}
	// The input's messages (with the thread's history) are in conv now: the run keeps
	// the rest of its input, so that an open run does not retain the conversation twice.
	// A copy: the caller's input is not changed.
	in := *r.in
	in.Messages = nil
	r.in = &in
	// A history past compact_at of the window is compacted before the first checkpoint
	// takes it: the run's work document never holds the whole of a long thread.
	conv, compacted := compactAtStart(ctx, r, system, tools, conv)
	if !compacted {
		// A checkpoint at every turn boundary: where a replica taking the run over goes
		// on (a compaction took its own).
		r.dur.noteCheckpoint(conv)
	}
	limits := failure.TurnLimits{MaxIterations: r.e.cfg.Limits.MaxIterations, MaxRunTime: r.e.cfg.Limits.MaxRunTime, StallRounds: r.e.cfg.Loop.StallTurns}
	for {
		if err := ctx.Err(); err != nil {
			return r.finishCancelled(ctx)
		}
		conv, done, reason = r.turn(ctx, tools, limits, system, conv)
		if done {
			return reason
		}
		r.dur.noteCheckpoint(conv)
	}
}

// setup loads the thread's suspension (restoring the run state it saved), prepares the
// guard, the loop detector and the system prompt, and resumes parked work or re-emits open
// interrupts. done is true when the run has already ended.
func (r *Run) setup(ctx context.Context, tools *toolset) (conv []llm.Message, system string, done bool, reason EndReason) {
	// A thread parked on interrupts is resumed (or its interrupts re-emitted) first.
	susp, err := r.dur.suspension(ctx)
	if err != nil && ctx.Err() != nil {
		// Stopped (or disconnected) while the state was being read: that is a cancellation,
		// not a store failure.
		return nil, "", true, r.finishCancelled(ctx)
	}
	if err != nil {
		r.log.Error("load suspension", "err", err)
		r.seq.Fail("STORE_UNAVAILABLE", "The coordinator could not read this thread's saved state. Please try again.")
		return nil, "", true, ended(OutcomeError, "store")
	}
	inFlight := susp != nil && approvalsInFlight(susp)
	r.restoreState(susp, inFlight)
	armTools(r, tools)
	r.loops = r.fs.Loops(r.e.cfg.Loop)

	system, err = r.e.tools.systemPrompt(r.in, tools)
	if err != nil {
		r.log.Error("system prompt", "err", err)
		r.seq.Fail("INTERNAL", "The coordinator could not prepare the request.")
		return nil, "", true, ended(OutcomeError, "system prompt")
	}
	// The thread's compactions are replayed: the model goes on reading their summaries.
	// The history read from the store is the run's own copy: its text is dropped as it is
	// converted.
	conv = threadView(ctx, r)

	switch {
	case inFlight:
		// The run that acted on approvals stopped before it finished: settle what it did,
		// ask again about calls in doubt (approval.go); the conversation goes on with the
		// settled results.
		conv, done, reason = recoverApprovals(ctx, r, tools, susp)
		return conv, system, done, reason
	case susp != nil && len(r.in.Resume) == 0:
		// A plain run on a thread with open interrupts: ask again, do not continue silently.
		finishInterrupted(r, susp.Interrupts)
		return conv, system, true, ended(OutcomeInterrupt, "re-emitted")
	case susp != nil:
		conv, done, reason = resumeRun(ctx, r, tools, susp)
		return conv, system, done, reason
	case len(r.in.Resume) > 0:
		if dup, err := r.e.duplicateResume(ctx, r.ThreadID, r.in.Resume); err == nil && dup {
			// The same answers again: they were delivered once; nothing is sent twice.
			r.seq.Finish(r.ThreadID, r.RunID, &agui.Outcome{Type: agui.OutcomeSuccess}, nil)
			return conv, system, true, ended(OutcomeCompleted, "duplicate resume")
		}
		if ids, err := r.e.jobs.Expiry().Expired(ctx, r.ThreadID, r.in.Resume); err == nil && len(ids) > 0 {
			// Answers to interrupts that expired and were swept (their work cancelled):
			// refused as DESIGN §9 says, not run as a plain run.
			r.seq.Fail(hitl.CodeInterruptExpired, fmt.Sprintf("%d interrupt(s) expired and can no longer be answered: %s", len(ids), strings.Join(ids, ", ")))
			return conv, system, true, ended(OutcomeError, strings.ToLower(hitl.CodeInterruptExpired))
		}
		// Answers to interrupts this thread does not have: running the message as a new
		// turn would drop the answers silently, so the resume is refused, naming them.
		ids := resumeIDs(r.in.Resume)
		r.log.Warn("resume for unknown interrupts refused", "interrupt_ids", ids)
		r.seq.Fail(hitl.CodeInvalidResume, fmt.Sprintf("The resume answers %s %s, but this thread has no open interrupt to answer; send the message without resume to start a new turn.",
			pluralWord(len(ids), "interrupt", "interrupts"), strings.Join(ids, ", ")))
		return conv, system, true, ended(OutcomeError, strings.ToLower(hitl.CodeInvalidResume))
	}
	return conv, system, false, EndReason{}
}

// restoreState takes back what a suspension saved of the run: the tasks the thread
// started, always, and on a resume (or the recovery of approvals in flight) the failure
// state (counters, lessons, loop signatures, budget usage go on where they stopped).
func (r *Run) restoreState(susp *store.Suspension, inFlight bool) {
	if susp == nil || len(susp.State) == 0 {
		return
	}
	var st runState
	if err := json.Unmarshal(susp.State, &st); err != nil {
		r.log.Warn("suspension state unreadable; failure counters start afresh", "err", err)
		st = runState{}
	}
	r.e.tasks.restore(r.ThreadID, st.Tasks)
	keepDepth(r, st.Depth)
	if len(r.in.Resume) > 0 || inFlight {
		if r.in.Budget == nil && st.CallerBudget != nil {
			// The caller's budget goes on (a resume its caller sent brings a fresher one).
			r.in.Budget = st.CallerBudget
		}
		r.fs = st.State
		r.resetHardStop()
		r.trace.resume(r.fs.TraceParent, len(r.in.Resume))
	}
}

// turn runs one LLM turn and its tool round. done is true when the run has ended.
func (r *Run) turn(ctx context.Context, tools *toolset, limits failure.TurnLimits, system string, conv []llm.Message) ([]llm.Message, bool, EndReason) {
	conv, calls, done, reason := r.modelPart(ctx, tools, limits, system, conv)
	if done || len(calls) == 0 {
		return conv, done, reason
	}
	return r.toolRound(ctx, tools, conv, calls)
}

// modelPart is the model's side of a turn: the checks before it, the LLM call, and the
// checks of its reply. It returns the calls to run (none when the turn ends the run or is
// to be asked again).
func (r *Run) modelPart(ctx context.Context, tools *toolset, limits failure.TurnLimits, system string, conv []llm.Message) ([]llm.Message, []llm.ToolCall, bool, EndReason) {
	// Before the LLM call: the limits, a stall, and a token budget spent by an earlier
	// turn (a turn with tool calls has them refused by the guard instead).
	var before []failure.Failure
	if f := failure.DetectBeforeTurn(limits, r.fs.TurnState(time.Since(r.start))); f != nil {
		before = append(before, *f)
	}
	if f := budgetCheck(ctx, r); f != nil {
		before = append(before, *f)
	}
	if done, reason := r.handle(ctx, conv, before, nil); done {
		return conv, nil, true, reason
	}

	// Lessons and the pending corrective instruction are rendered once per turn (the
	// corrective is consumed); transient retries within the turn reuse the request.
	addendum, err := r.fs.Addendum()
	if err != nil {
		r.log.Error("render lessons", "err", err)
	}
	// What the model is sent is bounded (design/history.md): tool results cut, and older
	// turns summarised before the request would pass compact_at of the context window.
	// A budget warning goes into this turn's addendum once (design/spend.md).
	addendum = withNotes(addendum, r.sp.takeNotes())
	build := func(c []llm.Message) *llm.Request { return modelRequest(r, system, addendum, tools, c) }
	req := build(conv)
	if out, ok := compactBefore(ctx, r, req, conv); ok {
		conv, req = out, build(out)
	}
	r.fs.Iterations++
	// Tool work is pending only for the turn right after a round of refused calls, whose
	// text is held back until the turn is complete: a text-only reply is then no_progress
	// and is never shown. The model's next reply, after the corrective instruction,
	// stands as its answer.
	pending := r.workRefused
	r.workRefused = false
	r.holdText = pending
	turn, err := r.modelTurn(ctx, req)
	if err != nil {
		turn, conv, err = recoverOverflow(ctx, r, err, conv, build)
	}
	r.holdText = false
	if err != nil {
		return conv, nil, true, r.modelFailed(ctx, conv, err)
	}
	// The turn's usage was counted as it completed (account): a spent budget shows at the
	// next boundary, or as budget_exceeded refusals of this turn's calls.
	if f := failure.DetectTurn(turn.message, turn.completion, pending); f != nil {
		// Asked again (truncation) or with a corrective instruction (no progress): the
		// unusable turn stays out of the history and its calls are not run.
		done, reason := r.handle(ctx, conv, []failure.Failure{*f}, nil)
		return conv, nil, done, reason
	}
	r.fs.Recovered(failure.KindOutputTruncated, "")
	conv = append(conv, turn.message)
	if len(turn.message.ToolCalls) == 0 {
		r.seq.Finish(r.ThreadID, r.RunID, &agui.Outcome{Type: agui.OutcomeSuccess}, nil)
		return conv, nil, true, ended(OutcomeCompleted, "")
	}
	// The completed turn with its calls, stored before any call is sent: a replica taking
	// the run over settles them (takeover.go) rather than asking the model again, which
	// would send them a second time.
	r.dur.noteCheckpoint(conv)
	if err := r.elog.SaveWorkNow(ctx, r.dur.mayAct); err != nil {
		return conv, nil, true, r.finishCancelled(ctx)
	}
	// The turn's events are in the log before its calls go out (design/fencing.md).
	if err := r.elog.Flush(ctx); err != nil {
		return conv, nil, true, r.finishCancelled(ctx)
	}
	return conv, turn.message.ToolCalls, false, EndReason{}
}

// modelFailed ends the run after an LLM turn that failed, and returns why.
func (r *Run) modelFailed(ctx context.Context, conv []llm.Message, err error) EndReason {
	if r.cancelling(ctx) {
		return r.finishCancelled(ctx)
	}
	var decided *decidedError
	if errors.As(err, &decided) {
		// The policy gave up on the provider (retries spent, or a wait longer than it
		// sleeps); its baton.failure event is out already.
		return r.conclude(ctx, conv, decided.d, decided.f, nil)
	}
	r.log.Warn("model turn failed", append([]any{"err", err}, llm.LogAttrs(err)...)...)
	r.seq.Fail("MODEL_UNAVAILABLE", userMessage(err))
	return ended(OutcomeError, "model")
}

// toolRound runs the backend calls of a turn; frontend calls end the run for the
// application to answer.
func (r *Run) toolRound(ctx context.Context, tools *toolset, conv []llm.Message, calls []llm.ToolCall) ([]llm.Message, bool, EndReason) {
	var backend []llm.ToolCall
	var pending []string
	for _, c := range calls {
		if tools.isFrontend(c.Name) {
			pending = append(pending, c.ID)
			continue
		}
		backend = append(backend, c)
	}
	outcomes, sent, predicted := runCalls(ctx, r, tools, backend)
	conv, done, reason := r.afterTools(ctx, conv, backend, outcomes, sent, predicted, pending)
	if done {
		return conv, true, reason
	}
	if len(pending) > 0 {
		// Frontend tools: the application runs them and sends the results in the next run.
		r.seq.Finish(r.ThreadID, r.RunID, &agui.Outcome{Type: agui.OutcomeSuccess, PendingToolCallIDs: pending}, nil)
		return conv, true, ended(OutcomeCompleted, "frontend tools pending")
	}
	return conv, false, EndReason{}
}

// toolOutcome is what one tool call produced: a typed result (rendered once, into its
// Text), or interrupts to raise.
type toolOutcome struct {
	failure.ToolResult
	interrupts []store.Interrupt
	// asks: the interrupts are a sub-agent's question about the request (A2A
	// input-required raised to the user), an ambiguous_input failure.
	asks bool
}

// signalOutcome is a retry signal or refusal (DESIGN §7), rendered.
func signalOutcome(sig bridge.Signal) toolOutcome {
	return toolOutcome{ToolResult: failure.ToolResult{Text: bridge.Retry(sig), Tag: bridge.TagRetry, Code: sig.Code, Message: sig.Message}}
}

// taggedOutcome is a result with tag whose text bridge rendered.
func taggedOutcome(tag, text string) toolOutcome {
	return toolOutcome{ToolResult: failure.ToolResult{Text: text, Tag: tag}}
}

// afterTools records the tool outcomes in the conversation and runs the detectors over
// them (tool errors, policy refusals, loops by error signature, stalls). The failures
// found, with fails (the loops dispatch predicted), are decided by the policy, and a
// terminal decision ends the run: it wins over calls waiting for the user and over
// pending frontend tools. Otherwise, when some calls wait for the user, the run is
// suspended (persisted) and ends with the interrupt outcome. sent tells which calls were
// sent (not refused beforehand); pending are the frontend calls of the turn.
func (r *Run) afterTools(ctx context.Context, conv []llm.Message, calls []llm.ToolCall, outcomes []toolOutcome, sent []bool, fails []failure.Failure, pending []string) ([]llm.Message, bool, EndReason) {
	// The turn's tool spans end once the policy has decided about their results.
	defer r.trace.endToolSpans()
	if r.cancelling(ctx) {
		return conv, true, r.finishCancelled(ctx)
	}
	if err := r.fatalErr(); err != nil {
		r.seq.Fail("TOOL_FAILED", err.Error())
		return conv, true, ended(OutcomeError, "tool failed")
	}
	var open []store.Interrupt
	var results []failure.ToolResult
	r.loops.NextTurn()
	for i, c := range calls {
		if len(outcomes[i].interrupts) > 0 {
			open = append(open, outcomes[i].interrupts...)
			if outcomes[i].asks {
				// Reported, not handled: the agent's question is already the ask_user
				// action the policy would take.
				r.decide(*failure.DetectAgentQuestion(c.Name))
			}
			continue
		}
		res := outcomes[i].ToolResult
		results = append(results, res)
		// The model's copy is cut; the whole result is in the TOOL_CALL_RESULT event.
		conv = append(conv, llm.Message{Role: llm.RoleTool, ToolCallID: c.ID, Content: modelCopy(r, res.Text)})
		if f := failure.DetectToolResult(c.Name, res); f != nil && !sameToolError(fails, f) {
			fails = append(fails, *f)
		}
		if sent[i] {
			if f := r.loops.ObserveResult(c, res); f != nil {
				fails = append(fails, *f)
			}
		}
		if failure.IsProgress(res) {
			r.fs.Recovered(failure.KindToolError, c.Name)
		}
	}
	r.fs.ObserveRound(results)
	r.workRefused = len(open) == 0 && failure.PendingWork(results)
	if len(pending) > 0 && (len(open) > 0 || len(fails) > 0) {
		// The run may end here without the frontend's results, and a resumed run continues
		// from the stored history, which must answer every call.
		for _, id := range pending {
			conv = append(conv, llm.Message{Role: llm.RoleTool, ToolCallID: id, Content: orphanResult})
		}
	}
	if done, reason := r.handle(ctx, conv, fails, open); done {
		return conv, true, reason
	}
	if len(open) == 0 {
		return conv, false, EndReason{}
	}
	if err := suspendRun(ctx, r, conv, open); err != nil {
		r.log.Error("save suspension", "err", err)
		r.seq.Fail("STORE_UNAVAILABLE", "The coordinator could not save this conversation's question for later. Please try again.")
		return conv, true, ended(OutcomeError, "store")
	}
	finishInterrupted(r, open)
	return conv, true, ended(OutcomeInterrupt, "")
}

// sameToolError reports whether fails already holds a tool_error of f's tool: parallel
// calls of one tool in one turn spend one attempt of its retry budget, as they read one
// attempt count when their signals were rendered.
func sameToolError(fails []failure.Failure, f *failure.Failure) bool {
	if f.Kind != failure.KindToolError {
		return false
	}
	for _, g := range fails {
		if g.Kind == failure.KindToolError && g.Tool == f.Tool {
			return true
		}
	}
	return false
}

// resumeIDs returns the interrupt ids a resume names, each once, in order.
func resumeIDs(entries []agui.ResumeEntry) []string {
	seen := make(map[string]bool, len(entries))
	ids := make([]string, 0, len(entries))
	for _, en := range entries {
		if !seen[en.InterruptID] {
			seen[en.InterruptID] = true
			ids = append(ids, en.InterruptID)
		}
	}
	return ids
}

func pluralWord(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}

type turnResult struct {
	message llm.Message
	// completion is how the turn ended (finish reason, refusal, usage).
	completion *llm.Completion
}

// modelTurn streams one LLM turn into AG-UI events and returns the assistant message.
// Provider failures are classified (ClassifyModelError) and decided by the policy: a
// retry waits the decided backoff (the provider's Retry-After exactly) and streams the
// turn again; any other decision is returned as a *decidedError. Errors the policy does
// not handle (bad request, auth, cancellation) are returned as they are.
func (r *Run) modelTurn(ctx context.Context, req *llm.Request) (res turnResult, err error) {
	ctx, span := r.trace.modelSpan(ctx)
	spanModel(r, span)
	defer func(start time.Time) {
		// The model the turn ended on: a switch to a fallback within it is counted there.
		provider, model := onFallback(r)
		r.trace.endModelSpan(span, provider, model, start, res, err)
	}(time.Now())
	// The tool call ids of failed attempts are never used again in this turn
	// (design/model-retries.md).
	var failed map[string]bool
	for attempt := 1; ; attempt++ {
		res, err := r.journaledTurn(ctx, req, failed, attempt)
		if err != nil && len(res.message.ToolCalls) > 0 {
			if failed == nil {
				failed = map[string]bool{}
			}
			for _, c := range res.message.ToolCalls {
				failed[c.ID] = true
			}
		}
		if err == nil {
			r.fs.Recovered(failure.KindTransientProvider, "")
			return res, nil
		}
		if r.cancelling(ctx) {
			return turnResult{}, err
		}
		f := failure.ClassifyModelError(err)
		if f == nil {
			return turnResult{}, err
		}
		d := r.decide(*f)
		r.log.Warn("model call failed", append([]any{"err", err, "action", d.Action}, llm.LogAttrs(err)...)...)
		traceModelRetry(span, d)
		// context_overflow is retried by the caller, with the history compacted
		// (recoverOverflow): the same request would be refused again. Any other failure
		// the policy does not retry goes to the next model of the fallback chain, if any.
		if d.Action != failure.ActionRetry || f.Kind == failure.KindContextOverflow {
			if f.Kind != failure.KindContextOverflow && fallBack(r, span, *f) {
				continue
			}
			return turnResult{}, &decidedError{d: d, f: *f, err: err}
		}
		t := time.NewTimer(d.Wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return turnResult{}, ctx.Err()
		case <-t.C:
		}
	}
}

// streamTurn streams one attempt at a model turn. Text is relayed as it arrives; tool calls
// are held back until the attempt has completed (design/model-retries.md), so that a broken
// attempt never leaves a half-streamed call in the client's history, and a retry never
// appends to one. avoid holds ids of earlier failed attempts, which a call may not reuse. On
// error the result carries the calls seen so far (never streamed).
func (r *Run) streamTurn(ctx context.Context, req *llm.Request, avoid map[string]bool) (turnResult, error) {
	var (
		textID   string
		text     textParts
		tcs      turnCalls
		done     *llm.Completion
		streamOK bool
	)
	closeText := func() {
		if textID != "" {
			r.emit(&agui.TextMessageEnd{MessageID: textID})
			textID = ""
		}
	}
	var streamErr error
	// No model call while this replica cannot be sure it still owns the run.
	if err := r.dur.mayAct(ctx); err != nil {
		return turnResult{}, err
	}
	ctx, stop := r.withRunCancel(ctx)
	defer stop()
	item := r.scope.Track(cancel.KindLLM, "model")
	item.Arm("", func(context.Context, string) error { stop(); return nil })
	defer item.Release()
	for d, err := range runModel(r).Stream(ctx, req) {
		if err != nil {
			streamErr = err
			break
		}
		switch {
		case d.Text != "" && r.holdText:
			text.add(d.Text)
		case d.Text != "":
			if textID == "" {
				textID = newID("msg")
				r.emit(&agui.TextMessageStart{MessageID: textID, Role: "assistant"})
			}
			text.add(d.Text)
			r.emit(&agui.TextMessageContent{MessageID: textID, Delta: d.Text})
		case d.ToolCall != nil:
			if tcs.add(d.ToolCall, textID, func(id string) bool { return avoid[id] || usedCallID(req.Messages, tcs.calls, id) }) {
				closeText()
			}
		case d.Done != nil:
			done = d.Done
			streamOK = true
			if d.Done.Refusal != "" && text.Len() == 0 && !r.holdText {
				// Show the refusal to the user rather than ending silently.
				textID = r.startText(d.Done.Refusal)
				text.add(d.Done.Refusal)
			}
		}
	}
	closeText()
	calls := tcs.done()
	streamErr = attemptErr(ctx, streamErr, streamOK)
	if streamErr != nil {
		// The attempt's calls were never streamed: the client's history has none of them.
		return turnResult{message: llm.Message{Role: llm.RoleAssistant, ToolCalls: calls}}, streamErr
	}
	content := text.String()
	if r.holdText && len(calls) > 0 && content != "" {
		// Held text (see Run.holdText) is shown once the turn proved to call tools.
		r.emit(&agui.TextMessageEnd{MessageID: r.startText(content)})
	}
	r.streamCalls(calls, tcs.parents)
	return turnResult{message: llm.Message{Role: llm.RoleAssistant, Content: content, ToolCalls: calls}, completion: done}, nil
}

// streamCalls streams the tool calls of a completed attempt (each after the text it
// followed, parents[i]) and gives calls without arguments an empty object.
func (r *Run) streamCalls(calls []llm.ToolCall, parents []string) {
	for i, c := range calls {
		r.emit(&agui.ToolCallStart{ToolCallID: c.ID, ToolCallName: c.Name, ParentMessageID: parents[i]})
		if c.Arguments != "" {
			r.emit(&agui.ToolCallArgs{ToolCallID: c.ID, Delta: c.Arguments})
		}
		r.emit(&agui.ToolCallEnd{ToolCallID: c.ID})
		if c.Arguments == "" {
			calls[i].Arguments = "{}"
		}
	}
}

// startText starts an assistant text message holding text and returns its id; the caller
// ends it.
func (r *Run) startText(text string) string {
	id := newID("msg")
	r.emit(&agui.TextMessageStart{MessageID: id, Role: "assistant"})
	r.emit(&agui.TextMessageContent{MessageID: id, Delta: text})
	return id
}

// journaledTurn is streamTurn between its intent and its outcome in the journal. A model
// call has no effect outside the run, so it is made even when its intent cannot be
// recorded; a turn the model answers itself (LocalModel) is not journaled.
func (r *Run) journaledTurn(ctx context.Context, req *llm.Request, avoid map[string]bool, attempt int) (turnResult, error) {
	if answersLocally(r, req) {
		// Nothing outside the run to journal (LocalModel).
		res, err := r.streamTurn(ctx, req, avoid)
		accountCall(ctx, r, res.completion)
		return res, err
	}
	s, _ := r.dur.intent(store.StepModelCall, "model", "", attempt, "")
	res, err := r.streamTurn(ctx, req, avoid)
	end := store.StepEnd{Outcome: store.StepOK}
	switch {
	case err != nil && r.cancelling(ctx):
		end.Outcome = "cancelled"
	case err != nil:
		end.Outcome = store.StepError
		if f := failure.ClassifyModelError(err); f != nil {
			end.FailureKind = string(f.Kind)
		}
	}
	end.Detail = accountCall(ctx, r, res.completion)
	s.End(end)
	return res, err
}
