package llm

import "strings"

// ErrContextOverflow is a request the provider refused as longer than the model's context
// window: OpenAI's context_length_exceeded, Anthropic's "prompt is too long" (both an HTTP
// 400 invalid request). Not transient: the same request fails again; a shorter one (the
// history compacted) or a model with a larger window may not.
const ErrContextOverflow ErrorKind = "context_overflow"

// overflowCodes are the error codes and message fragments by which providers say that a
// request does not fit the model's context window: OpenAI (and compatible servers) answer
// code "context_length_exceeded" and a message "This model's maximum context length is N
// tokens..."; Anthropic answers type "invalid_request_error" with "prompt is too long: N
// tokens > M maximum"; some compatible servers say "context window" or "too many tokens".
var overflowCodes = []string{
	"context_length_exceeded",
	"maximum context length",
	"prompt is too long",
	"exceeds the context window",
	"context window exceeded",
	"input is too long",
	"too many tokens",
}

// IsContextOverflow reports whether a provider's 400 (or 413) answer, with its error code
// and message, refuses the request as too long for the model's context.
func IsContextOverflow(status int, code, message string) bool {
	if status != 400 && status != 413 {
		return false
	}
	text := strings.ToLower(code + " " + message)
	for _, c := range overflowCodes {
		if strings.Contains(text, c) {
			return true
		}
	}
	return false
}

// AsContextOverflow turns e, a provider's answer that IsContextOverflow, into an
// ErrContextOverflow with a message for users; other errors are returned as they are.
func AsContextOverflow(e *Error, code, message string) *Error {
	if e == nil || !IsContextOverflow(e.Status, code, message) {
		return e
	}
	e.Kind = ErrContextOverflow
	e.Message = "the conversation is longer than the model's context window"
	return e
}
