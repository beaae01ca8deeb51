package mcpclient

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// ErrInvalidResume is wrapped by the error Resume returns when the parked
// call or the responses do not fit together (a request without a response,
// a response to no request, an unknown action): a bug of the caller, not of
// the user or the server.
var ErrInvalidResume = errors.New("invalid resume of a parked mcp call")

// abandonTimeout bounds Abandon when its context has no deadline: it runs
// when an interrupt expires, with nobody waiting for it.
const abandonTimeout = 10 * time.Second

// InputRequired is returned as the error of Call or Resume (with
// CallOptions.Park) when the call needs the user's input. It holds all that
// is needed to send the call again, so it can be stored (it is JSON) and the
// call resumed after a restart; the server keeps nothing for it.
type InputRequired struct {
	Server   string `json:"server"`
	Tool     string `json:"tool"`     // the catalog name, <server>__<tool>
	ToolName string `json:"toolName"` // the server's own name for the tool
	// Args are the call's arguments (a JSON object).
	Args json.RawMessage `json:"args"`
	// Requests are the elicitations the server asked for, sorted by key:
	// one per input request (2026-07-28), or one per URL of a -32042 error.
	Requests []InputRequest `json:"requests"`
	// RequestState is the server's opaque state, sent back with the answers.
	RequestState string `json:"requestState,omitempty"`
	// URLRequired: the server answered -32042; once the user has visited
	// the URLs, the same call is sent again (without answers).
	URLRequired bool `json:"urlRequired,omitempty"`
	// Rounds counts the rounds of input requests of the call so far, so
	// that a server that keeps asking is stopped across resumes too.
	Rounds int `json:"rounds,omitempty"`
	// Principal is on whose behalf the call ran (CallOptions.Principal): Abandon
	// uses that principal's session of a PerPrincipal server.
	Principal string `json:"principal,omitempty"`
	// Meta is the _meta of the result that asked (untrusted; not kept with the rest): a
	// server that is another Baton reports there what the run that asked used.
	Meta map[string]any `json:"-"`
}

// InputRequest is one elicitation of a parked call.
type InputRequest struct {
	// Key names the request in the responses given to Resume.
	Key           string `json:"key"`
	Mode          string `json:"mode"` // "form" or "url"
	Message       string `json:"message"`
	URL           string `json:"url,omitempty"`
	ElicitationID string `json:"elicitationId,omitempty"`
	// Schema is the requested (flat object) schema of a form.
	Schema map[string]any `json:"schema,omitempty"`
}

// Error says which tool waits for the user.
func (e *InputRequired) Error() string {
	if e.URLRequired {
		return fmt.Sprintf("mcp tool %s needs the user to complete a step at a link", e.Tool)
	}
	return fmt.Sprintf("mcp tool %s needs the user's input", e.Tool)
}

// parkInput ends the call with the input requests of res (2026-07-28).
func (c *call) parkInput(res *mcp.CallToolResult) (Result, error) {
	keys := slices.Sorted(maps.Keys(res.InputRequests))
	reqs := make([]InputRequest, 0, len(keys))
	for _, k := range keys {
		p, ok := res.InputRequests[k].(*mcp.ElicitParams)
		if !ok {
			return c.unsupportedInput(res.InputRequests[k]), nil
		}
		reqs = append(reqs, inputRequest(k, p))
	}
	return c.parked(reqs, res.RequestState, false, res.Meta)
}

// parkURL ends the call with the URL elicitations of a -32042 error.
func (c *call) parkURL(e *jsonrpc.Error) (Result, error) {
	elicitations := urlElicitations(e)
	if len(elicitations) == 0 {
		return c.noURL(e), nil
	}
	reqs := make([]InputRequest, 0, len(elicitations))
	taken := map[string]bool{}
	for i, p := range elicitations {
		// The elicitation id names the request when the server gave a
		// distinct one; the position otherwise.
		key := p.ElicitationID
		if key == "" || taken[key] {
			key = "url-" + strconv.Itoa(i)
		}
		taken[key] = true
		reqs = append(reqs, inputRequest(key, p))
	}
	return c.parked(reqs, "", true, nil)
}

func (c *call) parked(reqs []InputRequest, state string, url bool, meta map[string]any) (Result, error) {
	args, err := json.Marshal(c.args)
	if err != nil {
		// The arguments came from JSON: this cannot happen.
		return Result{}, fmt.Errorf("mcp tool %s: encoding the arguments: %w", c.e.Name, err)
	}
	c.r.log.InfoContext(c.logCtx, "mcp call parked for the user's input", "server", c.e.Server, "tool", c.e.ToolName, "requests", len(reqs), "url", url, "round", c.rounds)
	return Result{}, &InputRequired{
		Server:       c.e.Server,
		Tool:         c.e.Name,
		ToolName:     c.e.ToolName,
		Args:         args,
		Requests:     reqs,
		RequestState: state,
		URLRequired:  url,
		Rounds:       c.rounds,
		Principal:    c.srv.principal,
		Meta:         meta,
	}
}

func inputRequest(key string, p *mcp.ElicitParams) InputRequest {
	req := InputRequest{Key: key, Mode: elicitMode(p), Message: p.Message, URL: p.URL, ElicitationID: p.ElicitationID}
	if req.Mode == "form" && p.RequestedSchema != nil {
		req.Schema = objectSchema(p.RequestedSchema)
	}
	return req
}

// Resume sends a parked call again, as a new call under ctx (whose deadline
// is the tool timeout). For input requests, responses holds an answer per
// request key (accepted form content gets the schema's defaults and must
// match the schema, as in Call) and goes to the server with the request
// state. For a -32042 error, the same call is sent again; a response other
// than accept (optional) means the user did not complete the step, and the
// call is not sent. The result is rendered as Call's; with opts.Park it may
// be another *InputRequired (the server asks again). A mismatch between in
// and responses is an error wrapping ErrInvalidResume.
func (r *Registry) Resume(ctx context.Context, in *InputRequired, responses map[string]*mcp.ElicitResult, opts CallOptions) (Result, error) {
	if in == nil {
		return Result{}, fmt.Errorf("%w: nothing to resume", ErrInvalidResume)
	}
	if r.closed.Load() {
		return Result{}, fmt.Errorf("mcp tool %s: %w", in.Tool, ErrClosed)
	}
	e, ok := r.resolve(in)
	if !ok {
		return Result{Status: StatusUnknownTool, Tool: in.Tool, Server: in.Server, ToolName: in.ToolName,
			Message: fmt.Sprintf("The MCP server %q is no longer configured, so the tool %q cannot continue.", in.Server, in.ToolName)}, nil
	}
	args, aerr := decodeArgs(in.Args)
	if aerr != nil {
		return Result{}, fmt.Errorf("%w: tool %s: %s", ErrInvalidResume, in.Tool, aerr.reason)
	}
	if err := checkKeys(in, responses); err != nil {
		return Result{}, err
	}
	c := r.newCall(ctx, e, args, opts)
	defer r.progress.finish(c.token)
	c.rounds = in.Rounds
	if in.URLRequired {
		for _, req := range in.Requests {
			if res := responses[req.Key]; res != nil && res.Action != "accept" {
				return c.urlNotDone(res.Action), nil
			}
		}
		return c.run(ctx)
	}
	c.inputs = make(mcp.InputResponseMap, len(in.Requests))
	for _, req := range in.Requests {
		var schema any
		if req.Schema != nil {
			schema = req.Schema
		}
		res, err := r.ask.finishAnswer(in.Server, req.Mode, schema, responses[req.Key])
		if err != nil {
			return c.invalidAnswer(err), nil
		}
		c.inputs[req.Key] = res
	}
	c.state = in.RequestState
	return c.run(ctx)
}

// checkKeys checks that responses fit the requests of in: one valid answer
// per request (optional for a -32042 error), and none for anything else.
func checkKeys(in *InputRequired, responses map[string]*mcp.ElicitResult) error {
	if len(in.Requests) == 0 {
		return fmt.Errorf("%w: tool %s: the parked call has no requests", ErrInvalidResume, in.Tool)
	}
	keys := map[string]bool{}
	for _, req := range in.Requests {
		keys[req.Key] = true
		res, ok := responses[req.Key]
		if !ok && in.URLRequired {
			continue
		}
		if res == nil {
			return fmt.Errorf("%w: tool %s: no response to request %q", ErrInvalidResume, in.Tool, req.Key)
		}
		switch res.Action {
		case "accept", "decline", "cancel":
		default:
			return fmt.Errorf("%w: tool %s: request %q: action must be accept, decline or cancel, not %q", ErrInvalidResume, in.Tool, req.Key, res.Action)
		}
	}
	for _, k := range slices.Sorted(maps.Keys(responses)) {
		if !keys[k] {
			return fmt.Errorf("%w: tool %s: response to no request %q", ErrInvalidResume, in.Tool, k)
		}
	}
	return nil
}

// resolve finds the catalog entry of a parked call: by its name, else by
// its server and tool (the catalog may name it differently after a
// restart). When the server is configured but has no tools in the catalog
// (it is down), the call gets an entry of its own, and sending it tries to
// connect (and reports [UNREACHABLE] when that fails).
func (r *Registry) resolve(in *InputRequired) (*entry, bool) {
	r.mu.RLock()
	if e, ok := r.byName[in.Tool]; ok && e.Server == in.Server && e.ToolName == in.ToolName {
		r.mu.RUnlock()
		return e, true
	}
	for _, e := range r.byName {
		if e.Server == in.Server && e.ToolName == in.ToolName {
			r.mu.RUnlock()
			return e, true
		}
	}
	r.mu.RUnlock()
	for _, s := range r.servers {
		if s.cfg.Name == in.Server {
			name := in.Tool
			if name == "" {
				name = toolName(in.Server, in.ToolName)
			}
			return &entry{Tool: Tool{Name: name, Server: in.Server, ToolName: in.ToolName}, srv: s}, true
		}
	}
	return nil, false
}

// Abandon tells the server that a parked call will not be answered: for
// input requests (2026-07-28), the call is sent once with every response
// {action: cancel} and its result discarded. It returns nil when there is
// nothing to tell (a -32042 error: the server waits for nothing). It is best
// effort: an error says the server could not be told. Without a deadline
// in ctx, it gives up after 10 s.
func (r *Registry) Abandon(ctx context.Context, in *InputRequired) error {
	if in == nil || in.URLRequired || len(in.Requests) == 0 {
		return nil
	}
	e, ok := r.resolve(in)
	if !ok {
		return fmt.Errorf("mcp tool %s: server %q is not configured", in.Tool, in.Server)
	}
	args, aerr := decodeArgs(in.Args)
	if aerr != nil {
		return fmt.Errorf("%w: tool %s: %s", ErrInvalidResume, in.Tool, aerr.reason)
	}
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, abandonTimeout)
		defer cancel()
	}
	srv := e.srv.forPrincipal(in.Principal)
	sess, err := srv.session(ctx)
	if err != nil {
		return fmt.Errorf("mcp tool %s: abandoning: %w", e.Name, err)
	}
	responses := make(mcp.InputResponseMap, len(in.Requests))
	for _, req := range in.Requests {
		responses[req.Key] = &mcp.ElicitResult{Action: "cancel"}
	}
	res, err := sess.CallTool(ctx, &mcp.CallToolParams{
		Name:           e.ToolName,
		Arguments:      args,
		InputResponses: responses,
		RequestState:   in.RequestState,
	})
	if err != nil {
		if rpcErr, _ := classify(err); rpcErr == nil && ctx.Err() == nil {
			srv.drop(sess)
		}
		return fmt.Errorf("mcp tool %s: abandoning: %w", e.Name, srv.safe(err))
	}
	r.log.Info("mcp parked call abandoned", "server", e.Server, "tool", e.ToolName, "is_error", res.IsError, "asks_again", res.NeedsInput())
	return nil
}
