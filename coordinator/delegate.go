package coordinator

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/baton-dev/baton/agui"
	"github.com/baton-dev/baton/bridge"
	"github.com/baton-dev/baton/cancel"
	"github.com/baton-dev/baton/durable"
	"github.com/baton-dev/baton/hitl"
	"github.com/baton-dev/baton/store"
	"github.com/baton-dev/baton/subagent"
)

// subagentCall is one call of a sub-agent tool: its AG-UI attribution and its remote task
// (the A2A side of the exchange is a2a's own; this is the engine's).
//
// Design note: the A2A request runs on a context detached from the run, because a run that
// is cancelled before the sub-agent has told us its task id must still be able to cancel
// that task: the request is kept open (at most CancelTimeout) until the id arrives, then
// CancelTask is sent and only then is the request dropped. Observer callbacks and the
// closing of the delegation are serialised by mu, so no text can follow SUBAGENT_FINISHED.
type subagentCall struct {
	r      *Run
	agent  *Agent
	subID  string
	msgID  string
	callID string

	mu        sync.Mutex
	closed    bool
	textOpen  bool
	taskID    string
	contextID string
	// item is the remote task in the run's cancel scope; armed once the id is known.
	item *cancel.Item

	// out receives the end of the A2A exchange; stopSend drops its request, unless
	// detached (a timeout before the task id was known: the background goroutine then
	// releases it). Both owned by the run's goroutine.
	out      chan sent
	stopSend context.CancelFunc
	detached bool
}

func (d *subagentCall) onTask(taskID, contextID string) {
	d.mu.Lock()
	first := d.taskID == "" && taskID != ""
	if first {
		d.taskID, d.contextID = taskID, contextID
		d.item.ArmFor(d.r.owner, taskID, whileOwned(d.r.own, d.r.e.cancels.ownerCancel(d.r.owner, d.agent, cancelFunc(d.agent.Client))))
	}
	d.mu.Unlock()
	if !first {
		return
	}
	// Recorded in the store as soon as it is known, and before the delegation goes on (its
	// stream waits one write): if this replica dies, the one that takes the run over
	// follows the task (or, when the run cannot go on, cancels it) instead of taking the
	// call as in doubt; nothing is left running without an owner. Written here, on the
	// delegation's goroutine, which waits for it anyway; a write the store does not take
	// is retried by the log's writer, as before.
	_ = d.r.elog.NoteTaskNow(durable.Task{Agent: d.agent.Name, TaskID: taskID, ContextID: contextID, State: string(subagent.StateWorking),
		ToolCallID: d.callID, SubagentRunID: d.subID})
}

// whileOwned sends a task's cancel only while this replica holds the run. A replica that
// was paused past its lease, or cut off from the store, may learn of its client's
// disconnect before it learns that another replica took the run over and now follows the
// task: its cancel would end the new owner's work. Like any side effect (mayAct), the
// cancel waits while the lease is in doubt, and is not sent (cancel.ErrMoved) once the
// lease is known lost. The check is made until it passes once: the cancel's later attempts
// may come after the run ended here, when its lease is no longer renewed.
func whileOwned(own *durable.Owner, fn cancel.Func) cancel.Func {
	if !own.Leased() {
		return fn
	}
	var held atomic.Bool
	return func(ctx context.Context, id string) error {
		if !held.Load() {
			if err := own.MayAct(ctx); errors.Is(err, durable.ErrMoved) {
				return fmt.Errorf("%w: %w", cancel.ErrMoved, err)
			} else if err != nil {
				return err
			}
			held.Store(true)
		}
		return fn(ctx, id)
	}
}

func (d *subagentCall) onText(delta string) {
	if delta == "" {
		return
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.closed {
		return
	}
	if !d.textOpen {
		d.textOpen = true
		d.r.emit(&agui.TextMessageStart{MessageID: d.msgID, Role: "assistant", SubagentRunID: d.subID})
	}
	d.r.emit(&agui.TextMessageContent{MessageID: d.msgID, Delta: delta, SubagentRunID: d.subID})
}

// close ends the attributed text and the sub-agent with ev (SUBAGENT_FINISHED or _ERROR).
func (d *subagentCall) close(ev agui.Event) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.closed {
		return
	}
	d.closed = true
	if d.textOpen {
		d.r.emit(&agui.TextMessageEnd{MessageID: d.msgID, SubagentRunID: d.subID})
	}
	d.r.emit(ev)
}

func (d *subagentCall) ids() (string, string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.taskID, d.contextID
}

// delegate runs one sub-agent tool call and returns its tagged result.
func delegate(ctx context.Context, r *Run, t *toolset, a *Agent, callID string, args map[string]any) toolOutcome {
	req, refusal := delegationRequest(ctx, r, t, a, args)
	if refusal != nil {
		return *refusal
	}
	if ids, ok := sentIDsFrom(ctx); ok && req.TaskID == "" {
		// A new task: sent with the ids its journal intent recorded.
		req.MessageID, req.ContextID = ids.messageID, ids.contextID
	}
	return exchange(ctx, r, t, a, callID, "", req, false)
}

// delegationRequest is the request of a sub-agent call, or the refusal of its arguments.
func delegationRequest(ctx context.Context, r *Run, t *toolset, a *Agent, args map[string]any) (subagent.Request, *toolOutcome) {
	refuse := func(sig bridge.Signal) (subagent.Request, *toolOutcome) {
		o := signalOutcome(sig)
		return subagent.Request{}, &o
	}
	prompt, okPrompt := args["prompt"].(string)
	if !okPrompt || strings.TrimSpace(prompt) == "" {
		return refuse(bridge.Signal{
			Code: "validation_failed", Requested: a.Name,
			Message:          `A sub-agent call needs a non-empty "prompt" string.`,
			ValidNextActions: nextActions(r.guard, t, a.Name), Reason: "prompt is missing or not a non-empty string",
			Details: &bridge.Details{Field: "prompt", Got: args["prompt"]},
		})
	}
	req := subagent.Request{Prompt: prompt}
	if raw, present := args["task_id"]; present && raw != nil && raw != "" {
		taskID, ok := raw.(string)
		if !ok {
			return refuse(bridge.Signal{
				Code: "validation_failed", Requested: a.Name,
				Message:          `"task_id" must be a string taken from an [INPUT_REQUIRED:task_id=…] tag.`,
				ValidNextActions: nextActions(r.guard, t, a.Name), Reason: "task_id is not a string",
				Details: &bridge.Details{Field: "task_id", Got: raw},
			})
		}
		// Ids in tags are percent-encoded when they hold unusual characters; the model
		// copies them as shown.
		if decoded, ok := bridge.TaskIDFromArg("task_id=" + taskID); ok {
			taskID = decoded
		}
		if refusal := checkContinuation(ctx, r, t, a, taskID, &req); refusal != nil {
			return refuse(*refusal)
		}
	}
	return req, nil
}

// send runs one A2A message exchange for a tool call: a new task, a continuation chosen by
// the model, or the delivery of the user's answer on resume (subID reuses the suspended
// sub-agent's id then).
func send(ctx context.Context, r *Run, t *toolset, a *Agent, callID, subID string, req subagent.Request) toolOutcome {
	return exchange(ctx, r, t, a, callID, subID, req, false)
}

// describer is a Delegate that knows its agent's current description and skills (an
// subagent.Agent re-reads its card, so they can change while the engine runs).
type describer interface {
	Info() (subagent.Info, bool)
}

// describe returns the agent's description and skills: the current card's when the
// client knows them, else the configured ones. ok is false while the agent's card has not
// been read (the agent then answers [UNREACHABLE]).
func (a *Agent) describe() (description string, skills []subagent.Skill) {
	if dc, ok := a.Client.(describer); ok {
		if info, ok := dc.Info(); ok {
			return info.Description, info.Skills
		}
		if a.Description == "" {
			return "Sub-agent " + a.Name + " (its agent card has not been read yet; until it is, calls report the agent as unreachable).", nil
		}
	}
	return a.Description, a.Skills
}

// sent is how a delegation's A2A exchange ended.
type sent struct {
	res *subagent.Result
	err error
}

func (d *subagentCall) taskIDKnown() string {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.taskID
}

// delegationOutcome turns a finished delegation into events and its outcome. In ask_user mode an
// input-required or auth-required task raises an interrupt at once.
func delegationOutcome(r *Run, d *subagentCall, req subagent.Request, callID string, res *subagent.Result, err error, t *toolset) toolOutcome {
	if err != nil {
		taskID, _ := d.ids()
		code := "unreachable"
		switch {
		case errors.Is(err, subagent.ErrInvalidTransition):
			code = "invalid_transition"
		case errors.Is(err, subagent.ErrAuth):
			code = "auth_required"
		case errors.Is(err, subagent.ErrCapabilityGap):
			code = "capability_gap"
		}
		r.log.Warn("delegation failed", "agent", d.agent.Name, "task_id", taskID, "err", err)
		d.close(&agui.SubagentError{SubagentRunID: d.subID, Code: code, Message: "The sub-agent could not complete the request."})
		return a2aErrorOutcome(d.agent.Name, req, err, nextActions(r.guard, t, d.agent.Name))
	}
	r.e.rememberTask(r.ThreadID, res.TaskID, taskRef{agent: d.agent.Name, contextID: res.ContextID, state: res.State})
	countSubtree(r, d.agent.Name, res.Usage)
	if m := r.e.cfg.Metrics; m != nil {
		m.A2ATaskState(string(res.State))
	}
	switch res.State {
	case subagent.StateCompleted, subagent.StateMessage:
		d.emitFiles(res)
		d.close(&agui.SubagentFinished{SubagentRunID: d.subID, Outcome: &agui.SubagentOutcome{Type: "success"}})
	case subagent.StateInputRequired, subagent.StateAuthRequired:
		if d.agent.InputRequired != "model" {
			in := a2aInterrupt(r, d, callID, res)
			d.close(&agui.SubagentFinished{SubagentRunID: d.subID, Outcome: &agui.SubagentOutcome{Type: "suspended", InterruptIDs: []string{in.ID}}})
			return toolOutcome{interrupts: []store.Interrupt{in}, asks: res.State == subagent.StateInputRequired}
		}
		// Model mode: the LLM decides what to do with the question; the remote task stays
		// parked (it is not cancelled when the run ends).
		d.close(&agui.SubagentFinished{SubagentRunID: d.subID, Outcome: &agui.SubagentOutcome{Type: "suspended"}})
	default:
		// A sub-agent's own failure is the model's to handle, not an operational problem.
		r.log.Info("sub-agent task ended unsuccessfully", "agent", d.agent.Name, "task_id", res.TaskID, "state", string(res.State))
		d.close(&agui.SubagentError{SubagentRunID: d.subID, Code: string(res.State), Message: subagentEndMessage(res.State)})
	}
	return a2aOutcome(res)
}

// agentCtx is ctx with the run's principal's credentials for agent, when they signed in to
// it (A2ASignIn); the credentials go only to the agent, as HTTP headers of its calls.
func agentCtx(ctx context.Context, r *Run, a *Agent) context.Context {
	return ownerCtx(ctx, r.e.cfg.A2ASignIn, r.owner, a)
}

// ownerCtx is ctx with owner's credentials for agent from s (ctx itself when s is nil).
// Cancels need them as much as sends: an agent that requires auth refuses an anonymous
// CancelTask, and the task is orphaned.
func ownerCtx(ctx context.Context, s A2ASignIn, owner string, a *Agent) context.Context {
	if s != nil {
		return s.Authorize(ctx, owner, a.Name)
	}
	return ctx
}

// a2aInterrupt builds the interrupt for a task that waits for the user. An auth-required
// task of an agent whose card declares an OAuth flow gets a sign-in of its own
// (metadata.authorizationUrl); the user's resume then continues the task with their token.
func a2aInterrupt(r *Run, d *subagentCall, callID string, res *subagent.Result) store.Interrupt {
	question := bridge.UntrustedN(res.Text, 4000)
	var in store.Interrupt
	if res.State == subagent.StateAuthRequired {
		in = hitl.A2AAuth(r.e.hitlOptions(), d.agent.Name, res.TaskID, res.ContextID, question)
		if s := r.e.cfg.A2ASignIn; s != nil {
			u, exp, err := s.Start(r.ctx, r.owner, d.agent.Name, r.ThreadID, in.ID)
			switch {
			case err != nil:
				r.log.Warn("a2a sign-in could not be started; the user is asked to say when done", "agent", d.agent.Name, "err", err)
			case u != "" && hitl.SafeURL(u):
				in.Metadata["authorizationUrl"] = u
				if !exp.IsZero() {
					in.Metadata["signInExpiresAt"] = exp.UTC().Format("2006-01-02T15:04:05.000Z07:00")
				}
			}
		}
	} else {
		in = hitl.A2AInput(r.e.hitlOptions(), d.agent.Name, res.TaskID, res.ContextID, question)
	}
	in.ToolCallID = callID
	in.SubagentRunID = d.subID
	in.Handle = mustJSON(handle{Agent: d.agent.Name, TaskID: res.TaskID, ContextID: res.ContextID})
	return in
}

// checkContinuation refuses, without contacting the agent, a task_id that this thread did
// not start with this agent or that is not waiting for input; otherwise it fills req with
// the task and context ids. Tasks belong to threads (recorded with the thread, and saved
// with its suspension): an id from another thread, another principal, or the model's
// imagination is [RETRY:invalid_transition].
func checkContinuation(ctx context.Context, r *Run, t *toolset, a *Agent, taskID string, req *subagent.Request) *bridge.Signal {
	refuse := func(msg string) *bridge.Signal {
		return &bridge.Signal{
			Code: "invalid_transition", Requested: a.Name,
			Message:          msg,
			ValidNextActions: nextActions(r.guard, t, a.Name),
		}
	}
	ref, known := r.e.tasks.lookup(r.ThreadID, taskID)
	if !known {
		// Not in memory: the task may have been started by an earlier run of this thread
		// before a restart (or on another replica); the store keeps each run's tasks.
		r.e.tasks.load(ctx, r.e.cfg.Store, r.e.log, r.ThreadID)
		ref, known = r.e.tasks.lookup(r.ThreadID, taskID)
	}
	switch {
	case !known:
		return refuse("This conversation started no such task. Start a new task without task_id; never invent task ids.")
	case ref.agent != a.Name:
		return refuse("That task belongs to another sub-agent. Start a new task without task_id, or continue it with the agent that owns it.")
	case !ref.state.Interrupted():
		return refuse("That task is " + string(ref.state) + " and is not waiting for input. Start a new task without task_id.")
	}
	req.TaskID, req.ContextID = taskID, ref.contextID
	return nil
}

func errString(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

// subagentEndMessage words an unsuccessful end of a sub-agent's task for the user.
func subagentEndMessage(state subagent.State) string {
	switch state {
	case subagent.StateFailed:
		return "The sub-agent's task failed."
	case subagent.StateRejected:
		return "The sub-agent declined the task."
	case subagent.StateCanceled:
		return "The sub-agent's task was cancelled."
	default:
		return "The sub-agent's task did not complete."
	}
}
