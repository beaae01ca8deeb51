package a2aserver

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"iter"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/a2aproject/a2a-go/v2/a2asrv"
	"github.com/a2aproject/a2a-go/v2/errordetails"

	"github.com/baton-dev/baton/agui"
	"github.com/baton-dev/baton/cancel"
	"github.com/baton-dev/baton/runs"
)

// executor is a2asrv's AgentExecutor: each execution relays one engine run.
type executor struct {
	engine  Engine
	runs    Log     // nil: runs are followed only where they run
	signIns SignIns // nil: a sign-in is input-required (answered by a message)
	horizon time.Duration
	log     *slog.Logger

	mu   sync.Mutex
	live map[a2a.TaskID]*liveTask
}

// liveTask is a task whose run is relayed by an execution on this process.
type liveTask struct {
	threadID, runID string
	run             Run
	// canceling: CancelTask is stopping the run; the execution leaves the terminal
	// state to Cancel, which sets it once the downstream cancels are settled.
	canceling atomic.Bool
	// awaitingSignIn: the run ended with the task in auth-required, and the execution
	// waits for the sign-ins; a CancelTask withdraws the questions as for a task waiting
	// for input.
	awaitingSignIn atomic.Bool
}

func newExecutor(engine Engine, runs Log, horizon time.Duration, log *slog.Logger) *executor {
	return &executor{engine: engine, runs: runs, horizon: horizon, log: log, live: map[a2a.TaskID]*liveTask{}}
}

// Keys of the task metadata that Baton keeps on its tasks (under metaKey): the thread and
// the current run, and the interrupts the task waits on.
const (
	metaKey        = "baton"
	metaThread     = "threadId"
	metaRun        = "runId"
	metaInterrupts = "interrupts"
)

// Execute starts a run for the message (or resumes the run's interrupts with the answer
// in it, on a task that waits for input) and relays the run's events as A2A events.
func (x *executor) Execute(ctx context.Context, ec *a2asrv.ExecutorContext) iter.Seq2[a2a.Event, error] {
	return func(yield func(a2a.Event, error) bool) {
		who, ok := principalOf(ec)
		if !ok {
			yield(nil, a2a.ErrUnauthenticated)
			return
		}
		in, open, reply, err := runInput(ec)
		if err != nil {
			yield(nil, err)
			return
		}
		if reply != nil {
			yield(reply, nil)
			return
		}
		run, err := x.startWhenFree(ctx, in, who)
		if err != nil {
			if ev := refusal(ec, err); ev != nil {
				yield(ev, nil)
				return
			}
			if ec.StoredTask != nil && errors.Is(err, ErrBusy) {
				yield(askAgain(ec, open, "Baton is busy with this conversation; send the answer again shortly."), nil)
				return
			}
			yield(nil, startError(err))
			return
		}
		lt := &liveTask{threadID: in.ThreadID, runID: in.RunID, run: run}
		untrack := x.track(ec.TaskID, lt)
		defer func() { untrack() }()
		if ec.StoredTask == nil {
			// The task names its run from its first write: a replica that gets a
			// CancelTask or SubscribeToTask for it before the next one finds the run.
			task := a2a.NewSubmittedTask(ec, ec.Message)
			task.Metadata = taskMeta(in.ThreadID, in.RunID, nil)
			if !yield(task, nil) {
				return
			}
		}
		working := a2a.NewStatusUpdateEvent(ec, a2a.TaskStateWorking, nil)
		working.Metadata = taskMeta(in.ThreadID, in.RunID, nil)
		if !yield(working, nil) {
			return
		}
		awaitDownstream := func(r Run) string { return x.awaitDownstream(ctx, r) }
		rel := &relay{ec: ec, lt: lt, open: open, signIns: x.signIns != nil, awaitDownstream: awaitDownstream}
		relayRun(ctx, run, rel, yield)
		// auth-required is not final: the execution stays open while the user signs in
		// (a2asrv refuses messages to the task meanwhile), then resumes the run itself.
		for rel.waitingSignIn() {
			lt.awaitingSignIn.Store(true)
			resume, ok := x.awaitSignIns(ctx, who, rel.asked)
			if !ok {
				return // CancelTask withdraws the questions and reports the end
			}
			in := &agui.RunAgentInput{ThreadID: lt.threadID, RunID: newRunID(), ProtocolVersion: agui.ProtocolVersion, Resume: resume}
			run, err := x.engine.Start(ctx, in, who)
			if err != nil {
				x.log.Warn("a2a: the run could not go on after the sign-in", "task_id", ec.TaskID, "err", err)
				yield(status(ec, a2a.TaskStateFailed, "The run could not go on after the sign-in; send the request again."), nil)
				return
			}
			lt = &liveTask{threadID: in.ThreadID, runID: in.RunID, run: run}
			untrack()
			untrack = x.track(ec.TaskID, lt)
			working := a2a.NewStatusUpdateEvent(ec, a2a.TaskStateWorking, nil)
			working.Metadata = taskMeta(in.ThreadID, in.RunID, nil)
			if !yield(working, nil) {
				return
			}
			rel = &relay{ec: ec, lt: lt, open: rel.asked, signIns: true, awaitDownstream: awaitDownstream}
			relayRun(ctx, run, rel, yield)
		}
	}
}

// runInput is the run an execution starts: a new message for a new task, or the answer to
// the open questions of a task that waits for input. An error is an invalid request; a
// reply (the questions asked again, saying why) is a bad answer, which changes nothing.
func runInput(ec *a2asrv.ExecutorContext) (_ *agui.RunAgentInput, open []Question, reply *a2a.TaskStatusUpdateEvent, _ error) {
	if !agui.ValidID(ec.ContextID) {
		return nil, nil, nil, fmt.Errorf("%w: contextId must be 1 to 128 characters of [A-Za-z0-9._:-]", a2a.ErrInvalidParams)
	}
	in := &agui.RunAgentInput{ThreadID: ec.ContextID, RunID: newRunID(), ProtocolVersion: agui.ProtocolVersion}
	var err error
	if in.Depth, err = runDepth(ec.Message); err != nil {
		return nil, nil, nil, err
	}
	in.Budget = callerBudget(ec.Message)
	if ec.StoredTask != nil {
		open = questionsOf(ec.StoredTask)
		if len(open) == 0 {
			return nil, nil, nil, fmt.Errorf("%w: the task is not waiting for an answer", a2a.ErrInvalidParams)
		}
		resume, why := answer(open, ec.Message)
		if why != "" {
			return nil, open, askAgain(ec, open, why), nil
		}
		in.Resume = resume
		return in, open, nil, nil
	}
	text := textOf(ec.Message)
	if strings.TrimSpace(text) == "" {
		return nil, nil, nil, fmt.Errorf("%w: the message has no text", a2a.ErrInvalidParams)
	}
	content, _ := json.Marshal(text)
	in.Messages = []agui.Message{{ID: messageID(ec.Message), Role: "user", Content: content}}
	return in, nil, nil, nil
}

// track records the task's run as relayed here (for Cancel) until the returned func is
// called, unless another execution of the task has replaced it by then.
func (x *executor) track(id a2a.TaskID, lt *liveTask) (untrack func()) {
	x.mu.Lock()
	x.live[id] = lt
	x.mu.Unlock()
	return func() {
		x.mu.Lock()
		if x.live[id] == lt {
			delete(x.live, id)
		}
		x.mu.Unlock()
	}
}

// relayRun yields the run's events as A2A events until it ends, then the task's final
// status; until ctx ends instead when CancelTask stopped the run (Cancel reports its end).
// The answer's text is sent coalesced (relay.flush): the first chunk at once, then at
// most one chunk per chunkEvery or chunkBytes, and what is left before the final status.
func relayRun(ctx context.Context, run Run, rel *relay, yield func(a2a.Event, error) bool) {
	var sent time.Time // when the last chunk was sent
	timer := time.NewTimer(0)
	defer timer.Stop()
	<-timer.C
	armed := false
	flush := func() bool {
		if ev := rel.flush(); ev != nil {
			sent = time.Now()
			return yield(ev, nil)
		}
		return true
	}
	for {
		_, evs, ended := run.NextFrom()
		for _, ev := range evs {
			for _, out := range rel.event(ev) {
				if !flush() || !yield(out, nil) {
					return
				}
			}
			if rel.pending.Len() >= chunkBytes && !flush() {
				return
			}
		}
		if ended || rel.ended {
			break
		}
		if rel.pending.Len() > 0 && !armed {
			if wait := chunkEvery - time.Since(sent); wait > 0 {
				timer.Reset(wait)
				armed = true
			} else if !flush() {
				return
			}
		}
		select {
		case <-run.Wake():
		case <-timer.C:
			armed = false
			if !flush() {
				return
			}
		case <-ctx.Done():
			return
		}
	}
	if !flush() {
		return
	}
	if rel.final == nil {
		// Cancelled by CancelTask: Cancel reports the terminal state once the
		// downstream cancels are settled; this execution ends with it.
		<-ctx.Done()
		return
	}
	if rel.stopped && rel.awaitDownstream != nil {
		if msg := rel.awaitDownstream(run); msg != "" {
			rel.final = status(rel.ec, a2a.TaskStateCanceled, msg)
		}
	}
	yield(rel.final, nil)
}

// Cancel stops the task's run and reports it canceled once every downstream cancel is
// confirmed or its horizon has passed; the status message names those that were not.
func (x *executor) Cancel(ctx context.Context, ec *a2asrv.ExecutorContext) iter.Seq2[a2a.Event, error] {
	return func(yield func(a2a.Event, error) bool) {
		who, ok := principalOf(ec)
		if !ok {
			yield(nil, a2a.ErrUnauthenticated)
			return
		}
		x.mu.Lock()
		lt := x.live[ec.TaskID]
		x.mu.Unlock()
		var run Run
		msg := ""
		switch {
		case lt != nil && lt.awaitingSignIn.Load():
			// Waiting for sign-ins: nothing runs; the questions are withdrawn.
			run, msg = x.cancelIdle(ctx, ec, who)
		case lt != nil:
			lt.canceling.Store(true)
			if err := x.engine.Stop(lt.threadID, lt.runID, who); err != nil {
				x.log.Debug("a2a cancel: stop", "task_id", ec.TaskID, "err", err)
			}
			run = lt.run
		default:
			// No run of this task is relayed here: the task waits for an answer (its
			// parked work is cancelled by resuming every question as cancelled), or
			// its run went on elsewhere (stopped by id, on any replica).
			run, msg = x.cancelIdle(ctx, ec, who)
		}
		if run != nil {
			msg = x.awaitDownstream(ctx, run)
		}
		var m *a2a.Message
		if msg != "" {
			m = a2a.NewMessageForTask(a2a.MessageRoleAgent, ec, a2a.NewTextPart(msg))
		}
		ev := a2a.NewStatusUpdateEvent(ec, a2a.TaskStateCanceled, m)
		ev.Metadata = map[string]any{metaKey: map[string]any{metaInterrupts: []any{}}}
		yield(ev, nil)
	}
}

// cancelIdle cancels a task that no execution relays here and returns the run that does
// the cancelling, if any; or, when the task's run went on on another replica, the status
// message naming the downstream cancels that were not confirmed there (elsewhere.go).
func (x *executor) cancelIdle(ctx context.Context, ec *a2asrv.ExecutorContext, who string) (Run, string) {
	if ec.StoredTask == nil {
		return nil, ""
	}
	threadID, runID := runOf(ec.StoredTask)
	open := questionsOf(ec.StoredTask)
	if len(open) == 0 {
		msg := ""
		if threadID != "" && runID != "" {
			deadline := time.Now().Add(x.horizon)
			err := x.engine.Stop(threadID, runID, who)
			if err == nil {
				x.awaitEnd(ctx, who, threadID, runID)
			}
			// A run that had ended already (stopped before a restart, say) may still have
			// downstream cancels that were not confirmed: they are named as well.
			if x.runs != nil && !errors.Is(err, ErrForbidden) {
				msg = unconfirmedMessage(x.runs.Unconfirmed(ctx, who, threadID, runID, deadline))
			}
		}
		return nil, msg
	}
	in := &agui.RunAgentInput{ThreadID: threadID, RunID: newRunID(), ProtocolVersion: agui.ProtocolVersion}
	for _, q := range open {
		in.Resume = append(in.Resume, agui.ResumeEntry{InterruptID: q.InterruptID, Status: agui.ResumeCancelled})
	}
	run, err := x.engine.Start(ctx, in, who)
	if err != nil {
		x.log.Warn("a2a cancel: the waiting task's questions could not be withdrawn", "task_id", ec.TaskID, "err", err)
		return nil, ""
	}
	// The resume cancels the parked work before the model is called again; once the
	// parked calls have their results, the run is stopped (the caller cancelled the task,
	// nobody reads the rest).
	deadline := time.NewTimer(x.horizon)
	defer deadline.Stop()
	for {
		_, evs, ended := run.NextFrom()
		settled := ended
		for _, ev := range evs {
			if ev.EventType() == agui.EventToolCallResult {
				settled = true
			}
		}
		if settled {
			break
		}
		select {
		case <-run.Wake():
			continue
		case <-ctx.Done():
		case <-deadline.C:
		}
		break
	}
	_ = x.engine.Stop(threadID, in.RunID, who)
	return run, ""
}

// awaitEnd waits until a run stopped on another replica has ended there (the owner ends
// it once its downstream cancels are confirmed or their horizon has passed), at most
// until the horizon, so that CancelTask answers after the cancel took effect wherever it
// arrived.
func (x *executor) awaitEnd(ctx context.Context, who, threadID, runID string) {
	if x.runs == nil {
		return
	}
	deadline := time.NewTimer(x.horizon)
	defer deadline.Stop()
	tick := time.NewTicker(followPoll)
	defer tick.Stop()
	for {
		state, err := x.runs.RunState(ctx, who, threadID, runID)
		if err != nil || state != runs.RunGoingOn {
			return
		}
		select {
		case <-tick.C:
		case <-deadline.C:
			return
		case <-ctx.Done():
			return
		}
	}
}

// awaitDownstream waits for the run's end and for its downstream cancels to be confirmed, at most
// until the horizon, and returns the status message: empty when everything is confirmed,
// else the cancels that were not.
func (x *executor) awaitDownstream(ctx context.Context, run Run) string {
	deadline := time.NewTimer(x.horizon)
	defer deadline.Stop()
	select {
	case <-run.Done():
	case <-ctx.Done():
		return "The run was stopped; whether its downstream work was cancelled is not known."
	case <-deadline.C:
		return "The run was stopped; it did not end within the cancel horizon."
	}
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for {
		pending, failed := cancel.Outstanding(run.Cancellations())
		if len(pending) == 0 {
			if len(failed) == 0 {
				return ""
			}
			return "Canceled; these downstream cancellations were not confirmed: " + strings.Join(failed, "; ") + "."
		}
		select {
		case <-tick.C:
			continue
		case <-deadline.C:
		case <-ctx.Done():
		}
		return "Canceled; these downstream cancellations were not confirmed: " + strings.Join(append(failed, pending...), "; ") + "."
	}
}

// busyWait bounds how long a new message waits for its conversation's previous run to
// let go of the thread: a task's terminal event reaches the caller while its run is still
// storing its end, and a caller that sends the next message on the same context at once
// would otherwise be refused.
const busyWait = 2 * time.Second

// startWhenFree starts the run, trying again with a short backoff while the engine
// answers ErrBusy, for at most busyWait.
func (x *executor) startWhenFree(ctx context.Context, in *agui.RunAgentInput, who string) (Run, error) {
	deadline := time.Now().Add(busyWait)
	delay := 20 * time.Millisecond
	for {
		run, err := x.engine.Start(ctx, in, who)
		if err == nil || !errors.Is(err, ErrBusy) || time.Now().Add(delay).After(deadline) {
			return run, err
		}
		t := time.NewTimer(delay)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil, err
		case <-t.C:
		}
		delay *= 2
	}
}

// startError is the A2A error for a run that could not start.
func startError(err error) error {
	var budget *BudgetExceededError
	switch {
	case errors.As(err, &budget):
		return budget.a2aError()
	case errors.Is(err, ErrForbidden):
		return fmt.Errorf("%w: this conversation belongs to another user", a2a.ErrUnauthorized)
	case errors.Is(err, ErrBusy):
		return busyError("Baton is busy: this conversation already has an active task, or too many runs are active; retry shortly.")
	case errors.Is(err, ErrShuttingDown):
		return fmt.Errorf("%w: Baton is shutting down; try again shortly", a2a.ErrInternalError)
	default:
		return fmt.Errorf("%w: the run could not start", a2a.ErrInternalError)
	}
}

// retryAfter is the delay a busy answer suggests.
const retryAfter = time.Second

// busyError is the answer to a request refused for load: a server error (JSON-RPC -32000)
// that says to retry, with a google.rpc.RetryInfo detail, not an invalid request, which a
// client cannot tell from its own mistake.
func busyError(msg string) error {
	return a2a.NewError(a2a.ErrServerError, msg).
		WithTypedDetails(errordetails.NewTyped(retryInfoType, map[string]any{"retryDelay": fmt.Sprintf("%ds", int(retryAfter/time.Second))}))
}

// retryInfoType is the type URL of google.rpc.RetryInfo.
const retryInfoType = "type.googleapis.com/google.rpc.RetryInfo"

// taskMeta is the task metadata naming the thread and run, and the open questions.
func taskMeta(threadID, runID string, open []Question) map[string]any {
	qs := make([]any, 0, len(open))
	for _, q := range open {
		qs = append(qs, q.data())
	}
	return map[string]any{metaKey: map[string]any{metaThread: threadID, metaRun: runID, metaInterrupts: qs}}
}

// runOf returns the thread and run recorded on a task.
func runOf(t *a2a.Task) (threadID, runID string) {
	m, _ := t.Metadata[metaKey].(map[string]any)
	threadID, _ = m[metaThread].(string)
	runID, _ = m[metaRun].(string)
	if threadID == "" {
		threadID = t.ContextID
	}
	return threadID, runID
}

func newRunID() string {
	var b [12]byte
	_, _ = rand.Read(b[:])
	return "a2a-" + hex.EncodeToString(b[:])
}

// messageID is the AG-UI message id of an A2A message: its own when it is a valid id.
func messageID(m *a2a.Message) string {
	if m != nil && agui.ValidID(m.ID) {
		return m.ID
	}
	return newRunID()
}

// textOf joins the text parts of a message.
func textOf(m *a2a.Message) string {
	if m == nil {
		return ""
	}
	var parts []string
	for _, p := range m.Parts {
		if p == nil {
			continue
		}
		if t := p.Text(); t != "" {
			parts = append(parts, t)
		}
	}
	return strings.Join(parts, "\n")
}
