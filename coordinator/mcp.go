package coordinator

import (
	"context"
	"errors"
	"fmt"
	"math"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/baton-dev/baton/bridge"
	"github.com/baton-dev/baton/failure"
	"github.com/baton-dev/baton/hitl"
	"github.com/baton-dev/baton/mcpclient"
	"github.com/baton-dev/baton/store"
)

// The MCP tool kind: the registry reports a typed result; here the engine decides what the
// model reads (on_tool_error, the run's retry budget for the tool) and renders it once.

// ErrToolFailed ends a run whose MCP tool failed on a server configured with
// on_tool_error: error.
var ErrToolFailed = errors.New("a tool failed and its server is configured to stop the run on tool errors")

// mcpResult renders res for the model, after the engine's decision about failures.
func mcpResult(r *Run, t *toolset, res mcpclient.Result) toolOutcome {
	switch res.Status {
	case mcpclient.StatusOK:
		return taggedOutcome(bridge.TagOK, bridge.MCPOK(res.Content, res.Note))
	case mcpclient.StatusToolError:
		return mcpToolError(r, res)
	case mcpclient.StatusInvalidArguments:
		return signalOutcome(mcpInvalid(r, t, res))
	case mcpclient.StatusUnknownTool:
		msg := res.Message
		if msg == "" {
			msg = "There is no tool with this name."
		}
		return signalOutcome(bridge.Signal{
			Code: "unknown_action", Requested: bridge.UntrustedN(res.Tool, 64),
			Message:          msg + " Call one of known_actions.",
			ValidNextActions: without(unknownNext(r.guard, t, res.Tool), res.Tool),
			KnownActions:     without(knownActions(t, res.Tool), res.Tool),
		})
	case mcpclient.StatusTimeout:
		secs := math.Round(res.Timeout.Seconds()*1000) / 1000
		return signalOutcome(bridge.Signal{
			Code: "action_timeout", Requested: res.Tool,
			Message:          fmt.Sprintf("The tool did not answer within %gs and was cancelled. Call it again with a smaller request, or use another way.", secs),
			ValidNextActions: nextActions(r.guard, t, res.Tool),
			TimeoutSeconds:   secs,
		})
	case mcpclient.StatusUnreachable:
		return taggedOutcome(bridge.TagUnreachable, bridge.Unreachable(fmt.Sprintf("MCP server %q (tool %q)", res.Server, res.ToolName)))
	case mcpclient.StatusMayHaveRun:
		return taggedOutcome(bridge.TagError, bridge.MCPError(fmt.Sprintf(
			"The connection to MCP server %q broke while %q was running: the call may or may not have run. Check its effect before calling it again.",
			res.Server, res.ToolName), ""))
	case mcpclient.StatusNotCompleted:
		return taggedOutcome(bridge.TagError, bridge.MCPError(res.Message, res.Detail))
	case mcpclient.StatusAuthRequired:
		// The same tag as an agent whose user's token could not be obtained: nothing was
		// sent, and the reason (Baton's own words) says what the user can do.
		return taggedOutcome(bridge.TagAuthRequired, fmt.Sprintf("[%s:%s]\nMCP server %q was not called (tool %q): %s",
			bridge.TagAuthRequired, bridge.TaskArg(""), res.Server, res.ToolName, res.Message))
	}
	return taggedOutcome(bridge.TagError, bridge.MCPError(fmt.Sprintf("The tool %q ended in a way the coordinator does not know.", res.ToolName), ""))
}

// mcpToolError applies the server's on_tool_error and the run's retry budget for the tool
// (the policy's; never shared with other runs) to a tool error.
func mcpToolError(r *Run, res mcpclient.Result) toolOutcome {
	switch r.e.cfg.OnToolError[res.Server] {
	case OnToolErrorFail:
		return taggedOutcome(bridge.TagError, bridge.MCPError(fmt.Sprintf("The tool %q reported an error.", res.ToolName), res.Detail))
	case OnToolErrorError:
		r.setFatal(ErrToolFailed)
		return taggedOutcome(bridge.TagError, bridge.MCPError(fmt.Sprintf("The tool %q reported an error; the run stops.", res.ToolName), res.Detail))
	}
	budget := r.e.cfg.Policy.RetryBudget(failure.KindToolError)
	// This failure's attempt number: the failures the policy has already counted for the
	// tool in this run, plus this one. Calls of one turn read the same count, so parallel
	// calls of one tool share one attempt (see afterTools).
	n := r.fs.AttemptsOf(failure.KindToolError, res.Tool) + 1
	if n > budget {
		return taggedOutcome(bridge.TagError, bridge.MCPError(fmt.Sprintf("The tool %q failed again; its retry budget is spent. Do not call it again for this request.", res.ToolName), res.Detail))
	}
	left := budget - n + 1
	return signalOutcome(bridge.Signal{
		Code: "tool_error", Requested: res.Tool,
		Message:          "The tool reported an error. Fix the cause (arguments, order of calls) and call again, or use another way.",
		ValidNextActions: nextActions(r.guard, nil, res.Tool),
		ErrorMessage:     bridge.Untrusted(res.Detail),
		AttemptsLeft:     &left,
	})
}

// mcpInvalid renders arguments that do not fit the tool's schema.
func mcpInvalid(r *Run, t *toolset, res mcpclient.Result) bridge.Signal {
	inv := res.Invalid
	if inv == nil {
		inv = &mcpclient.InvalidArgs{Reason: "the arguments do not match the tool's input schema"}
	}
	s := bridge.Signal{Code: "validation_failed", Requested: res.Tool, ValidNextActions: nextActions(r.guard, t, res.Tool)}
	if inv.ByServer {
		s.Message = "The server rejected the arguments. Fix them and call again."
		s.Reason = bridge.Untrusted(inv.Reason)
	} else {
		s.Message = "The arguments do not match the tool's input schema; nothing was sent. Fix them and call again."
		s.Reason = inv.Reason
		s.Details = &bridge.Details{Field: inv.Field, Got: inv.Got}
	}
	return s
}

// mcpOutcome turns the result of an MCP call (or of its resumption) into a tool outcome.
func mcpOutcome(ctx context.Context, r *Run, t *toolset, toolCallID, name string, res mcpclient.Result, err error) toolOutcome {
	if err == nil {
		return mcpResult(r, t, res)
	}
	var sign *mcpclient.SignInRequired
	if errors.As(err, &sign) {
		return toolOutcome{interrupts: []store.Interrupt{signInInterrupt(r, toolCallID, sign)}}
	}
	var need *mcpclient.InputRequired
	if errors.As(err, &need) {
		return toolOutcome{interrupts: mcpInterrupts(r, toolCallID, need)}
	}
	if ctx.Err() != nil {
		return toolOutcome{}
	}
	r.log.Warn("mcp call failed", "tool", name, "err", err)
	return taggedOutcome(bridge.TagUnreachable, bridge.Unreachable(name))
}

// deliverMCP retries a parked MRTR call with the user's answers (or abandons it).
func deliverMCP(ctx context.Context, r *Run, t *toolset, callID string, ins []store.Interrupt, answers map[string]hitl.Answer) toolOutcome {
	h := decodeHandle(ins[0])
	if h.MCP == nil || r.e.cfg.Tools == nil {
		return taggedOutcome(bridge.TagError, bridge.Error("The tool's question can no longer be answered."))
	}
	responses := map[string]*mcp.ElicitResult{}
	for _, in := range ins {
		ih := decodeHandle(in)
		ans := answers[in.ID]
		switch {
		case ans.Cancelled:
			responses[ih.Key] = &mcp.ElicitResult{Action: "cancel"}
		default:
			action, _ := ans.Payload["action"].(string)
			res := &mcp.ElicitResult{Action: action}
			if content, ok := ans.Payload["content"].(map[string]any); ok && action == "accept" {
				res.Content = content
			}
			responses[ih.Key] = res
		}
	}
	// The retried call may ask again in-session (a URL elicitation after -32042 does), so
	// it runs like a fresh call that can be parked on a session waiter.
	return runSessionCall(ctx, r, t, callID, h.MCP.Tool, func(cctx context.Context, opts mcpclient.CallOptions) (mcpclient.Result, error) {
		return r.e.cfg.Tools.Resume(cctx, h.MCP, responses, opts)
	})
}

// mcpInterrupts builds one interrupt per request of a parked MCP call.
func mcpInterrupts(r *Run, callID string, need *mcpclient.InputRequired) []store.Interrupt {
	var out []store.Interrupt
	for _, req := range need.Requests {
		var in store.Interrupt
		if req.Mode == "url" || need.URLRequired {
			in = hitl.MCPURL(r.e.hitlOptions(), need.Server, need.ToolName, req.URL, req.Message)
		} else {
			in = hitl.MCPForm(r.e.hitlOptions(), need.Server, need.ToolName, req.Message, req.Schema, mcpclient.ShapeMRTR)
		}
		in.ToolCallID = callID
		in.Handle = mustJSON(handle{MCP: need, Key: req.Key})
		out = append(out, in)
	}
	return out
}
