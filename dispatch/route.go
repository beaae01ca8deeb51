package dispatch

import "context"

// Kind is the kind of tool a call names, which says what runs it.
type Kind int

// The kinds of tool.
const (
	// Other: anything else (a tool of a server that is down, an unknown tool).
	Other Kind = iota
	// Agent: a sub-agent, delegated to over A2A.
	Agent
	// MCP: a tool of a connected MCP server.
	MCP
	// AskUser: the built-in question to the user.
	AskUser
	// Kinds is the number of kinds (the length of Router.Handlers).
	Kinds
)

var kindNames = [Kinds]string{Other: "other", Agent: "agent", MCP: "mcp", AskUser: "ask_user"}

// String names the kind (agent, mcp, ask_user, other).
func (k Kind) String() string {
	if k < 0 || k >= Kinds {
		return "unknown"
	}
	return kindNames[k]
}

// Router is the handler at the end of a chain: it sends each call to the handler of its
// tool's kind in the call's run (whose toolset knows its tools). It holds its handlers in
// an array, not a map: one lookup per call.
type Router[R, O any] struct {
	// Kind is the kind of the tool named name in run.
	Kind func(run R, name string) Kind
	// Handlers holds a handler per kind; a call of a kind without one goes to Other's.
	Handlers [Kinds]Handler[R, O]
}

// Handler returns the router as the handler at the end of a chain.
func (rt *Router[R, O]) Handler() Handler[R, O] {
	return func(ctx context.Context, run R, c Call) (O, error) {
		k := rt.Kind(run, c.Name)
		if k < 0 || k >= Kinds || rt.Handlers[k] == nil {
			k = Other
		}
		return rt.Handlers[k](ctx, run, c)
	}
}
