// Package mcpserver serves Baton as an MCP server (DESIGN §9d) with go-sdk's server: the
// streamable HTTP transport (mounted at /mcp by package server) and stdio
// (coordinator --mcp-stdio).
//
// Every tools/call is a run of Baton's engine on a thread of its own. The coordinator tool
// runs the whole model loop and answers with the run's final text; an agent tool runs a run
// whose single step is one call of that A2A agent, with no model in between, and answers
// with the agent's outcome (completed: its text; failed, rejected, canceled and the other
// tags of the closed set: isError with the tag and the agent's words). The run's events
// become notifications/progress when the client sent a progressToken, coalesced to at most
// ten a second. A cancelled call (notifications/cancelled, or the call's stream closed)
// stops the run and waits until its downstream cancels are confirmed. An interrupt of the
// run becomes elicitation/create to a client that declared the capability, answered once;
// another client gets the question with structuredContent {"status":"input_required",
// "interruptId",…} and answers by calling the tool again with "resume".
//
// The package never imports the engine or the store: it is given an [Engine], which
// cmd/coordinator adapts from coordinator.Engine. design/mcp-server.md has the mapping.
package mcpserver
