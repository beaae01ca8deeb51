package mcpclient

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/baton-dev/baton/bridge"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// render shows a Result as the tagged text the engine gives the model for it (without
// the engine's decisions: a tool error is always a retry signal here), so that the tests
// can check what a server's answer becomes. The engine's own rendering is tested in
// package coordinator.
func render(res Result) string {
	switch res.Status {
	case "":
		return ""
	case StatusOK:
		return bridge.MCPOK(res.Content, res.Note)
	case StatusToolError:
		return bridge.Retry(bridge.Signal{Code: "tool_error", Requested: res.Tool, Message: "tool error",
			ValidNextActions: []string{res.Tool}, ErrorMessage: bridge.Untrusted(res.Detail)})
	case StatusInvalidArguments:
		s := bridge.Signal{Code: "validation_failed", Requested: res.Tool, Message: "invalid", ValidNextActions: []string{res.Tool}}
		if res.Invalid != nil {
			s.Reason = bridge.Untrusted(res.Invalid.Reason)
			if !res.Invalid.ByServer {
				s.Details = &bridge.Details{Field: res.Invalid.Field, Got: res.Invalid.Got}
			}
		}
		return bridge.Retry(s)
	case StatusUnknownTool:
		return bridge.Retry(bridge.Signal{Code: "unknown_action", Requested: res.Tool, Message: res.Message + " Call one of known_actions."})
	case StatusTimeout:
		return bridge.Retry(bridge.Signal{Code: "action_timeout", Requested: res.Tool, Message: "timeout", TimeoutSeconds: res.Timeout.Seconds()})
	case StatusUnreachable:
		return bridge.Unreachable(fmt.Sprintf("MCP server %q (tool %q)", res.Server, res.ToolName))
	case StatusMayHaveRun:
		return bridge.MCPError(fmt.Sprintf("The call of %q may or may not have run.", res.ToolName), "")
	case StatusNotCompleted:
		return bridge.MCPError(res.Message, res.Detail)
	}
	return "unknown status " + string(res.Status)
}

// callText is Call, rendered.
func callText(r *Registry, ctx context.Context, name string, args json.RawMessage, opts CallOptions) (string, error) {
	res, err := r.Call(ctx, name, args, opts)
	return render(res), err
}

// resumeText is Resume, rendered.
func resumeText(r *Registry, ctx context.Context, in *InputRequired, responses map[string]*mcp.ElicitResult, opts CallOptions) (string, error) {
	res, err := r.Resume(ctx, in, responses, opts)
	return render(res), err
}
