package dispatch

import "context"

// Kind is the kind of tool a call names, which says what runs it.
type Kind string

// The kinds of tool.
const (
	// Agent: a sub-agent, delegated to over A2A.
	Agent Kind = "agent"
	// MCP: a tool of a connected MCP server.
	MCP Kind = "mcp"
	// AskUser: the built-in question to the user.
	AskUser Kind = "ask_user"
	// Other: anything else (a tool of a server that is down, an unknown tool).
	Other Kind = "other"
)

// Router is the handler at the end of a chain: it sends each call to the handler of its
// tool's kind.
type Router[O any] struct {
	// Kind is the kind of the tool named name.
	Kind func(name string) Kind
	// Handlers holds a handler per kind; a call of a kind without one goes to Other's.
	Handlers map[Kind]Handler[O]
}

// Handle runs c with the handler of its tool's kind.
func (rt Router[O]) Handle(ctx context.Context, c Call) (O, error) {
	h, ok := rt.Handlers[rt.Kind(c.Name)]
	if !ok {
		h = rt.Handlers[Other]
	}
	return h(ctx, c)
}
