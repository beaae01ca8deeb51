package mcpclient

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// errInvalidAnswer: an accepted form answer does not match the requested schema.
var errInvalidAnswer = errors.New("the answer does not match the requested form")

// fulfil answers the input requests of an input-required result (2026-07-28
// multi round-trip). stop means the call ends with (out, err).
func (c *call) fulfil(ctx context.Context, reqs mcp.InputRequestMap) (responses mcp.InputResponseMap, out Result, stop bool, err error) {
	responses = make(mcp.InputResponseMap, len(reqs))
	for _, id := range slices.Sorted(maps.Keys(reqs)) {
		p, ok := reqs[id].(*mcp.ElicitParams)
		if !ok {
			return nil, c.unsupportedInput(reqs[id]), true, nil
		}
		res, err := c.r.ask.elicit(ctx, c.e.Server, c, p, ShapeMRTR)
		if err != nil {
			out, stop, err := c.elicitFailed(ctx, err)
			return nil, out, stop, err
		}
		responses[id] = res
	}
	return responses, Result{}, false, nil
}

// urlElicitation handles a -32042 error: the server needs the user to
// complete the given URL elicitations before it can run the call. stop
// means the call ends with (out, err); otherwise it is sent again.
func (c *call) urlElicitation(ctx context.Context, e *jsonrpc.Error) (out Result, stop bool, err error) {
	elicitations := urlElicitations(e)
	if len(elicitations) == 0 {
		return c.noURL(e), true, nil
	}
	for _, p := range elicitations {
		res, err := c.r.ask.elicit(ctx, c.e.Server, c, p, ShapeMRTR)
		if err != nil {
			return c.elicitFailed(ctx, err)
		}
		if res.Action != "accept" {
			return c.urlNotDone(res.Action), true, nil
		}
	}
	return Result{}, false, nil
}

// urlElicitations returns the elicitations of a -32042 error, each in url
// mode.
func urlElicitations(e *jsonrpc.Error) []*mcp.ElicitParams {
	var data struct {
		Elicitations []*mcp.ElicitParams `json:"elicitations"`
	}
	if len(e.Data) > 0 {
		_ = json.Unmarshal(e.Data, &data)
	}
	out := slices.DeleteFunc(data.Elicitations, func(p *mcp.ElicitParams) bool { return p == nil })
	for _, p := range out {
		if p.Mode == "" {
			p.Mode = "url"
		}
	}
	return out
}

// noURL is the result of a -32042 error that names no link.
func (c *call) noURL(e *jsonrpc.Error) Result {
	return c.notCompleted(fmt.Sprintf("The tool %q needs the user to open a link, but the server did not say which.", c.e.ToolName), e.Message)
}

// urlNotDone is the result of a -32042 error that the user did not resolve.
func (c *call) urlNotDone(action string) Result {
	return c.notCompleted(fmt.Sprintf("The tool %q was not run: it needs the user to complete a step at a link, and the user did not (%s).", c.e.ToolName, action), c.note())
}

// unsupportedInput is the result of an input request other than elicitation.
func (c *call) unsupportedInput(r mcp.InputRequest) Result {
	// Sampling and roots: Baton offers neither capability.
	return c.notCompleted(fmt.Sprintf(
		"The tool %q asked Baton for something it does not support (%s); the call was not completed.",
		c.e.ToolName, inputKind(r)), "")
}

func (c *call) elicitFailed(ctx context.Context, err error) (Result, bool, error) {
	if ctx.Err() != nil {
		out, err := c.ctxDone(ctx)
		return out, true, err
	}
	if errors.Is(err, errInvalidAnswer) {
		return c.invalidAnswer(err), true, nil
	}
	return Result{}, true, fmt.Errorf("mcp tool %s: elicitation: %w", c.e.Name, err)
}

// invalidAnswer is the result of an accepted form answer that does not
// match the requested schema.
func (c *call) invalidAnswer(err error) Result {
	return c.notCompleted(fmt.Sprintf("The user's answer to the tool %q does not match the form it asked for; the call was not completed.", c.e.ToolName), err.Error())
}

func inputKind(r mcp.InputRequest) string {
	switch r.(type) {
	//lint:ignore SA1019 servers may still ask for sampling in the deprecation window; they are classified here
	case *mcp.CreateMessageParams, *mcp.CreateMessageWithToolsParams:
		return "sampling"
	//lint:ignore SA1019 servers may still ask for roots in the deprecation window; they are classified here
	case *mcp.ListRootsParams:
		return "roots"
	default:
		return fmt.Sprintf("%T", r)
	}
}

// asker puts the servers' elicitations to the user through the Elicitor, or declines
// them without one, and readies the answers for the server.
type asker struct {
	elicitor Elicitor // nil: every request is declined
	log      *slog.Logger
}

// elicit asks the Elicitor (or declines, without one). c is the call the
// request belongs to, nil when unknown.
func (a *asker) elicit(ctx context.Context, server string, c *call, p *mcp.ElicitParams, shape string) (*mcp.ElicitResult, error) {
	mode := elicitMode(p)
	req := ElicitRequest{Server: server, Mode: mode, Message: p.Message, URL: p.URL, Schema: p.RequestedSchema, Shape: shape}
	if c != nil {
		req.Tool = c.e.ToolName
		req.CallKey = c.key
	}
	if a.elicitor == nil {
		a.log.Info("mcp elicitation declined: no elicitor", "server", server, "tool", req.Tool, "mode", mode)
		if c != nil {
			c.addNote(declineNote(req))
		}
		return &mcp.ElicitResult{Action: "decline"}, nil
	}
	if c != nil && shape == ShapeSession {
		c.setEliciting(1)
		defer c.setEliciting(-1)
	}
	res, err := a.elicitor.Elicit(ctx, req)
	if err != nil {
		return nil, err
	}
	if res == nil {
		return nil, errors.New("the elicitor returned no result")
	}
	if shape == ShapeSession {
		// go-sdk checks the answer and applies the defaults, but only
		// when Content is not nil.
		out := *res
		if mode == "form" && out.Action == "accept" {
			out.Content = maps.Clone(out.Content)
			if out.Content == nil {
				out.Content = map[string]any{}
			}
		}
		return &out, nil
	}
	return a.finishAnswer(server, mode, p.RequestedSchema, res)
}

// elicitMode is the mode of p, inferred when the server left it out.
func elicitMode(p *mcp.ElicitParams) string {
	if p.Mode != "" {
		return p.Mode
	}
	if p.URL != "" || p.ElicitationID != "" {
		return "url"
	}
	return "form"
}

// finishAnswer makes the answer to an input request (2026-07-28) ready to
// send: a copy of res whose accepted form content has the schema's defaults
// for the fields the user left out and matches the requested schema (else
// errInvalidAnswer), as go-sdk does for in-session answers.
func (a *asker) finishAnswer(server, mode string, requested any, res *mcp.ElicitResult) (*mcp.ElicitResult, error) {
	out := *res
	if mode != "form" || out.Action != "accept" {
		return &out, nil
	}
	out.Content = maps.Clone(out.Content)
	if out.Content == nil {
		out.Content = map[string]any{}
	}
	sch, err := compileSchema(requested)
	if err != nil {
		a.log.Warn("mcp elicitation schema not checked", "server", server, "error", err)
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
