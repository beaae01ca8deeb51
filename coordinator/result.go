package coordinator

import (
	"errors"

	"github.com/baton-dev/baton/a2a"
	"github.com/baton-dev/baton/bridge"
)

// ToolResult is the typed outcome of one tool call, as the failure model, metrics and logs
// read it: nobody parses Text back. Text is rendered once, where the result is made, and is
// exactly what the model and TOOL_CALL_RESULT get.
type ToolResult struct {
	// Text is the tagged string (DESIGN §5).
	Text string
	// Tag is the tag of Text's first line (bridge.TagOK, bridge.TagRetry, ...).
	Tag string
	// Code is the retry code when Tag is bridge.TagRetry.
	Code string
	// Gap: the tool said it cannot serve this kind of request (capability_gap). Set from
	// the protocol's classification (a2a.ErrCapabilityGap), never from text.
	Gap bool
	// Message is Baton's own message of a retry signal (a policy refusal explains itself).
	Message string
}

// a2aOutcome renders the outcome of a delegation.
func a2aOutcome(res *a2a.Result) toolOutcome {
	tag := bridge.TagFailed
	if res != nil {
		tag = bridge.A2ATag(res.State)
	}
	return taggedOutcome(tag, bridge.FromA2A(res))
}

// a2aErrorOutcome renders an error of a delegation, classified by its sentinel.
func a2aErrorOutcome(agent string, req a2a.Request, err error, validNext []string) toolOutcome {
	tag, code := bridge.A2AErrorTag(err)
	o := toolOutcome{ToolResult: ToolResult{Text: bridge.FromA2AError(agent, req, err, validNext), Tag: tag, Code: code}}
	o.Gap = errors.Is(err, a2a.ErrCapabilityGap)
	return o
}
