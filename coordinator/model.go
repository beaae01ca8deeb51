package coordinator

import (
	"context"
	"errors"
	"time"

	"github.com/baton-dev/baton/agui"
	"github.com/baton-dev/baton/cancel"
	"github.com/baton-dev/baton/failure"
	"github.com/baton-dev/baton/llm"
	"github.com/baton-dev/baton/store"
)

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
	r.meter().spanModel(span)
	defer func(start time.Time) {
		// The model the turn ended on: a switch to a fallback within it is counted there.
		provider, model := r.meter().onFallback()
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
			if f.Kind != failure.KindContextOverflow && r.meter().fallback(span, *f) {
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
	for d, err := range r.meter().model().Stream(ctx, req) {
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

// userMessage turns a model error into text for the user, without internal detail.
func userMessage(err error) string {
	var perr *llm.Error
	if errors.As(err, &perr) {
		if perr.Message != "" && perr.Kind != llm.ErrBadRequest {
			return perr.Message
		}
		switch perr.Kind {
		case llm.ErrRateLimited:
			return "The language model is rate limited right now. Please try again shortly."
		case llm.ErrAuth:
			return "The coordinator could not authenticate with the language model provider."
		case llm.ErrBadRequest:
			return "The language model rejected the request."
		}
	}
	return "The language model is unavailable right now. Please try again."
}

// usedCallID reports whether id already names a tool call of the conversation or of the
// turn being streamed.
func usedCallID(history []llm.Message, turn []llm.ToolCall, id string) bool {
	for _, c := range turn {
		if c.ID == id {
			return true
		}
	}
	for _, m := range history {
		if m.ToolCallID == id {
			return true
		}
		for _, c := range m.ToolCalls {
			if c.ID == id {
				return true
			}
		}
	}
	return false
}

// startText starts an assistant text message holding text and returns its id; the caller
// ends it.
func (r *Run) startText(text string) string {
	id := newID("msg")
	r.emit(&agui.TextMessageStart{MessageID: id, Role: "assistant"})
	r.emit(&agui.TextMessageContent{MessageID: id, Delta: text})
	return id
}

// attemptErr is the error of a stream that ended with streamErr, or without completing
// (streamOK false): the context's error when it was cancelled, else llm.ErrNoCompletion.
func attemptErr(ctx context.Context, streamErr error, streamOK bool) error {
	if streamErr != nil || streamOK {
		return streamErr
	}
	if ctx.Err() != nil {
		return ctx.Err()
	}
	return llm.ErrNoCompletion
}

// journaledTurn is streamTurn between its intent and its outcome in the journal. A model
// call has no effect outside the run, so it is made even when its intent cannot be
// recorded.
func (r *Run) journaledTurn(ctx context.Context, req *llm.Request, avoid map[string]bool, attempt int) (turnResult, error) {
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
	end.Detail = r.meter().account(ctx, res.completion)
	s.End(end)
	return res, err
}
