package coordinator

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/baton-dev/baton/agui"
	"github.com/baton-dev/baton/cancel"
	"github.com/baton-dev/baton/llm"
)

// Retry settings for transient provider errors (DESIGN §6: budget 3, backoff capped at 30 s,
// Retry-After honoured exactly, a longer wait reported instead of slept).
const (
	modelRetryBudget = 3
	backoffBase      = 500 * time.Millisecond
	backoffCap       = 30 * time.Second
)

type turnResult struct {
	message llm.Message
	finish  string
}

// modelTurn streams one LLM turn into AG-UI events and returns the assistant message.
// Transient provider errors are retried with backoff.
func (r *Run) modelTurn(ctx context.Context, req *llm.Request) (turnResult, error) {
	for attempt := 1; ; attempt++ {
		res, err := r.streamTurn(ctx, req)
		if err == nil {
			return res, nil
		}
		var perr *llm.Error
		if !errors.As(err, &perr) || !perr.Transient() || attempt > modelRetryBudget || ctx.Err() != nil {
			return turnResult{}, err
		}
		wait := perr.RetryAfter
		if wait == 0 {
			wait = backoff(attempt)
		}
		if wait > backoffCap {
			return turnResult{}, &llm.Error{Kind: perr.Kind, Status: perr.Status, RetryAfter: perr.RetryAfter,
				Message: fmt.Sprintf("The language model asked us to wait %s before retrying, which is longer than this coordinator waits.", perr.RetryAfter.Round(time.Second)), Err: err}
		}
		r.emit(&agui.Custom{Name: "baton.failure", Value: map[string]any{
			"kind": "transient_provider", "action": "retry", "attempt": attempt,
			"explanation": fmt.Sprintf("The language model is temporarily unavailable (%s); retrying in %s.", perr.Kind, wait.Round(time.Millisecond)),
		}})
		if m := r.e.cfg.Metrics; m != nil {
			m.Retry("transient_provider")
		}
		r.log.Warn("model error, retrying", "kind", perr.Kind, "status", perr.Status, "attempt", attempt, "wait", wait)
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return turnResult{}, ctx.Err()
		case <-t.C:
		}
	}
}

// backoff is exponential with full jitter, capped.
func backoff(attempt int) time.Duration {
	d := backoffBase << (attempt - 1)
	if d > backoffCap || d <= 0 {
		d = backoffCap
	}
	return d/2 + rand.N(d/2+1)
}

func (r *Run) streamTurn(ctx context.Context, req *llm.Request) (turnResult, error) {
	var (
		textID   string
		text     []byte
		calls    []llm.ToolCall
		byIndex  = map[int]int{}
		finish   string
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
				if id == "" {
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
			finish = d.Done.FinishReason
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
	for _, c := range calls {
		r.emit(&agui.ToolCallEnd{ToolCallID: c.ID})
	}
	if streamErr != nil {
		return turnResult{}, streamErr
	}
	if !streamOK && ctx.Err() != nil {
		return turnResult{}, ctx.Err()
	}
	for i := range calls {
		if calls[i].Arguments == "" {
			calls[i].Arguments = "{}"
		}
	}
	return turnResult{message: llm.Message{Role: llm.RoleAssistant, Content: string(text), ToolCalls: calls}, finish: finish}, nil
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
