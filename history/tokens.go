package history

import (
	"encoding/json"

	"github.com/baton-dev/baton/llm"
)

// The token estimate: no tokenizer is shipped (providers differ, and the count is only
// needed to decide when to compact), so a request is measured by its bytes: about four
// bytes of English or JSON per token, plus a few tokens of framing per message. Bytes, not
// characters: text outside ASCII takes more bytes per character and, with common
// tokenizers, more tokens too, so the estimate errs towards compacting early.
const (
	bytesPerToken    = 4
	tokensPerMessage = 4
)

// Tokens estimates the tokens of text.
func Tokens(text string) int { return (len(text) + bytesPerToken - 1) / bytesPerToken }

// MessageTokens estimates the tokens one message takes in a request.
func MessageTokens(m llm.Message) int {
	n := len(m.Content) + len(m.ToolCallID)
	for _, c := range m.ToolCalls {
		n += len(c.ID) + len(c.Name) + len(c.Arguments)
	}
	return tokensPerMessage + (n+bytesPerToken-1)/bytesPerToken
}

// MessagesTokens estimates the tokens of msgs.
func MessagesTokens(msgs []llm.Message) int {
	n := 0
	for _, m := range msgs {
		n += MessageTokens(m)
	}
	return n
}

// ToolsTokens estimates the tokens the tools array takes in a request.
func ToolsTokens(tools []llm.Tool) int {
	n := 0
	for _, t := range tools {
		n += len(t.Name) + len(t.Description)
		if b, err := json.Marshal(t.Parameters); err == nil {
			n += len(b)
		}
	}
	return (n + bytesPerToken - 1) / bytesPerToken
}

// RequestTokens estimates the tokens of a request: its messages and its tools.
func RequestTokens(req *llm.Request) int {
	return MessagesTokens(req.Messages) + ToolsTokens(req.Tools)
}
