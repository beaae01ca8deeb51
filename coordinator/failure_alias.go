package coordinator

// The failure model lives in package failure and the engine's code imports it directly. These
// three aliases remain only for the durability files (checkpoint, work, takeover), which are
// moving to a package of their own; they go when those files import failure themselves.

import "github.com/baton-dev/baton/failure"

// Failure is failure.Failure.
type Failure = failure.Failure

// FailureState is failure.State.
type FailureState = failure.State

// ToolResult is failure.ToolResult.
type ToolResult = failure.ToolResult
