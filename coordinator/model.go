package coordinator

import (
	"context"
	"errors"

	"github.com/baton-dev/baton/llm"
)

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
