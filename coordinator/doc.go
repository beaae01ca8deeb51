// Package coordinator is Baton's run engine: the LLM loop, tool dispatch to A2A sub-agents,
// MCP tools, ask_user and AG-UI frontend tools, the failure model, and the life cycle of runs
// (start, suspension on interrupts, resume, cancellation). design/overview.md explains the
// boundaries; "DESIGN §n" in comments means section n of design/contract.md.
//
// # Runs
//
// A run's execution is detached from the HTTP request that started it. The request only
// streams the run's events (see Stream.Next); a client that goes away cancels the run through
// Run.Cancel, and the run then cancels everything it has in flight downstream (A2A
// CancelTask on a context of its own, MCP calls through their contexts, the LLM stream)
// before it ends. One run per thread may be active at a time.
//
// # Tool outcomes
//
// Protocol packages report; the engine decides. mcpclient returns a typed Result and a2a a
// Result or a classified error; the engine applies the server's on_tool_error and the run's
// retry budget for the tool, and renders the outcome once, through package bridge, into the
// tagged string that both the model and TOOL_CALL_RESULT get. Retry signals name only what
// is useful now (the tool just called, ask_user, the closest names for an unknown one).
//
// # Failure state
//
// Budgets, strikes, lessons and loop signatures belong to the run (failure.State): never to
// the process, never shared between runs or principals. They are saved with a suspension
// and restored on resume, with the A2A tasks the thread started (a task_id continues only
// one of those).
//
// # Suspension
//
// A run that needs the user ends with interrupts; the suspension (history, open calls with
// their protocol handles, failure state) goes to the store, so that a restart loses nothing
// the remote side keeps. See design/suspension.md.
package coordinator
