// Package dispatch runs one tool call of a run: the call's typed value in, its typed outcome
// out, through one named chain of the steps every call shares (fence → trace → journal, then
// the validation of its arguments) to the handler of its tool's kind (a sub-agent, an MCP
// tool, the user's question, anything else).
//
// The package knows nothing of the engine: it declares what it needs of a run (Run: the
// fencing check, the call's span, its journal record) and the engine supplies it, with its
// own outcome type and handlers. design/dispatch.md describes the chain.
package dispatch
