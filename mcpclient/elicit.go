package mcpclient

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"

	"github.com/baton-dev/baton/bridge"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// errInvalidAnswer: an accepted form answer does not match the requested schema.
var errInvalidAnswer = errors.New("the answer does not match the requested form")

// fulfil answers the input requests of an input-required result (2026-07-28
// multi round-trip). stop means the call ends with (out, err).
func (c *call) fulfil(ctx context.Context, reqs mcp.InputRequestMap) (responses mcp.InputResponseMap, out string, stop bool, err error) {
	responses = make(mcp.InputResponseMap, len(reqs))
	for _, id := range slices.Sorted(maps.Keys(reqs)) {
		p, ok := reqs[id].(*mcp.ElicitParams)
		if !ok {
			// Sampling and roots: Baton offers neither capability.
			return nil, bridge.MCPError(fmt.Sprintf(
				"The tool %q asked Baton for something it does not support (%s); the call was not completed.",
				c.e.ToolName, inputKind(reqs[id])), ""), true, nil
		}
		res, err := c.r.elicit(ctx, c.e.Server, c, p, ShapeMRTR)
		if err != nil {
			out, stop, err := c.elicitFailed(ctx, err)
			return nil, out, stop, err
		}
		responses[id] = res
	}
	return responses, "", false, nil
}

// urlElicitation handles a -32042 error: the server needs the user to
// complete the given URL elicitations before it can run the call. stop
// means the call ends with (out, err); otherwise it is sent again.
func (c *call) urlElicitation(ctx context.Context, e *jsonrpc.Error) (out string, stop bool, err error) {
	var data struct {
		Elicitations []*mcp.ElicitParams `json:"elicitations"`
	}
	if len(e.Data) > 0 {
		_ = json.Unmarshal(e.Data, &data)
	}
	if len(data.Elicitations) == 0 {
		return bridge.MCPError(fmt.Sprintf("The tool %q needs the user to open a link, but the server did not say which.", c.e.ToolName), e.Message), true, nil
	}
	for _, p := range data.Elicitations {
		if p.Mode == "" {
			p.Mode = "url"
		}
		res, err := c.r.elicit(ctx, c.e.Server, c, p, ShapeMRTR)
		if err != nil {
			return c.elicitFailed(ctx, err)
		}
		if res.Action != "accept" {
			return bridge.MCPError(fmt.Sprintf("The tool %q was not run: it needs the user to complete a step at a link, and the user did not (%s).", c.e.ToolName, res.Action), c.note()), true, nil
		}
	}
	return "", false, nil
}

func (c *call) elicitFailed(ctx context.Context, err error) (string, bool, error) {
	if ctx.Err() != nil {
		out, err := c.ctxDone(ctx)
		return out, true, err
	}
	if errors.Is(err, errInvalidAnswer) {
		return bridge.MCPError(fmt.Sprintf("The user's answer to the tool %q does not match the form it asked for; the call was not completed.", c.e.ToolName), err.Error()), true, nil
	}
	return "", true, fmt.Errorf("mcp tool %s: elicitation: %w", c.e.Name, err)
}

func inputKind(r mcp.InputRequest) string {
	switch r.(type) {
	case *mcp.CreateMessageParams, *mcp.CreateMessageWithToolsParams:
		return "sampling"
	case *mcp.ListRootsParams:
		return "roots"
	default:
		return fmt.Sprintf("%T", r)
	}
}

// elicit asks the Elicitor (or declines, without one). c is the call the
// request belongs to, nil when unknown.
func (r *Registry) elicit(ctx context.Context, server string, c *call, p *mcp.ElicitParams, shape string) (*mcp.ElicitResult, error) {
	mode := p.Mode
	if mode == "" {
		mode = "form"
		if p.URL != "" || p.ElicitationID != "" {
			mode = "url"
		}
	}
	req := ElicitRequest{Server: server, Mode: mode, Message: p.Message, URL: p.URL, Schema: p.RequestedSchema, Shape: shape}
	if c != nil {
		req.Tool = c.e.ToolName
	}
	if r.opts.Elicitor == nil {
		r.log.Info("mcp elicitation declined: no elicitor", "server", server, "tool", req.Tool, "mode", mode)
		if c != nil {
			c.addNote(declineNote(req))
		}
		return &mcp.ElicitResult{Action: "decline"}, nil
	}
	res, err := r.opts.Elicitor.Elicit(ctx, req)
	if err != nil {
		return nil, err
	}
	if res == nil {
		return nil, errors.New("the elicitor returned no result")
	}
	out := *res
	if mode != "form" || out.Action != "accept" {
		return &out, nil
	}
	// Keep the schema's defaults for fields the user left out.
	out.Content = maps.Clone(out.Content)
	if out.Content == nil {
		out.Content = map[string]any{}
	}
	if shape == ShapeSession {
		return &out, nil // go-sdk checks the answer and applies the defaults
	}
	sch, err := compileSchema(p.RequestedSchema)
	if err != nil {
		r.log.Warn("mcp elicitation schema not checked", "server", server, "error", err)
		return &out, nil
	}
	if err := sch.applyDefaults(out.Content); err != nil {
		return nil, fmt.Errorf("%w: %v", errInvalidAnswer, err)
	}
	if ae := sch.check(out.Content); ae != nil {
		return nil, fmt.Errorf("%w: %s", errInvalidAnswer, ae.reason)
	}
	return &out, nil
}

func declineNote(req ElicitRequest) string {
	if req.Mode == "url" {
		return fmt.Sprintf("Note: the tool asked to send the user to %s (%q). Baton cannot ask the user yet, so it declined.", req.URL, req.Message)
	}
	return fmt.Sprintf("Note: the tool asked the user: %q. Baton cannot ask the user yet, so it declined.", req.Message)
}
