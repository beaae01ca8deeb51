package coordinator

import (
	"context"
	"encoding/json"
	"errors"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/baton-dev/baton/bridge"
	cancelpkg "github.com/baton-dev/baton/cancel"
	"github.com/baton-dev/baton/durable"
	"github.com/baton-dev/baton/hitl"
	"github.com/baton-dev/baton/internal/toolname"
	"github.com/baton-dev/baton/llm"
	"github.com/baton-dev/baton/mcpclient"
	"github.com/baton-dev/baton/signin"
	"github.com/baton-dev/baton/store"
)

// SessionElicitor answers in-session (2025-11-25) MCP elicitations by asking the user.
//
// Design note: a 2025-11-25 server sends elicitation/create inside the tool call and waits
// for the answer, so the call cannot be parked in the store: it stays open in memory. The
// run that made the call ends with an interrupt while the call (and this handler) keep
// waiting; the resume run hands the answer to the waiter and takes over the call's result.
// The waiting time counts against no timeout. A restart loses the waiter: its resume gets a
// clear tool error instead of a hang, and the expiry answers "cancel" to the server.
type SessionElicitor struct {
	mu      sync.Mutex
	waiters map[string]*sessionWaiter
	closed  chan struct{}
	once    sync.Once
}

// NewSessionElicitor returns an elicitor to pass to both mcpclient.Options and Config.
func NewSessionElicitor() *SessionElicitor {
	return &SessionElicitor{waiters: map[string]*sessionWaiter{}, closed: make(chan struct{})}
}

// Close answers "cancel" to every question still waiting and to any asked later, so that
// MCP sessions can close at shutdown instead of waiting for users who are gone.
// The calls still open are cancelled too: an MCP session closes only once its calls end.
func (s *SessionElicitor) Close() {
	s.once.Do(func() { close(s.closed) })
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, w := range s.waiters {
		w.stop()
	}
}

type sessionResult struct {
	res mcpclient.Result
	err error
}

// sessionWaiter is one MCP call that may ask the user in-session.
type sessionWaiter struct {
	id     string
	callID string
	// signInID is the id of the sign-in interrupt, should the call need one: known before
	// the call, so that the sign-in it starts is bound to it.
	signInID string
	// home is the advertised URL of this replica (Config.AdvertiseURL), recorded with the
	// interrupt so that another replica can forward the resume here.
	home   string
	opts   hitl.Options
	asked  chan store.Interrupt   // the server asked; the run ends with this interrupt
	answer chan *mcp.ElicitResult // the user's answer, from the resume run
	result chan sessionResult     // the call's end
	stop   context.CancelFunc     // cancels the call
}

func (s *SessionElicitor) add(w *sessionWaiter) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.waiters[w.id] = w
}

func (s *SessionElicitor) remove(id string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.waiters, id)
}

func (s *SessionElicitor) get(id string) *sessionWaiter {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.waiters[id]
}

// answer hands res to the waiter id; false if it is unknown (e.g. lost to a restart).
func (s *SessionElicitor) answer(id string, res *mcp.ElicitResult) bool {
	if s == nil {
		return false
	}
	w := s.get(id)
	if w == nil {
		return false
	}
	select {
	case w.answer <- res:
		return true
	default:
		return false
	}
}

// Elicit implements mcpclient.Elicitor for in-session requests.
func (s *SessionElicitor) Elicit(ctx context.Context, req mcpclient.ElicitRequest) (*mcp.ElicitResult, error) {
	w, _ := req.CallKey.(*sessionWaiter)
	if w == nil {
		// Not a call the engine made, or several calls in flight on that server.
		return &mcp.ElicitResult{Action: "decline"}, nil
	}
	var in store.Interrupt
	if req.Mode == "url" {
		in = hitl.MCPURL(w.opts, req.Server, req.Tool, req.URL, req.Message)
	} else {
		schema, _ := req.Schema.(map[string]any)
		if schema == nil {
			schema = schemaMap(req.Schema)
		}
		in = hitl.MCPForm(w.opts, req.Server, req.Tool, req.Message, schema, mcpclient.ShapeSession)
	}
	in.ToolCallID = w.callID
	in.Handle = mustJSON(handle{Session: w.id, Home: w.home})
	select {
	case w.asked <- in:
	case <-ctx.Done():
		return nil, ctx.Err()
	case <-s.closed:
		return &mcp.ElicitResult{Action: "cancel"}, nil
	}
	expiry := time.NewTimer(time.Until(in.ExpiresAt))
	defer expiry.Stop()
	select {
	case res := <-w.answer:
		return res, nil
	case <-expiry.C:
		return &mcp.ElicitResult{Action: "cancel"}, nil
	case <-s.closed:
		return &mcp.ElicitResult{Action: "cancel"}, nil
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

func schemaMap(v any) map[string]any {
	if v == nil {
		return nil
	}
	var m map[string]any
	if err := jsonRoundTrip(v, &m); err != nil {
		return nil
	}
	return m
}

// callMCPSession runs an MCP call that may ask the user in-session. The call runs on a
// context detached from the run (it may outlive it while the user decides); the tool
// timeout is enforced here and paused while the user is being asked.
func callMCPSession(ctx context.Context, r *Run, t *toolset, c llm.ToolCall, args []byte) toolOutcome {
	idem := t.mcp[c.Name].Idempotent
	return runSessionCall(ctx, r, t, c.ID, c.Name, func(cctx context.Context, opts mcpclient.CallOptions) (mcpclient.Result, error) {
		// Recorded in the run's work document: a call that may have run is never re-issued
		// silently unless its tool is idempotent.
		r.elog.NoteCall(durable.Call{ToolCallID: c.ID, Tool: c.Name, Idempotent: idem, State: durable.CallStarted})
		defer r.elog.NoteCall(durable.Call{ToolCallID: c.ID, Tool: c.Name, Idempotent: idem, State: durable.CallDone})
		return r.e.cfg.Tools.Call(cctx, c.Name, args, opts)
	})
}

// runSessionCall runs call (a Call or a Resume) on a session waiter of its own, so that an
// in-session question from the server can be raised as an interrupt.
func runSessionCall(ctx context.Context, r *Run, t *toolset, callID, name string, call func(context.Context, mcpclient.CallOptions) (mcpclient.Result, error)) toolOutcome {
	s := r.e.cfg.Sessions
	callCtx, stop := context.WithCancel(context.WithoutCancel(ctx))
	w := &sessionWaiter{id: newID("sess"), callID: callID, home: r.e.cfg.AdvertiseURL, opts: r.e.hitlOptions(), signInID: hitl.NewID(),
		asked: make(chan store.Interrupt, 1), answer: make(chan *mcp.ElicitResult, 1), result: make(chan sessionResult, 1), stop: stop}
	// A sign-in the call starts is bound to this thread and to the interrupt that will show
	// it (signInID), for the callback.
	callCtx = signin.WithInterrupt(callCtx, r.ThreadID, w.signInID)
	s.add(w)
	opts, progress := mcpOptions(ctx, r, t, callID)
	opts.Key = w
	go func() {
		res, err := call(callCtx, opts)
		progress.flush()
		w.result <- sessionResult{res, err}
		// A call that ended while parked (its question expired or was cancelled) has
		// nobody to take its result: forget the waiter after a while. A resume takes the
		// result long before that, since the call only ends once it was answered.
		time.AfterFunc(time.Minute, func() { s.remove(w.id); stop() })
	}()
	return awaitSession(ctx, r, t, w, callID, name)
}

// awaitSession waits for the call to end, to ask the user, to be cancelled or to time out.
func awaitSession(ctx context.Context, r *Run, t *toolset, w *sessionWaiter, callID, name string) toolOutcome {
	item := r.scope.Track(cancelpkg.KindMCPCall, name)
	item.Arm("", func(context.Context, string) error { w.stop(); return nil })
	defer item.Release()
	timeout := time.NewTimer(r.e.cfg.Limits.ToolTimeout)
	defer timeout.Stop()
	select {
	case sr := <-w.result:
		r.e.cfg.Sessions.remove(w.id)
		w.stop()
		// A server that is another Baton reports what its run used, in the result or in
		// the question it parked the call with.
		meta := sr.res.Meta
		if need := (*mcpclient.InputRequired)(nil); errors.As(sr.err, &need) {
			meta = need.Meta
		}
		countCallUsage(r, name, meta)
		out := mcpOutcome(ctx, r, t, callID, name, sr.res, sr.err)
		for i := range out.interrupts {
			if out.interrupts[i].Kind == hitl.KindMCPAuth {
				out.interrupts[i].ID = w.signInID
			}
		}
		return out
	case in := <-w.asked:
		// The call stays open, waiting for the user; it no longer belongs to this run.
		return toolOutcome{interrupts: []store.Interrupt{in}}
	case <-ctx.Done():
		w.stop()
		<-w.result
		r.e.cfg.Sessions.remove(w.id)
		return toolOutcome{}
	case <-timeout.C:
		w.stop()
		<-w.result
		r.e.cfg.Sessions.remove(w.id)
		return signalOutcome(bridge.Signal{
			Code: "action_timeout", Requested: name,
			Message:          "The tool did not answer in time; the call was cancelled.",
			ValidNextActions: nextActions(r.guard, t, name), TimeoutSeconds: r.e.cfg.Limits.ToolTimeout.Seconds(),
		})
	}
}

// deliverSession hands the answer to a call still waiting in memory and takes its result.
func deliverSession(ctx context.Context, r *Run, t *toolset, callID string, in store.Interrupt, ans hitl.Answer) toolOutcome {
	h := decodeHandle(in)
	w := r.e.cfg.Sessions.get(h.Session)
	if w == nil {
		attempts := 1
		return signalOutcome(bridge.Signal{
			Code: "tool_error", Requested: metaTool(in),
			Message: "The tool's question was lost when the coordinator process that held the call restarted or stopped, so the call did not complete. Call the tool again if it is still needed.",
			// DESIGN §9: the interrupt counts as expired; the model is told so in the signal.
			ErrorMessage:     hitl.CodeInterruptExpired + ": the in-session elicitation was lost with its process",
			AttemptsLeft:     &attempts,
			ValidNextActions: []string{metaTool(in)},
		})
	}
	res := &mcp.ElicitResult{Action: "cancel"}
	if !ans.Cancelled {
		action, _ := ans.Payload["action"].(string)
		res.Action = action
		if content, ok := ans.Payload["content"].(map[string]any); ok && action == "accept" {
			res.Content = content
		}
	}
	if !r.e.cfg.Sessions.answer(w.id, res) {
		return taggedOutcome(bridge.TagError, bridge.Error("The tool's question can no longer be answered."))
	}
	return awaitSession(ctx, r, t, w, callID, metaTool(in))
}

// metaTool returns "<server>__<tool>" of an MCP interrupt, from its metadata.
func metaTool(in store.Interrupt) string {
	m, _ := in.Metadata["mcp"].(map[string]any)
	server, _ := m["server"].(string)
	tool, _ := m["tool"].(string)
	if server == "" {
		return tool
	}
	return toolname.MCP(server, tool)
}

func jsonRoundTrip(in, out any) error {
	b, err := json.Marshal(in)
	if err != nil {
		return err
	}
	return json.Unmarshal(b, out)
}
