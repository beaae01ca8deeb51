package fakellm

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"sync"

	"github.com/baton-dev/baton/internal/testutil/llmtest"
	"github.com/baton-dev/baton/llm"
)

// Sequence answers the n-th request with replies[n]; once the replies are
// used up, the last one repeats. With no replies it answers "ok".
func Sequence(replies ...Reply) Handler {
	var (
		mu sync.Mutex
		n  int
	)
	return func(Request) Reply {
		if len(replies) == 0 {
			return Reply{Text: "ok"}
		}
		mu.Lock()
		defer mu.Unlock()
		i := min(n, len(replies)-1)
		n++
		return replies[i]
	}
}

// ToolThenEcho calls tool with args (marshalled to JSON) when the last
// message is not a tool result, and replies "RESULT: "+content once the last
// message is the tool's result. The call id is "call_<n>", n being the number
// of assistant messages in the request, so it is unique within a thread.
func ToolThenEcho(tool string, args any) Handler {
	argText := "{}"
	if args != nil {
		b, err := json.Marshal(args)
		if err != nil {
			panic(fmt.Sprintf("fakellm: ToolThenEcho args: %v", err))
		}
		argText = string(b)
	}
	return func(req Request) Reply {
		last := req.Last()
		if last.Role == "tool" {
			return Reply{Text: "RESULT: " + last.Content}
		}
		n := 0
		for _, m := range req.Messages {
			if m.Role == "assistant" {
				n++
			}
		}
		return Reply{ToolCalls: []llm.ToolCall{{
			ID:        fmt.Sprintf("call_%d", n),
			Name:      tool,
			Arguments: argText,
		}}}
	}
}

// FromModel answers with the turn an llm.Model produces for the decoded
// request, e.g. the scripted demo model, so a whole demo conversation runs
// through the real openai provider. A model error becomes a 500 reply.
func FromModel(m llm.Model) Handler {
	return func(req Request) Reply {
		msg, done, err := llmtest.Collect(m.Stream(context.Background(), req.LLMRequest()))
		if err != nil {
			return Reply{Status: http.StatusInternalServerError, Text: err.Error()}
		}
		return Reply{
			Text:         msg.Content,
			ToolCalls:    msg.ToolCalls,
			FinishReason: done.FinishReason,
			Refusal:      done.Refusal,
			Usage:        &done.Usage,
		}
	}
}

// LLMRequest converts the decoded wire request into an llm.Request.
func (r Request) LLMRequest() *llm.Request {
	out := &llm.Request{}
	for _, m := range r.Messages {
		lm := llm.Message{Role: llm.Role(m.Role), Content: m.Content, ToolCallID: m.ToolCallID}
		if lm.Role == "developer" {
			lm.Role = llm.RoleSystem
		}
		for _, tc := range m.ToolCalls {
			lm.ToolCalls = append(lm.ToolCalls, llm.ToolCall{ID: tc.ID, Name: tc.Function.Name, Arguments: tc.Function.Arguments})
		}
		out.Messages = append(out.Messages, lm)
	}
	for _, t := range r.Tools {
		out.Tools = append(out.Tools, llm.Tool{Name: t.Function.Name, Description: t.Function.Description, Parameters: t.Function.Parameters})
	}
	return out
}
