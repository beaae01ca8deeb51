package mcpserver

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strings"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/baton-dev/baton/agui"
	"github.com/baton-dev/baton/bridge"
	"github.com/baton-dev/baton/cancel"
	"github.com/baton-dev/baton/subagent"
)

// tool is one tool of the surface: the coordinator tool (agent "") or an agent tool.
type tool struct {
	name  string
	agent string
	// tag stands for the tool in the ids of the threads its calls start (threadPrefix):
	// tasks/list finds the tool of a thread by it, whatever characters the name holds.
	tag string
}

// newTool returns the tool name of agent ("" for the coordinator tool).
func newTool(name, agent string) tool {
	h := sha256.Sum256([]byte(name))
	return tool{name: name, agent: agent, tag: hex.EncodeToString(h[:toolTagBytes])}
}

// threadPrefix starts the id of every thread a call starts: "mcp-<tool tag>-<random>". A
// thread of an older Baton is "mcp-<random>", without the tag.
const threadPrefix = "mcp-"

// toolTagBytes is the length of a tool's tag in bytes (hex: twice as many characters).
const toolTagBytes = 6

// newThreadID returns the id of a new thread of t.
func newThreadID(t tool) string { return newID(threadPrefix + t.tag + "-") }

// threadTag returns the tool tag in a thread's id; ok is false for a thread no call
// started, and tag is "" for one that an older Baton started.
func threadTag(threadID string) (tag string, ok bool) {
	rest, ok := strings.CutPrefix(threadID, threadPrefix)
	if !ok {
		return "", false
	}
	tag, _, tagged := strings.Cut(rest, "-")
	if !tagged {
		return "", true
	}
	return tag, len(tag) == 2*toolTagBytes
}

// args are a tool call's arguments.
type args struct {
	Prompt string
	Resume *resumeArg
}

type resumeArg struct {
	InterruptID string          `json:"interruptId"`
	Payload     json.RawMessage `json:"payload,omitempty"`
}

// invalidParams is the JSON-RPC error of a call whose arguments are refused: nothing is
// started.
func invalidParams(format string, a ...any) error {
	return &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: fmt.Sprintf(format, a...)}
}

// parseArgs reads and checks a call's arguments.
func parseArgs(raw json.RawMessage, maxPrompt int) (args, error) {
	if len(bytes.TrimSpace(raw)) == 0 || bytes.Equal(bytes.TrimSpace(raw), []byte("null")) {
		return args{}, invalidParams(`the arguments must be an object with a "prompt" string`)
	}
	var in struct {
		Prompt *string    `json:"prompt"`
		Resume *resumeArg `json:"resume"`
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&in); err != nil {
		var typeErr *json.UnmarshalTypeError
		switch {
		case errors.As(err, &typeErr) && typeErr.Field != "":
			return args{}, invalidParams("the argument %q must be %s, not %s", typeErr.Field, jsonKind(typeErr.Type.Kind().String()), typeErr.Value)
		case errors.As(err, &typeErr):
			return args{}, invalidParams(`the arguments must be an object with a "prompt" string`)
		case strings.HasPrefix(err.Error(), "json: unknown field "):
			return args{}, invalidParams("unknown argument %s: the tool takes \"prompt\" and \"resume\"", strings.TrimPrefix(err.Error(), "json: unknown field "))
		default:
			return args{}, invalidParams("the arguments are not valid JSON")
		}
	}
	if in.Prompt == nil {
		return args{}, invalidParams(`the argument "prompt" is required`)
	}
	if len(*in.Prompt) > maxPrompt {
		return args{}, invalidParams(`the argument "prompt" is %d bytes; at most %d are accepted`, len(*in.Prompt), maxPrompt)
	}
	if in.Resume == nil && strings.TrimSpace(*in.Prompt) == "" {
		return args{}, invalidParams(`the argument "prompt" must not be empty`)
	}
	if in.Resume != nil && in.Resume.InterruptID == "" {
		return args{}, invalidParams(`"resume" needs the "interruptId" of the question it answers`)
	}
	return args{Prompt: *in.Prompt, Resume: in.Resume}, nil
}

// jsonKind names a Go kind as the JSON type a client writes.
func jsonKind(kind string) string {
	switch kind {
	case "string":
		return "a string"
	case "struct", "map", "ptr":
		return "an object"
	}
	return "a " + kind
}

// call is one tools/call being served.
type call struct {
	s    *Server
	t    tool
	req  *mcp.CallToolRequest
	who  string
	prog *progress
}

// handler serves tools/call of t.
func (s *Server) handler(t tool) mcp.ToolHandler {
	return func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		a, err := parseArgs(req.Params.Arguments, s.cfg.MaxPromptBytes)
		if err != nil {
			return nil, err
		}
		ctx, stop := s.followRequest(ctx, req)
		defer stop()
		c := &call{s: s, t: t, req: req, who: s.principalOf(req), prog: newProgress(req, s.cfg.ProgressInterval)}
		var in *agui.RunAgentInput
		if req.Params.RequestState != "" {
			in, err = answers(req)
		} else {
			in, err = input(t, a)
		}
		if err != nil {
			return nil, err
		}
		if err := s.checkResume(ctx, in, c.who); err != nil {
			return nil, err
		}
		if in.Depth, err = callerDepth(req); err != nil {
			return nil, err
		}
		in.Budget = s.callerBudget(req)
		return c.run(ctx, in)
	}
}

// checkResume refuses, before anything starts, a resume of a thread that is not the
// caller's: one that does not exist (the engine would start a run that ends at once with
// INVALID_RESUME) or another caller's, with the same answer for both. Without a
// TaskEngine the engine's own refusal stands.
func (s *Server) checkResume(ctx context.Context, in *agui.RunAgentInput, who string) error {
	if len(in.Resume) == 0 || s.tasks == nil {
		return nil
	}
	_, err := s.tasks.Thread(ctx, in.ThreadID, who)
	if errors.Is(err, ErrNotFound) {
		return invalidParams("the interrupt %q is not open for this caller", interruptID(in.ThreadID, in.Resume[0].InterruptID))
	}
	if err != nil {
		return s.readFailed(ctx, err)
	}
	return nil
}

// depthKey is the _meta key of a calling Baton's run depth (contract §9c, §9d).
const depthKey = "baton/depth"

// maxCallerDepth bounds the depth a caller may claim.
const maxCallerDepth = 1 << 16

// callerDepth is the depth of the run a call starts: one more than the calling Baton's run
// (its _meta baton/depth), 0 (the engine's top) for any other client.
func callerDepth(req *mcp.CallToolRequest) (int, error) {
	v, ok := req.Params.Meta[depthKey]
	if !ok || v == nil {
		return 0, nil
	}
	f, isNum := v.(float64)
	if !isNum || f != math.Trunc(f) || f < 0 || f > maxCallerDepth {
		return 0, invalidParams("_meta %q must be a whole number from 0 to %d", depthKey, maxCallerDepth)
	}
	return int(f) + 1, nil
}

// callerBudget is the budget a calling Baton gives the run (its _meta baton/budget, as
// over A2A: contract §7), nil without one: the run keeps the smaller of its own budget and
// this one. A malformed budget is untrusted input: it is ignored (the run's own budget
// still holds, so nothing is ever raised) and logged.
func (s *Server) callerBudget(req *mcp.CallToolRequest) *agui.CallerBudget {
	b, err := subagent.ParseBudget(req.Params.Meta[subagent.BudgetKey])
	if err != nil {
		s.cfg.Logger.Warn("mcp: the caller's budget is ignored", "err", err)
		return nil
	}
	if b == nil {
		return nil
	}
	return &agui.CallerBudget{Tokens: b.Tokens, CostUSD: b.CostUSD}
}

// input is the run a call of t starts: a new thread with the prompt, or the resume of the
// thread whose question it answers.
func input(t tool, a args) (*agui.RunAgentInput, error) {
	in := &agui.RunAgentInput{RunID: newID("mcp-run-"), ProtocolVersion: agui.ProtocolVersion}
	if a.Resume == nil {
		in.ThreadID = newThreadID(t)
		content, _ := json.Marshal(a.Prompt)
		in.Messages = []agui.Message{{ID: newID("mcp-msg-"), Role: "user", Content: content}}
		return in, nil
	}
	threadID, id, ok := splitInterruptID(a.Resume.InterruptID)
	if !ok {
		return nil, invalidParams("unknown interruptId %q: use the one a result with status input_required gave", a.Resume.InterruptID)
	}
	in.ThreadID = threadID
	entry := agui.ResumeEntry{InterruptID: id, Status: agui.ResumeCancelled}
	switch p := bytes.TrimSpace(a.Resume.Payload); {
	case len(p) == 0 || bytes.Equal(p, []byte("null")):
		// No answer: the question is declined.
	case p[0] == '"':
		// A plain text answer to a text question.
		var text string
		_ = json.Unmarshal(p, &text)
		entry.Status, entry.Payload = agui.ResumeResolved, mustJSON(map[string]string{"text": text})
	default:
		entry.Status, entry.Payload = agui.ResumeResolved, json.RawMessage(p)
	}
	in.Resume = []agui.ResumeEntry{entry}
	return in, nil
}

// interruptID is the id a client answers a question with: the thread and the engine's
// interrupt id, so that any replica can resume it from the store.
func interruptID(threadID, id string) string { return threadID + "/" + id }

func splitInterruptID(s string) (threadID, id string, ok bool) {
	threadID, id, ok = strings.Cut(s, "/")
	return threadID, id, ok && agui.ValidID(threadID) && id != ""
}

// run starts the call's run and follows it to its end. A run that ends with questions
// asks them (inputRequests) when the client can be asked, and returns them otherwise.
func (c *call) run(ctx context.Context, in *agui.RunAgentInput) (*mcp.CallToolResult, error) {
	run, err := c.start(ctx, in)
	if err != nil {
		return c.startError(err, in)
	}
	out, err := c.follow(ctx, run)
	if err != nil {
		c.cancel(run, in)
		return nil, err
	}
	if len(out.interrupts) == 0 {
		return out.withUsage(out.result(c.t)), nil
	}
	if modes := modesOf(c.req); modes.form || modes.url {
		if res, ok := inputRequests(in.ThreadID, out.interrupts, modes); ok {
			return out.withUsage(res), nil
		}
	}
	return out.withUsage(askBack(c.t, in.ThreadID, out.interrupts)), nil
}

// start starts a run of the call's tool.
func (c *call) start(ctx context.Context, in *agui.RunAgentInput) (Run, error) {
	if c.t.agent == "" {
		return c.s.cfg.Engine.Start(ctx, in, c.who)
	}
	return c.s.cfg.Engine.Delegate(ctx, c.t.agent, in, c.who)
}

// Refusal is a start refused for a reason the caller can act on; Message is shown to it and
// holds no internal detail. It wraps ErrRefused.
type Refusal struct{ Message string }

func (r *Refusal) Error() string { return r.Message }

// Unwrap returns ErrRefused.
func (r *Refusal) Unwrap() error { return ErrRefused }

// startError answers a call whose run could not start.
func (c *call) startError(err error, in *agui.RunAgentInput) (*mcp.CallToolResult, error) {
	switch {
	case errors.Is(err, ErrForbidden) && len(in.Resume) > 0:
		return nil, invalidParams("the interrupt %q is not open for this caller", interruptID(in.ThreadID, in.Resume[0].InterruptID))
	case errors.Is(err, ErrForbidden):
		return nil, invalidParams("this conversation belongs to another caller")
	case errors.Is(err, ErrBusy):
		return errorResult(bridge.TagError, "Baton is busy (too many runs, or this conversation is running); try again shortly."), nil
	case errors.Is(err, ErrShuttingDown):
		return errorResult(bridge.TagError, "Baton is shutting down; try again shortly."), nil
	case errors.Is(err, ErrRefused):
		var r *Refusal
		if errors.As(err, &r) {
			return errorResult(bridge.TagError, r.Message), nil
		}
	}
	c.s.cfg.Logger.Warn("mcp: a run could not start", "tool", c.t.name, "err", err)
	return errorResult(bridge.TagError, "The run could not start."), nil
}

// follow relays the run's events (as progress) until its end, or until ctx ends (then it
// returns ctx's error and the run goes on: the caller cancels it).
func (c *call) follow(ctx context.Context, run Run) (*outcome, error) {
	rel := newRelay()
	defer c.prog.stop()
	for {
		_, evs, ended := run.NextFrom()
		for _, ev := range evs {
			if msg := rel.event(ev); msg != "" {
				c.prog.note(msg)
			}
		}
		c.prog.flush(ctx, time.Now())
		if ended || rel.ended {
			return rel.outcome(), nil
		}
		select {
		case <-run.Wake():
		case <-c.prog.due():
			c.prog.fired()
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
}

// cancel stops a run whose call was cancelled, and waits until it has ended and its
// downstream cancels are confirmed (or the cancel horizon has passed).
func (c *call) cancel(run Run, in *agui.RunAgentInput) {
	log := c.s.cfg.Logger
	if err := c.s.cfg.Engine.Stop(in.ThreadID, in.RunID, c.who); err != nil {
		log.Debug("mcp: stop of a cancelled call's run", "thread_id", in.ThreadID, "run_id", in.RunID, "err", err)
	}
	if left := awaitDownstream(run, c.s.cfg.CancelHorizon); len(left) > 0 {
		log.Warn("mcp: a cancelled call's downstream cancels were not confirmed", "thread_id", in.ThreadID, "run_id", in.RunID, "unconfirmed", strings.Join(left, "; "))
	}
}

// awaitDownstream waits until run has ended and none of its downstream cancels is pending, at most
// horizon; it returns those that were not confirmed.
func awaitDownstream(run Run, horizon time.Duration) []string {
	deadline := time.NewTimer(horizon)
	defer deadline.Stop()
	select {
	case <-run.Done():
	case <-deadline.C:
		return []string{"the run did not end within the cancel horizon"}
	}
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for {
		pending, failed := cancel.Outstanding(run.Cancellations())
		if len(pending) == 0 {
			return failed
		}
		select {
		case <-tick.C:
		case <-deadline.C:
			return append(failed, pending...)
		}
	}
}

// errorResult is a tool result with isError, its text starting with tag.
func errorResult(tag, text string) *mcp.CallToolResult {
	return &mcp.CallToolResult{
		IsError:           true,
		Content:           []mcp.Content{&mcp.TextContent{Text: "[" + tag + "]\n" + text}},
		StructuredContent: map[string]any{"status": "error", "tag": tag},
	}
}

func newID(prefix string) string {
	var b [12]byte
	_, _ = rand.Read(b[:])
	return prefix + hex.EncodeToString(b[:])
}

func mustJSON(v any) json.RawMessage {
	b, _ := json.Marshal(v)
	return b
}
