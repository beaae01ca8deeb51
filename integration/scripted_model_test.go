package integration

import (
	"fmt"

	"github.com/baton-dev/baton/internal/testutil/fakellm"
	"github.com/baton-dev/baton/llm"
)

// What the scripted fake models read off a request, and the turn they answer with most.

// offeredTools is the set of tools the request offers the model.
func offeredTools(req fakellm.Request) map[string]bool {
	tools := map[string]bool{}
	for _, n := range req.ToolNames() {
		tools[n] = true
	}
	return tools
}

// resultsSoFar counts the tool results in the request's conversation.
func resultsSoFar(req fakellm.Request) int {
	results := 0
	for _, m := range req.Messages {
		if m.Role == "tool" {
			results++
		}
	}
	return results
}

// callTool is a model turn that calls the tool name with args (JSON), under a call id unique
// across runs.
func callTool(name, args string) fakellm.Reply {
	return fakellm.Reply{ToolCalls: []llm.ToolCall{{ID: fmt.Sprintf("call_%d", callSeq.Add(1)), Name: name, Arguments: args}}}
}
