// Package mcpclient is Baton's MCP client side: it connects the configured
// MCP servers (stdio and streamable HTTP), exposes their tools to the LLM as
// one catalog named "<server>__<tool>", and runs tool calls, reporting every
// outcome as a typed Result. It reports; the engine decides: what the model
// reads, retry budgets and on_tool_error are not this package's business.
//
// # Connections
//
// Each server has one go-sdk client and at most one live session. New
// connects all servers in parallel; a server that cannot be reached is logged
// and left without tools, and Tools retries it in the background (with a
// growing pause between attempts), so that a server started after Baton joins
// the catalog at the next run. A session that ends (a stdio server that
// exited, an HTTP session the server forgot) is noticed by a watcher and
// replaced at the next call.
//
// # Calls
//
// A call is checked against the tool's input schema before anything is sent.
// Failures are classified:
//   - the call never reached the server (connection refused, session
//     unknown, server process already gone): reconnect with bounded backoff
//     and send again;
//   - the transport broke while the call was in flight: send again only when
//     the tool is annotated idempotent or read-only, otherwise tell the model
//     the call may or may not have run;
//   - a JSON-RPC error or an isError result: StatusToolError (or
//     StatusInvalidArguments / StatusUnknownTool for -32602);
//   - the context deadline (the coordinator's tool timeout): the call is
//     cancelled (go-sdk sends notifications/cancelled) and the result is
//     StatusTimeout.
//
// # Elicitation
//
// Both shapes reach the same Elicitor. On 2026-07-28 sessions the automatic
// multi round-trip of go-sdk is disabled, so an input-required result comes
// back to Call, which asks the Elicitor and retries the call with the
// answers and the request state. On 2025-11-25 sessions the server sends
// elicitation/create inside the call, and the client's handler asks the
// Elicitor and waits. In both, schema defaults are filled into an accepted
// form answer. Without an Elicitor, requests are declined and the tool result
// says so.
//
// # Parking
//
// With CallOptions.Park, the two shapes that the server keeps no state for
// are not sent to the Elicitor: a 2026-07-28 input-required result and a
// -32042 URL-elicitation-required error end the call with an *InputRequired
// error, which holds everything needed to send the call again (the
// arguments, the requests, the server's opaque request state). Nothing stays
// in memory: the caller stores it, asks the user, and calls Resume (on this
// Registry or, after a restart, on a new one with the same config), or
// Abandon when the user never answers. Resume sends the call with the
// answers as a new call, under the caller's new context, so the time the
// user took counts against no timeout. The 2025-11-25 shape (elicitation/create
// inside the call) cannot be parked, since the server waits inside the
// call: it always goes to the Elicitor.
//
// # What it reports
//
// Call and Resume return a Result whose Status is one of ok, tool_error,
// invalid_arguments, unknown_tool, timeout, unreachable, may_have_run and
// not_completed, with the server's text kept apart (Detail) from the
// registry's own words (Message). The package keeps no failure state: no
// retry budget, no on_tool_error, no knowledge of other tools. It does not
// import the engine (design/arch_test.go fails if it does).
package mcpclient
