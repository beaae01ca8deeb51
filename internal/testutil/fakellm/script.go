package fakellm

import (
	"encoding/json"
	"fmt"
	"sync"

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
