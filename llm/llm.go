// Package llm defines the model interface the run engine talks to, and the
// provider-neutral message, tool and streaming types.
//
// Design note: a model turn is an iter.Seq2[Delta, error]. Providers translate
// their wire streams into three kinds of delta (text, tool-call fragment, done)
// so the engine can forward text to the frontend as it arrives and still see
// exactly one terminal outcome per turn: either a Done delta or an error. SDK
// retries are disabled in every provider; errors are classified into *Error so
// the engine's failure policy decides what to retry and for how long.
package llm

import (
	"context"
	"iter"
)

// Role is the author of a message in the conversation.
type Role string

// The roles a message can have. The system prompt, when present, is the first
// message with RoleSystem.
const (
	RoleSystem    Role = "system"
	RoleUser      Role = "user"
	RoleAssistant Role = "assistant"
	RoleTool      Role = "tool"
)

// Message is one entry of the conversation sent to the model.
type Message struct {
	Role    Role
	Content string
	// ToolCalls holds the calls an assistant message made.
	ToolCalls []ToolCall
	// ToolCallID links a RoleTool message to the call it answers.
	ToolCallID string
}

// ToolCall is a complete tool call made by the model.
type ToolCall struct {
	ID   string
	Name string
	// Arguments is the JSON object text the model produced.
	Arguments string
}

// Tool is a function offered to the model.
type Tool struct {
	Name        string
	Description string
	// Parameters is a JSON Schema object describing the arguments.
	Parameters map[string]any
}

// Request is the input of one model turn.
type Request struct {
	// Messages is the conversation; the system prompt is Messages[0] with RoleSystem.
	Messages []Message
	Tools    []Tool
}

// Delta is one streamed piece of a model turn. Exactly one of the fields is set.
type Delta struct {
	// Text is an assistant text delta.
	Text string
	// ToolCall is a tool-call delta.
	ToolCall *ToolCallDelta
	// Done is the last delta of a successful turn.
	Done *Completion
}

// ToolCallDelta is a fragment of a tool call. The first delta for an Index
// carries ID and Name (non-empty); later ones only Arguments fragments.
type ToolCallDelta struct {
	Index     int
	ID        string
	Name      string
	Arguments string
}

// Finish reasons reported in Completion.FinishReason.
const (
	FinishStop          = "stop"
	FinishToolCalls     = "tool_calls"
	FinishLength        = "length"
	FinishContentFilter = "content_filter"
)

// Completion describes how a successful turn ended.
type Completion struct {
	// FinishReason is one of "stop", "tool_calls", "length", "content_filter".
	FinishReason string
	// Refusal is the model's refusal text, if it refused.
	Refusal string
	Usage   Usage
	// Model names the model that answered when a Chain chose it ("" from a plain
	// provider: the configured model), so that its usage is priced with its prices.
	Model string
}

// Usage counts the tokens of one turn, as reported by the provider.
type Usage struct {
	InputTokens  int
	OutputTokens int
}

// Model streams one turn.
//
// The iterator yields deltas, then either a Done delta or an error (then
// stops). Cancelling ctx aborts the HTTP request promptly and ends the stream
// with ctx's error.
type Model interface {
	Stream(ctx context.Context, req *Request) iter.Seq2[Delta, error]
}
