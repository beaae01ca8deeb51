package coordinator

import (
	"context"
	"errors"
	"time"

	"github.com/baton-dev/baton/agui"
	"github.com/baton-dev/baton/cancel"
	"github.com/baton-dev/baton/llm"
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
func (r *Run) modelTurn(ctx context.Context, req *llm.Request) (turnResult, error) {
	for {
		res, err := r.streamTurn(ctx, req)
		if err == nil {
			r.fs.Recovered(KindTransientProvider, "")
			return res, nil
		}
		if r.cancelling(ctx) {
			return turnResult{}, err
		}
		f := ClassifyModelError(err)
		if f == nil {
			return turnResult{}, err
		}
		d := r.decide(*f)
		if d.Action != ActionRetry {
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

func (r *Run) streamTurn(ctx context.Context, req *llm.Request) (turnResult, error) {
	var (
		textID   string
		text     []byte
		calls    []llm.ToolCall
		byIndex  = map[int]int{}
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
	ctx, stop := context.WithCancel(ctx)
	defer stop()
	item := r.scope.Track(cancel.KindLLM, "model")
	item.Arm("", func(context.Context, string) error { stop(); return nil })
	defer item.Release()
	for d, err := range r.e.cfg.Model.Stream(ctx, req) {
		if err != nil {
			streamErr = err
			break
		}
		switch {
		case d.Text != "":
			if textID == "" {
				textID = newID("msg")
				r.emit(&agui.TextMessageStart{MessageID: textID, Role: "assistant"})
			}
			text = append(text, d.Text...)
			r.emit(&agui.TextMessageContent{MessageID: textID, Delta: d.Text})
		case d.ToolCall != nil:
			tc := d.ToolCall
			i, seen := byIndex[tc.Index]
			if !seen {
				id := tc.ID
				if id == "" || usedCallID(req.Messages, calls, id) {
					// Some OpenAI-compatible servers number calls per turn (call_0 every
					// time); a repeated id would merge two calls in the client.
					id = newID("call")
				}
				calls = append(calls, llm.ToolCall{ID: id, Name: tc.Name})
				i = len(calls) - 1
				byIndex[tc.Index] = i
				parent := textID
				closeText()
				r.emit(&agui.ToolCallStart{ToolCallID: id, ToolCallName: tc.Name, ParentMessageID: parent})
			}
			if tc.Arguments != "" {
				calls[i].Arguments += tc.Arguments
				r.emit(&agui.ToolCallArgs{ToolCallID: calls[i].ID, Delta: tc.Arguments})
			}
		case d.Done != nil:
			done = d.Done
			streamOK = true
			if d.Done.Refusal != "" && len(text) == 0 {
				// Show the refusal to the user rather than ending silently.
				textID = newID("msg")
				r.emit(&agui.TextMessageStart{MessageID: textID, Role: "assistant"})
				r.emit(&agui.TextMessageContent{MessageID: textID, Delta: d.Done.Refusal})
				text = append(text, d.Done.Refusal...)
			}
		}
	}
	closeText()
	return r.endTurn(ctx, calls, string(text), done, streamOK, streamErr)
}

// endTurn closes the turn's tool calls on the stream and builds the turn's result: its
// error when the stream failed or ended without a completion.
func (r *Run) endTurn(ctx context.Context, calls []llm.ToolCall, text string, done *llm.Completion, streamOK bool, streamErr error) (turnResult, error) {
	for _, c := range calls {
		r.emit(&agui.ToolCallEnd{ToolCallID: c.ID})
	}
	if streamErr != nil {
		return turnResult{}, streamErr
	}
	if !streamOK {
		if ctx.Err() != nil {
			return turnResult{}, ctx.Err()
		}
		return turnResult{}, llm.ErrNoCompletion
	}
	for i := range calls {
		if calls[i].Arguments == "" {
			calls[i].Arguments = "{}"
		}
	}
	return turnResult{message: llm.Message{Role: llm.RoleAssistant, Content: text, ToolCalls: calls}, completion: done}, nil
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
