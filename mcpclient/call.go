package mcpclient

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"github.com/baton-dev/baton/internal/retry"
	"net"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/baton-dev/baton/signin"
)

const (
	// maxInputRounds bounds the input-required rounds of one call.
	maxInputRounds = 10
	// maxBusyRounds bounds the retries of a server that sheds load (an
	// input-required result without requests).
	maxBusyRounds = 3
	// codeRejected is go-sdk's code for "rejected by transport": the request
	// never reached the server (connection refused, 503, ...).
	codeRejected = -32005
)

// call is one Call in progress.
type call struct {
	r *Registry
	e *entry
	// srv carries the call: e.srv, or the principal's session of a PerPrincipal server.
	srv     *server
	args    map[string]any
	token   string
	timeout time.Duration
	// park: input requests end the call with an *InputRequired.
	park bool
	// key is CallOptions.Key, returned to the Elicitor with in-session requests.
	key any
	// meta is CallOptions.Meta, sent with every send of the call.
	meta map[string]any
	// inputs and state go with the next send: the answers to the last
	// input requests and the server's request state (a resumed call starts
	// with them).
	inputs mcp.InputResponseMap
	state  string
	// rounds counts the rounds of input requests, across parked rounds.
	rounds int

	// logCtx is the caller's context, for log lines only: it carries the run's ids and
	// trace (telemetry.LogHandler), never used for cancellation.
	logCtx context.Context

	mu        sync.Mutex
	eliciting int      // in-session requests of this call waiting in the Elicitor
	notes     []string // said to the model before the content (declined elicitations)
	elicitErr error    // the Elicitor failed an in-session request of this call
}

// decodeArgs parses the model's arguments, which must be a JSON object.
func decodeArgs(raw json.RawMessage) (map[string]any, *argError) {
	s := strings.TrimSpace(string(raw))
	if s == "" || s == "null" {
		return map[string]any{}, nil
	}
	var v any
	if err := json.Unmarshal([]byte(s), &v); err != nil {
		return nil, &argError{reason: "the arguments are not valid JSON", got: s}
	}
	m, ok := v.(map[string]any)
	if !ok {
		return nil, &argError{reason: "the arguments must be a JSON object", got: v}
	}
	return m, nil
}

func (c *call) params() *mcp.CallToolParams {
	// Fresh params for every send: go-sdk adds per-session metadata to them.
	p := &mcp.CallToolParams{Name: c.e.ToolName, Arguments: c.args}
	if len(c.meta) > 0 {
		p.Meta = make(mcp.Meta, len(c.meta)+1)
		for k, v := range c.meta {
			p.Meta[k] = v
		}
	}
	if c.token != "" {
		p.SetProgressToken(c.token)
	}
	return p
}

func (c *call) run(ctx context.Context) (Result, error) {
	srv, opts := c.srv, c.r.opts
	reconnects, busyRounds, urlRounds := 0, 0, 0
	forbiddenRetried := false
	for {
		if ctx.Err() != nil {
			return c.ctxDone(ctx)
		}
		sess, err := srv.session(ctx)
		if err != nil {
			// Before any retry: go-sdk wraps the handler's error in -32005 "rejected",
			// which would read as "not sent, connect again".
			if res, serr, ok := c.signInError(err); ok {
				return res, serr
			}
			switch {
			case ctx.Err() != nil:
				return c.ctxDone(ctx)
			case errors.Is(err, ErrClosed):
				return Result{}, fmt.Errorf("mcp tool %s: %w", c.e.Name, err)
			case reconnects >= opts.MaxReconnects:
				c.r.log.WarnContext(ctx, "mcp server unreachable", "server", srv.cfg.Name, "error", srv.safe(err))
				return c.unreachable(), nil
			}
			if !sleep(ctx, c.r.backoff(reconnects)) {
				return c.ctxDone(ctx)
			}
			reconnects++
			continue
		}

		if c.e.signIn {
			return c.signInResult(), nil
		}
		p := c.params()
		p.InputResponses, p.RequestState = c.inputs, c.state
		srv.begin(c)
		res, err := sess.CallTool(ctx, p)
		srv.end(c)
		if eerr := c.elicitError(); eerr != nil && ctx.Err() == nil {
			return Result{}, fmt.Errorf("mcp tool %s: elicitation: %w", c.e.Name, eerr)
		}

		if err != nil {
			if ctx.Err() != nil {
				return c.ctxDone(ctx)
			}
			if errors.Is(err, signin.ErrForbidden) && srv.perPrincipalChild() && !forbiddenRetried {
				// A go-sdk server binds a session to the user of its first token: after the
				// principal signed in as someone else, only a new session is accepted. The
				// request was refused, not run: send it again once on a new session.
				forbiddenRetried = true
				srv.drop(sess)
				continue
			}
			if res, serr, ok := c.signInError(err); ok {
				return res, serr
			}
			rpcErr, notSent := classify(err)
			if rpcErr != nil {
				if rpcErr.Code == mcp.CodeURLElicitationRequired && c.park && c.rounds < maxInputRounds {
					c.rounds++
					return c.parkURL(rpcErr)
				}
				if rpcErr.Code == mcp.CodeURLElicitationRequired && !c.park && urlRounds < 2 {
					urlRounds++
					out, stop, err := c.urlElicitation(ctx, rpcErr)
					if stop {
						return out, err
					}
					continue
				}
				return c.protocolError(rpcErr), nil
			}
			srv.drop(sess)
			if !notSent && !c.e.Idempotent {
				c.r.log.WarnContext(ctx, "mcp transport failed during a call", "server", srv.cfg.Name, "tool", c.e.ToolName, "error", srv.safe(err))
				return c.result(StatusMayHaveRun), nil
			}
			if reconnects >= opts.MaxReconnects {
				c.r.log.WarnContext(ctx, "mcp server unreachable", "server", srv.cfg.Name, "error", srv.safe(err))
				return c.unreachable(), nil
			}
			c.r.log.InfoContext(ctx, "mcp call resent after a transport failure", "server", srv.cfg.Name, "tool", c.e.ToolName, "sent", !notSent, "error", srv.safe(err))
			if !sleep(ctx, c.r.backoff(reconnects)) {
				return c.ctxDone(ctx)
			}
			reconnects++
			continue
		}

		if res.NeedsInput() {
			if len(res.InputRequests) == 0 {
				// Load shedding: the server asks to be called again later.
				busyRounds++
				if busyRounds > maxBusyRounds {
					return c.toolError("the server is busy and asked to be called again later"), nil
				}
				if !sleep(ctx, c.r.backoff(busyRounds-1)) {
					return c.ctxDone(ctx)
				}
				c.inputs, c.state = nil, res.RequestState
				continue
			}
			c.rounds++
			if c.rounds > maxInputRounds {
				return c.notCompleted(fmt.Sprintf("The tool %q kept asking for more input; Baton stopped after %d rounds.", c.e.ToolName, maxInputRounds), ""), nil
			}
			if c.park {
				return c.parkInput(res)
			}
			responses, out, stop, err := c.fulfil(ctx, res.InputRequests)
			if stop {
				return out, err
			}
			c.inputs, c.state = responses, res.RequestState
			continue
		}

		if res.IsError {
			return c.isError(res), nil
		}
		ok := c.result(StatusOK)
		ok.Content, ok.Note, ok.Meta = res, c.note(), res.Meta
		return ok, nil
	}
}

// classify walks err for a JSON-RPC error from the server. notSent reports
// that the request certainly did not reach the tool, so it is safe to send
// again: the server refused it with an HTTP status (go-sdk's "rejected by
// transport" without a network error), did not know the session (404), or
// could not be dialled. A network error after dialling (EOF, reset) is
// ambiguous: go-sdk reports it as rejected too, but the server may have
// received the request before it went away.
func classify(err error) (rpcErr *jsonrpc.Error, notSent bool) {
	var rejected bool
	var urlErr *url.Error
	if errors.As(err, &urlErr) {
		var op *net.OpError
		if !errors.As(urlErr, &op) || op.Op != "dial" {
			return nil, false
		}
	}
	walkErrors(err, func(e error) bool {
		var we *jsonrpc.Error
		if w, ok := e.(*jsonrpc.Error); ok {
			we = w
		}
		if we == nil {
			return true
		}
		if we.Code == codeRejected {
			rejected = true
			return true
		}
		rpcErr = we
		return false
	})
	if rpcErr != nil {
		return rpcErr, false
	}
	return nil, rejected || errors.Is(err, mcp.ErrSessionMissing) || refusedByStatus(err)
}

// refusedStatuses are HTTP answers to the POST that mean the server refused the request
// before running it (a stale session is 400 on some servers, 404 on others). go-sdk
// reports them only as "<request>: <status text>". 401/403 and 5xx stay ambiguous.
var refusedStatuses = []int{
	http.StatusBadRequest, http.StatusNotFound, http.StatusMethodNotAllowed, http.StatusNotAcceptable,
	http.StatusConflict, http.StatusGone, http.StatusRequestEntityTooLarge, http.StatusUnsupportedMediaType,
	http.StatusUnprocessableEntity,
}

func refusedByStatus(err error) bool {
	msg := err.Error()
	for _, code := range refusedStatuses {
		if strings.HasSuffix(msg, ": "+http.StatusText(code)) {
			return true
		}
	}
	return false
}

// walkErrors visits err and everything it wraps, depth first, until visit
// returns false.
func walkErrors(err error, visit func(error) bool) bool {
	if err == nil {
		return true
	}
	if !visit(err) {
		return false
	}
	switch u := err.(type) {
	case interface{ Unwrap() error }:
		return walkErrors(u.Unwrap(), visit)
	case interface{ Unwrap() []error }:
		for _, e := range u.Unwrap() {
			if !walkErrors(e, visit) {
				return false
			}
		}
	}
	return true
}

// protocolError maps a JSON-RPC error from the server.
func (c *call) protocolError(e *jsonrpc.Error) Result {
	msg := e.Message
	if e.Code == jsonrpc.CodeInvalidParams {
		if looksUnknownTool(msg) {
			return c.unknownOnServer()
		}
		return c.invalidOnServer(msg)
	}
	return c.toolError(fmt.Sprintf("MCP error %d: %s", e.Code, msg))
}

func looksUnknownTool(msg string) bool {
	m := strings.ToLower(msg)
	return strings.Contains(m, "unknown tool") || (strings.Contains(m, "tool") && strings.Contains(m, "not found"))
}

// tsInvalidParams is how servers on the TypeScript SDK report -32602 inside
// an isError result (e.g. "MCP error -32602: Tool nope not found").
const tsInvalidParams = "MCP error -32602:"

// isError maps a tool result with isError set, keeping its _meta.
func (c *call) isError(res *mcp.CallToolResult) Result {
	out := c.errorResult(res)
	out.Meta = res.Meta
	return out
}

// errorResult is what a tool result with isError set says: an unknown tool, arguments the
// server rejected, or the tool's own failure.
func (c *call) errorResult(res *mcp.CallToolResult) Result {
	text := errorText(res)
	if rest, ok := strings.CutPrefix(text, tsInvalidParams); ok {
		rest = strings.TrimSpace(rest)
		if looksUnknownTool(rest) {
			return c.unknownOnServer()
		}
		return c.invalidOnServer(rest)
	}
	return c.toolError(text)
}

// errorText is the text of a result that reported an error, as one string.
func errorText(res *mcp.CallToolResult) string {
	var parts []string
	for _, ct := range res.Content {
		if tc, ok := ct.(*mcp.TextContent); ok {
			parts = append(parts, tc.Text)
		}
	}
	t := strings.TrimSpace(strings.Join(parts, "\n\n"))
	if t == "" {
		return "the tool reported an error without a message"
	}
	return t
}

// unknownOnServer: the catalog knew the tool but the server does not (any
// more); the catalog is refreshed.
func (c *call) unknownOnServer() Result {
	c.srv.refresh()
	r := c.result(StatusUnknownTool)
	r.Message = fmt.Sprintf("The MCP server %q no longer has the tool %q.", c.e.Server, c.e.ToolName)
	return r
}

// invalidOnServer: the server rejected the arguments (its check is the
// authority when the client could not check).
func (c *call) invalidOnServer(reason string) Result {
	r := c.result(StatusInvalidArguments)
	r.Invalid = &InvalidArgs{Reason: reason, ByServer: true}
	return r
}

// toolError reports a tool failure with the server's text. What the model reads, and
// whether the run goes on, is decided by the engine (on_tool_error, retry budget).
func (c *call) toolError(text string) Result {
	r := c.result(StatusToolError)
	r.Detail = text
	return r
}

// notCompleted reports a call that could not be completed, in the registry's words
// (message) with the server's text (detail, may be empty).
func (c *call) notCompleted(message, detail string) Result {
	r := c.result(StatusNotCompleted)
	r.Message, r.Detail = message, detail
	return r
}

func (c *call) unreachable() Result {
	return c.result(StatusUnreachable)
}

// ctxDone maps the end of ctx: its deadline is the tool timeout; a plain
// cancel ends the run.
func (c *call) ctxDone(ctx context.Context) (Result, error) {
	err := ctx.Err()
	if errors.Is(err, context.DeadlineExceeded) {
		r := c.result(StatusTimeout)
		r.Timeout = c.timeout
		return r, nil
	}
	return Result{}, fmt.Errorf("mcp tool %s: %w", c.e.Name, err)
}

func (c *call) addNote(n string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.notes = append(c.notes, n)
}

func (c *call) setElicitErr(err error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.elicitErr == nil {
		c.elicitErr = err
	}
}

func (c *call) elicitError() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.elicitErr
}

func (c *call) note() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return strings.Join(c.notes, "\n")
}

// sleep waits d or until ctx is done; it reports whether d passed.
func sleep(ctx context.Context, d time.Duration) bool { return retry.Sleep(ctx, d) }

func (c *call) setEliciting(delta int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.eliciting += delta
}

func (c *call) isEliciting() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.eliciting > 0
}

// result starts a Result of the call's tool.
func (c *call) result(s Status) Result {
	return Result{Status: s, Tool: c.e.Name, Server: c.e.Server, ToolName: c.e.ToolName}
}

// signInResult is the result of a call of the sign-in tool that found the user signed in.
func (c *call) signInResult() Result {
	var names []string
	c.r.mu.RLock()
	for _, e := range c.e.srv.entries {
		if !e.signIn {
			names = append(names, e.ToolName)
		}
	}
	c.r.mu.RUnlock()
	text := fmt.Sprintf("Signed in to %s.", c.e.Server)
	if len(names) > 0 {
		text += fmt.Sprintf(" Its tools (callable as %s<tool>): %s.", toolName(c.e.Server, ""), strings.Join(names, ", "))
	}
	res := c.result(StatusOK)
	res.Content = &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: text}}}
	return res
}

// signInError maps the errors of an OAuth handler that end a call: *signin.NeedsSignIn is
// returned as the call's error (the caller parks the call and asks the user); a refusal is
// reported as a result. ok is false for any other error.
func (c *call) signInError(err error) (Result, error, bool) {
	var ns *signin.NeedsSignIn
	if errors.As(err, &ns) {
		c.r.log.InfoContext(c.logCtx, "mcp call needs the user to sign in", "server", c.e.Server, "tool", c.e.ToolName)
		args, merr := json.Marshal(c.args)
		if merr != nil {
			return Result{}, fmt.Errorf("mcp tool %s: encoding the arguments: %w", c.e.Name, merr), true
		}
		return Result{}, &SignInRequired{Server: c.e.Server, Tool: c.e.Name, ToolName: c.e.ToolName, Args: args, NeedsSignIn: ns}, true
	}
	if errors.Is(err, ErrAuthRequired) {
		reason := "Baton could not obtain the user's credentials for it."
		var are *AuthRequiredError
		if errors.As(err, &are) && are.Reason != "" {
			reason = are.Reason
		}
		c.r.log.InfoContext(c.logCtx, "mcp call not sent: the user's credentials could not be obtained", "server", c.e.Server, "tool", c.e.ToolName)
		r := c.result(StatusAuthRequired)
		r.Message = reason
		return r, nil, true
	}
	switch {
	case errors.Is(err, signin.ErrForbidden):
		return c.notCompleted(fmt.Sprintf("The MCP server %q refused access to this user.", c.e.Server), ""), nil, true
	case errors.Is(err, signin.ErrTooManySignIns):
		return c.notCompleted(fmt.Sprintf("The MCP server %q keeps asking for authorization; Baton stopped asking the user to sign in for now.", c.e.Server), ""), nil, true
	}
	return Result{}, nil, false
}
