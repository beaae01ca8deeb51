package coordinator

// The failure model lives in package failure and the engine's code imports it directly. These
// three aliases remain only for the takeover files (takeover.go, takeover_run.go and their
// tests), which other work owns this session; they go when those files import failure.

import "github.com/baton-dev/baton/failure"

// Failure is failure.Failure.
type Failure = failure.Failure

// FailureState is failure.State.
type FailureState = failure.State

// ToolResult is failure.ToolResult.
type ToolResult = failure.ToolResult
