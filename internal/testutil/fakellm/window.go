package fakellm

import "fmt"

// Chars counts the characters of a request as a window is enforced on them: every
// message's content, tool call arguments and ids, and the tools' names and descriptions.
func (r Request) Chars() int {
	n := 0
	for _, m := range r.Messages {
		n += len([]rune(m.Content)) + len(m.ToolCallID)
		for _, c := range m.ToolCalls {
			n += len(c.ID) + len(c.Function.Name) + len([]rune(c.Function.Arguments))
		}
	}
	for _, t := range r.Tools {
		n += len(t.Function.Name) + len([]rune(t.Function.Description))
	}
	return n
}

// TooLong is OpenAI's answer to a request longer than the model's context: HTTP 400,
// code context_length_exceeded.
func TooLong(window, got int) Reply {
	return Reply{Status: 400, Code: "context_length_exceeded", Text: fmt.Sprintf(
		"This model's maximum context length is %d tokens. However, your messages resulted in %d tokens. Please reduce the length of the messages.", window, got)}
}

// WithWindow enforces a context window of chars characters (Request.Chars) in front of
// next: a longer request gets TooLong, as OpenAI answers it.
func WithWindow(chars int, next Handler) Handler {
	return func(req Request) Reply {
		if n := req.Chars(); n > chars {
			return TooLong(chars, n)
		}
		return next(req)
	}
}
