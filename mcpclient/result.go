package mcpclient

import (
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Status says how a call ended. The registry only reports it: what the model reads, and
// what the run does about a failure (retry budgets, on_tool_error), is the engine's
// decision.
type Status string

// The statuses of a call.
const (
	// StatusOK: the tool ran and returned Content (Note may say more).
	StatusOK Status = "ok"
	// StatusToolError: the tool (or the server on its behalf) reported a failure;
	// Detail holds the server's text.
	StatusToolError Status = "tool_error"
	// StatusInvalidArguments: the arguments do not fit the tool's input schema (checked
	// here before sending, or rejected by the server); Invalid says how. Nothing ran.
	StatusInvalidArguments Status = "invalid_arguments"
	// StatusUnknownTool: no such tool in the catalog, or the server no longer has it.
	StatusUnknownTool Status = "unknown_tool"
	// StatusTimeout: the context's deadline (the tool timeout) passed; the call was
	// cancelled on the server.
	StatusTimeout Status = "timeout"
	// StatusUnreachable: the server could not be reached; the call was not sent.
	StatusUnreachable Status = "unreachable"
	// StatusMayHaveRun: the transport broke while a call that is not idempotent was in
	// flight; it may or may not have run.
	StatusMayHaveRun Status = "may_have_run"
	// StatusNotCompleted: the call could not be completed for a reason Message states
	// (a declined link, an unsupported request, a server that kept asking); Detail may
	// hold the server's text.
	StatusNotCompleted Status = "not_completed"
	// StatusAuthRequired: the call was not sent because the user's own credentials for the
	// server could not be obtained (ErrAuthRequired); Message says why in plain words.
	StatusAuthRequired Status = "auth_required"
)

// Result is the typed outcome of Call and Resume. Text fields named Detail, Note and
// Invalid.Got come from the server or the model and are untrusted; Message is the
// registry's own sentence.
type Result struct {
	Status Status
	// Tool is the catalog name; Server and ToolName the server and its own tool name.
	Tool, Server, ToolName string
	// Content is the tool's result (StatusOK).
	Content *mcp.CallToolResult
	// Note is said to the model before the content (declined elicitations).
	Note string
	// Message says, in the registry's words, what happened.
	Message string
	// Detail is the server's text about a failure.
	Detail string
	// Invalid describes arguments that do not fit (StatusInvalidArguments).
	Invalid *InvalidArgs
	// Timeout is the tool timeout that passed (StatusTimeout).
	Timeout time.Duration
	// Meta is the _meta of the tool's result (StatusOK, StatusToolError), as the server
	// sent it: untrusted. A server that is another Baton reports there what its run used
	// (baton/usage).
	Meta map[string]any
}

// InvalidArgs says which argument is wrong and how, in plain words.
type InvalidArgs struct {
	// Reason names the field path, what was expected and what came.
	Reason string
	// Field is the offending argument's path ("" when unknown).
	Field string
	// Got is the value that came (nil when missing).
	Got any
	// ByServer: the server rejected the arguments (Reason is its untrusted text).
	ByServer bool
}
