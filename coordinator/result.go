package coordinator

import (
	"errors"

	"github.com/baton-dev/baton/bridge"
	"github.com/baton-dev/baton/failure"
	"github.com/baton-dev/baton/subagent"
)

// a2aOutcome renders the outcome of a delegation.
func a2aOutcome(res *subagent.Result) toolOutcome {
	tag := bridge.TagFailed
	if res != nil {
		tag = bridge.A2ATag(res.State)
	}
	return taggedOutcome(tag, bridge.FromA2A(res))
}

// a2aErrorOutcome renders an error of a delegation, classified by its sentinel.
func a2aErrorOutcome(agent string, req subagent.Request, err error, validNext []string) toolOutcome {
	tag, code := bridge.A2AErrorTag(err)
	o := toolOutcome{ToolResult: failure.ToolResult{Text: bridge.FromA2AError(agent, req, err, validNext), Tag: tag, Code: code}}
	o.Gap = errors.Is(err, subagent.ErrCapabilityGap)
	return o
}
