package subagent

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unicode/utf8"

	sdk "github.com/a2aproject/a2a-go/v2/a2a"
	a2alog "github.com/a2aproject/a2a-go/v2/log"
)

// Request is one message to delegate.
type Request struct {
	Prompt string
	// TaskID and ContextID, when set, continue an input-required or auth-required task.
	TaskID    string
	ContextID string
	// MessageID, when set, is the id of the message sent (A2A message ids are chosen by the
	// client); a new one is made otherwise. A caller that records it before sending can
	// later tell, with ContextID, which task its message started ([Agent.FindTask]) when
	// it never learned the task's id.
	MessageID string
	// Depth is the nesting depth of the caller's run (1 for a run a user started), sent in
	// the message metadata under DepthKey so that an agent that is itself a Baton can
	// bound how deep calls nest; 0 sends none.
	Depth int
	// Budget, when set, is the caller's remaining budget, sent in the message metadata
	// under BudgetKey (budget.go) for an agent that is itself a Baton to run within.
	Budget *Budget
}

// DepthKey is the message metadata key that carries the caller's run depth (contract §9c).
const DepthKey = "baton/depth"

// Observer receives progress while a delegation runs. Every func may be nil. Calls are
// never concurrent and none comes after Send returns; they are made on the goroutine that
// called Send, except Text for a status message held back by Options.StatusInterval,
// which a timer may report.
type Observer struct {
	// Task is called once, as soon as the task id is known.
	Task func(taskID, contextID string)
	// Text receives new text from status messages and artifacts, exactly once: nothing is
	// repeated or lost when a stream is resumed or replaced by polling. Text from a new
	// source (another message or artifact) starts on a new line.
	Text func(delta string)
	// State is called on each state change.
	State func(state State)
}

// Result is the outcome of a delegation.
type Result struct {
	State     State
	TaskID    string
	ContextID string
	// Text is the final status message text (for failed, rejected, canceled, input-required
	// and auth-required: the agent's message) and, for completed, the artifacts' text too;
	// for a direct message reply, its text. It holds at most Options.MaxResultText bytes
	// of artifact text.
	Text string
	// Omitted counts the bytes of artifact text left out of Text by Options.MaxResultText
	// (they were reported through [Observer.Text]).
	Omitted int64
	// Usage is what the agent reports its run used on this message (UsageKey in the
	// final status's metadata: an agent that is a Baton), bounded (ParseUsage); nil when
	// it reports nothing.
	Usage *Usage
	// Files are the file parts of a completed task's artifacts (or of a direct reply), as
	// bounded by MaxFileBytes; FilesOmitted counts those left out beyond the first 32.
	Files        []File
	FilesOmitted int
}

// Send delegates one message and returns once the task is terminal or interrupted.
// It streams when the card allows it and uses a blocking SendMessage otherwise; see the
// package doc for retries, stream resumption and continuations.
//
// When ctx is done, Send returns ctx.Err() wrapped (the caller then cancels the task: its id
// came through [Observer.Task], and [TaskIDOf] finds it in the error). Other errors wrap
// [ErrUnreachable], [ErrInvalidTransition], [ErrAuth], [ErrCapabilityGap] or the SDK error.
func (a *Agent) Send(ctx context.Context, req Request, obs Observer) (*Result, error) {
	// The caller's goroutine waits in here for as long as the agent works: this frame holds
	// only the delegation, made (start) and ended (end) by functions of their own, so that
	// what they need is not on the parked stack (design/streams.md, "Per-run goroutines
	// and stacks").
	ctx = a2alog.AttachLogger(ctx, a.logger)
	d, err := a.start(ctx, &req, obs)
	if err != nil {
		return nil, err
	}
	return d.end(d.run(ctx))
}

// start reads the agent's binding and makes the delegation of req.
func (a *Agent) start(ctx context.Context, req *Request, obs Observer) (*delegation, error) {
	b, err := a.current(ctx)
	if err != nil {
		if req.TaskID != "" {
			err = &TaskError{TaskID: req.TaskID, ContextID: req.ContextID, Err: err}
		}
		return nil, err
	}
	return a.newDelegation(b, *req, obs), nil
}

// end is Send's answer once the delegation ran and ended with err.
func (d *delegation) end(err error) (*Result, error) {
	d.pace.stop()
	if errors.Is(err, ErrUnreachable) {
		d.a.invalidate() // the agent may have moved or changed: read its card again
	}
	if err != nil {
		taskID, contextID := d.taskID, d.contextID
		if taskID == "" {
			taskID, contextID = d.req.TaskID, d.req.ContextID
		}
		if taskID != "" {
			err = &TaskError{TaskID: taskID, ContextID: contextID, Err: err}
		}
		return nil, err
	}
	return d.result(), nil
}

// Cancel asks the agent to cancel a task. A task that cannot be canceled because it is
// already terminal counts as canceled (nil). Canceling is idempotent, so failures that do
// not say something definite (task not found, authentication, unsupported) are retried
// while ctx and the attempt budget allow, as is an answer in which the task is not over yet.
func (a *Agent) Cancel(ctx context.Context, taskID string) error {
	_, err := a.CancelConfirm(ctx, taskID)
	return err
}

// CancelConfirm is [Agent.Cancel] that also says whether the task was already over (in a
// terminal state other than canceled, or not cancelable because it had ended) rather than
// canceled by this call: a caller that counts confirmations tells the two apart.
func (a *Agent) CancelConfirm(ctx context.Context, taskID string) (alreadyTerminal bool, err error) {
	ctx = a2alog.AttachLogger(ctx, a.logger)
	b, err := a.current(ctx)
	if err != nil {
		return false, fmt.Errorf("canceling task %s: %w", taskID, err)
	}
	for attempt := 1; ; attempt++ {
		terminal, final, rec, err := a.cancelAttempt(ctx, b, taskID)
		if final {
			return terminal, err
		}
		wait, ok := retryDelay(a.opts.RetryBackoff, attempt, rec)
		if attempt >= maxAttempts || !ok {
			return false, err
		}
		a.logger.Debug("a2a cancel not applied, retrying", "task", taskID, "attempt", attempt, "error", err)
		if sleep(ctx, wait) != nil {
			return false, fmt.Errorf("a2a: agent %q: canceling task %s: %w", a.Name, taskID, ctx.Err())
		}
	}
}

// CancelOnce is one attempt of [Agent.CancelConfirm]: one CancelTask and, when it does not
// settle the task, one GetTask to see whether the task is over; no retries and no waits.
// It is for a caller that retries with a pacing of its own (the engine's cancel
// confirmer), so that nothing is held while it backs off. A failure carries the agent's
// Retry-After ([RetryAfterOf]).
func (a *Agent) CancelOnce(ctx context.Context, taskID string) (alreadyTerminal bool, err error) {
	ctx = a2alog.AttachLogger(ctx, a.logger)
	b, err := a.current(ctx)
	if err != nil {
		return false, fmt.Errorf("canceling task %s: %w", taskID, err)
	}
	terminal, _, _, err := a.cancelAttempt(ctx, b, taskID)
	return terminal, err
}

// cancelAttempt makes one cancel attempt. final reports an answer that trying again cannot
// change (the task is over, a definite refusal, ctx done); otherwise err is the failure as
// it is reported when no attempt is left, and rec the HTTP status of the attempt.
func (a *Agent) cancelAttempt(ctx context.Context, b *binding, taskID string) (alreadyTerminal, final bool, rec *httpStatus, err error) {
	id := sdk.TaskID(taskID)
	client := b.client
	actx, rec := withStatus(ctx)
	task, err := client.CancelTask(actx, &sdk.CancelTaskRequest{ID: id})
	notCancelable := errors.Is(err, sdk.ErrTaskNotCancelable)
	switch {
	case err == nil && task.Status.State.Terminal():
		return task.Status.State != sdk.TaskStateCanceled, true, rec, nil
	case err == nil:
		err = fmt.Errorf("a2a: agent %q: task %s is still %s after the cancel", a.Name, taskID, stateOf(task.Status.State))
	case notCancelable:
		// Usually the task is over. a2a-go also says so for a parked task whose
		// execution is still winding down: then trying again works.
	case ctx.Err() != nil:
		return false, true, rec, fmt.Errorf("a2a: agent %q: canceling task %s: %w", a.Name, taskID, ctx.Err())
	case definiteRefusal(err):
		return false, true, rec, fmt.Errorf("canceling task %s: %w", taskID, classify(a.Name, err, rec, true))
	}
	// The task may have ended meanwhile (a cancel racing with the end of a task can get
	// a generic error): a terminal task is what the caller wanted.
	t, gerr := client.GetTask(ctx, &sdk.GetTaskRequest{ID: id})
	if gerr == nil && t.Status.State.Terminal() {
		return t.Status.State != sdk.TaskStateCanceled, true, rec, nil
	}
	if gerr != nil && notCancelable {
		return true, true, rec, nil
	}
	if notCancelable {
		return false, false, rec, withRetryAfter(fmt.Errorf("a2a: agent %q: canceling task %s: %w: %w", a.Name, taskID, ErrNotCancelable, err), rec)
	}
	return false, false, rec, withRetryAfter(fmt.Errorf("canceling task %s: %w", taskID, classify(a.Name, err, rec, true)), rec)
}

// definiteRefusal reports whether an error is an answer that repeating cannot change.
func definiteRefusal(err error) bool {
	for _, definite := range []error{sdk.ErrTaskNotFound, sdk.ErrInvalidParams, sdk.ErrUnauthenticated,
		sdk.ErrUnauthorized, sdk.ErrUnsupportedOperation, sdk.ErrUnsupportedContentType, sdk.ErrMethodNotFound} {
		if errors.Is(err, definite) {
			return true
		}
	}
	return false
}

// GetTask returns the current state of a task, as a [Result] built like Send's.
func (a *Agent) GetTask(ctx context.Context, taskID string) (*Result, error) {
	ctx = a2alog.AttachLogger(ctx, a.logger)
	b, err := a.current(ctx)
	if err != nil {
		return nil, fmt.Errorf("reading task %s: %w", taskID, err)
	}
	actx, rec := withStatus(ctx)
	task, err := b.client.GetTask(actx, &sdk.GetTaskRequest{ID: sdk.TaskID(taskID)})
	if err != nil {
		if ctx.Err() != nil {
			return nil, fmt.Errorf("a2a: agent %q: reading task %s: %w", a.Name, taskID, ctx.Err())
		}
		err = classify(a.Name, err, rec, true)
		if errors.Is(err, ErrUnreachable) {
			a.invalidate()
		}
		return nil, fmt.Errorf("reading task %s: %w", taskID, err)
	}
	d := a.newDelegation(b, Request{TaskID: taskID}, Observer{})
	d.silently(func() { d.applyTask(task) })
	return d.result(), nil
}

// delegation is the state of one Send.
type delegation struct {
	a     *Agent
	b     *binding // the card and client this delegation uses
	req   Request
	obs   Observer
	msgID string
	tr    *transcript
	pace  *pacer // holds back status messages that come too fast; its mu guards tr

	taskID    string
	contextID string
	state     State
	status    sdk.TaskStatus
	artifacts []*artifactView // in order of appearance
	reply     *sdk.Message    // a direct message reply

	// taskKnown mirrors taskID != "" for the goroutine that ends a request (requestContext).
	taskKnown atomic.Bool

	// fileBytes counts the inline file bytes the artifact views hold (files.go).
	fileBytes int64

	// baseline is the parked status of a continued task: seeing it again (a server that
	// streams the parked task first, a poll that comes too early) does not end the read.
	baseline *sdk.TaskStatus
	events   int // events applied from the current send (not from the seed)
	// usage is the last UsageKey metadata seen (a status update's or a task's), read
	// by result.
	usage any
}

// artifactView is one artifact as far as received: rendered incrementally (appended chunks
// are never re-rendered) and kept up to Options.MaxResultText.
type artifactView struct {
	id   sdk.ArtifactID
	r    renderer
	text cappedText
	// files are the view's file parts (files.go); kept counts the inline bytes the
	// delegation's views hold, across all of them.
	files        []File
	filesOmitted int
	kept         *int64
}

func (d *delegation) newArtifactView(id sdk.ArtifactID) *artifactView {
	return &artifactView{id: id, r: newRenderer(), text: cappedText{max: d.a.opts.MaxResultText}, kept: &d.fileBytes}
}

// add renders parts onto the view; each rendered piece also goes to emit.
func (v *artifactView) add(parts []*sdk.Part, emit func(string)) {
	v.noteFiles(parts)
	v.r.add(parts, func(s string) {
		v.text.write(s)
		if emit != nil {
			emit(s)
		}
	})
}

func (a *Agent) newDelegation(b *binding, req Request, obs Observer) *delegation {
	tr := newTranscript(obs.Text)
	return &delegation{
		a:     a,
		b:     b,
		req:   req,
		obs:   obs,
		msgID: cmp.Or(req.MessageID, sdk.NewMessageID()),
		tr:    tr,
		pace:  newPacer(a.opts.StatusInterval, tr),
	}
}

func (d *delegation) continuation() bool { return d.req.TaskID != "" }

func (d *delegation) run(ctx context.Context) error {
	if d.continuation() {
		if err := d.seed(ctx); err != nil {
			return err
		}
	}
	if d.b.info.Streaming {
		return d.stream(ctx)
	}
	return d.blocking(ctx)
}

// seed reads the task a continuation is about: an unknown or finished task is refused
// without sending; otherwise its content is taken as already reported and its status
// becomes the baseline. A failed read is not fatal: the send will tell.
func (d *delegation) seed(ctx context.Context) error {
	actx, rec := withStatus(ctx)
	task, err := d.b.client.GetTask(actx, &sdk.GetTaskRequest{ID: sdk.TaskID(d.req.TaskID)})
	if err != nil {
		if ctx.Err() != nil {
			return d.ctxErr(ctx)
		}
		if errors.Is(err, sdk.ErrTaskNotFound) {
			return classify(d.a.Name, err, rec, true)
		}
		d.a.logger.Debug("a2a continuation: reading the task failed, sending anyway", "task", d.req.TaskID, "error", err)
		d.noteTask(d.req.TaskID, d.req.ContextID)
		return nil
	}
	if task.Status.State.Terminal() {
		return fmt.Errorf("a2a: agent %q: task %s is already %s: %w", d.a.Name, d.req.TaskID, stateOf(task.Status.State), ErrInvalidTransition)
	}
	d.noteTask(string(task.ID), task.ContextID)
	d.silently(func() { d.applyTask(task) })
	st := task.Status
	d.baseline = &st
	return nil
}

// message builds the message to send; its id stays the same across retries so that a
// server that already got it can recognise it.
func (d *delegation) message() *sdk.Message {
	parts := []*sdk.Part{sdk.NewTextPart(d.req.Prompt)}
	if d.continuation() && d.baseline != nil {
		// An ADK agent asked with long-running function calls: it takes the answer only
		// as their function responses (adk.go).
		if calls := adkPendingCalls(d.baseline.Message); len(calls) > 0 {
			parts = adkAnswerParts(calls, d.req.Prompt)
		}
	}
	m := sdk.NewMessage(sdk.MessageRoleUser, parts...)
	m.ID = d.msgID
	m.TaskID = sdk.TaskID(d.req.TaskID)
	m.ContextID = d.req.ContextID
	if m.ContextID == "" && d.continuation() {
		m.ContextID = d.contextID
	}
	if d.req.Depth > 0 {
		m.Metadata = map[string]any{DepthKey: d.req.Depth}
	}
	if b := d.req.Budget; b != nil && !b.IsZero() {
		if m.Metadata == nil {
			m.Metadata = map[string]any{}
		}
		m.Metadata[BudgetKey] = b.Metadata()
	}
	return m
}

// drainWait bounds the wait for a stream's end after its terminal event.
const drainWait = 100 * time.Millisecond

// stream sends with SendStreamingMessage and reads until the task is terminal or
// interrupted, resuming a dropped stream. Each attempt is a function of its own and what
// follows it another (afterStream): the goroutine waits on the stream in streamOnce, and
// only the attempt's loop is on its stack then (design/streams.md, "Per-run goroutines and
// stacks").
func (d *delegation) stream(ctx context.Context) error {
	msg := d.message()
	for attempt := 1; ; attempt++ {
		if done, err := d.afterStream(ctx, attempt, d.streamOnce(ctx, msg)); done {
			return err
		}
	}
}

// streamAttempt is what one streaming send left: whether it brought an event, the error
// that ended it, and the HTTP status of its response.
type streamAttempt struct {
	got bool
	err error
	rec *httpStatus
}

// streamOnce sends msg once and reads its stream until the task is terminal or
// interrupted, the stream ends, or ctx is done with the task id known. A panic of the SDK
// while it reads the stream ends the attempt with an error, as recoverStream would; the
// guard is here rather than in a wrapping iterator, whose frame would be one more on the
// stack of the goroutine that waits on the stream.
func (d *delegation) streamOnce(ctx context.Context, msg *sdk.Message) (a streamAttempt) {
	dctx, rec, release, stopDrain := d.attemptContext(ctx)
	a.rec = rec
	var drain *time.Timer
	inBody := false
	defer func() {
		if drain != nil {
			drain.Stop()
		}
		stopDrain()
		release()
		if inBody {
			return // the loop's own panic, not the SDK's
		}
		if r := recover(); r != nil {
			a.err = fmt.Errorf("%w: %v", errSDKPanic, r)
		}
	}()
	for ev, err := range d.b.client.SendStreamingMessage(dctx, &sdk.SendMessageRequest{Message: msg}) {
		inBody = true
		if err != nil {
			a.err = err
			break
		}
		a.got = true
		if ctx.Err() != nil && d.taskID != "" {
			break
		}
		if d.apply(ev) {
			if d.reply == nil && stateOf(d.status.State).Terminal() {
				// A server ends the stream right after a terminal event: reading to the end
				// lets the connection be reused for the next call. One that keeps it open
				// is not waited for long.
				if drain == nil {
					drain = time.AfterFunc(drainWait, stopDrain)
				}
				inBody = false
				continue
			}
			break
		}
		inBody = false
	}
	return a
}

// attemptContext is the context of one streaming attempt (requestContext's, with the
// response's status recorded in rec), which stopDrain cancels; release ends the request.
// stopDrain is the request context's own cancel when it has one: a context more, under
// it, would cost every open delegation a context and its parent's map of children.
func (d *delegation) attemptContext(ctx context.Context) (dctx context.Context, rec *httpStatus, release func(), stopDrain context.CancelFunc) {
	sctx, cancel, release := d.requestContext(ctx)
	if cancel == nil {
		sctx, cancel = context.WithCancel(sctx)
	}
	dctx, rec = withStatus(sctx)
	return dctx, rec, release, cancel
}

// afterStream decides what follows an attempt: the end of the delegation (done, with its
// error), a resumption of the task's stream, or another attempt.
func (d *delegation) afterStream(ctx context.Context, attempt int, a streamAttempt) (done bool, err error) {
	if ctx.Err() != nil {
		return true, d.ctxErr(ctx)
	}
	if d.finished() {
		return true, nil
	}
	if a.got && d.taskID != "" {
		d.a.logger.Debug("a2a stream dropped, resuming", "task", d.taskID, "error", a.err)
		return true, d.resume(ctx)
	}
	if a.err == nil {
		if a.got {
			return true, fmt.Errorf("a2a: agent %q: stream ended without naming a task: %w", d.a.Name, sdk.ErrInvalidAgentResponse)
		}
		a.err = errEmptyStream
	}
	if err := d.retryWait(ctx, attempt, a.err, a.rec); err != nil {
		if errors.Is(err, errFollow) {
			return true, d.resume(ctx)
		}
		return true, err
	}
	return false, nil
}

// blocking sends with SendMessage for an agent that does not stream, asking it to return
// at once (ReturnImmediately; blocking:false on the 0.3 wire), so that the task id is known
// while the task runs and a cancel can reach it; then it follows the task by polling until
// it is terminal or interrupted. An agent that ignores the flag and answers when the task
// is done is handled the same way: its answer is final.
func (d *delegation) blocking(ctx context.Context) error {
	msg := d.message()
	cfg := &sdk.SendMessageConfig{ReturnImmediately: true}
	for attempt := 1; ; attempt++ {
		sctx, _, release := d.requestContext(ctx)
		actx, rec := withStatus(sctx)
		res, err := d.b.client.SendMessage(actx, &sdk.SendMessageRequest{Message: msg, Config: cfg})
		release()
		if err == nil && ctx.Err() != nil {
			d.apply(res) // the caller learns the task id, to cancel it
			return d.ctxErr(ctx)
		}
		if err == nil {
			if d.apply(res) {
				return nil
			}
			if d.taskID == "" {
				return fmt.Errorf("a2a: agent %q: answer without a task: %w", d.a.Name, sdk.ErrInvalidAgentResponse)
			}
			return d.poll(ctx)
		}
		if ctx.Err() != nil {
			return d.ctxErr(ctx)
		}
		if err := d.retryWait(ctx, attempt, err, rec); err != nil {
			if errors.Is(err, errFollow) {
				return d.poll(ctx)
			}
			return err
		}
	}
}

// requestContext returns the context of an initial send: it ends with ctx, except that
// while the task id is unknown it lives on for Options.IDGrace, so that the caller can
// still learn the id and cancel the task. release must be called when the request is over.
// cancel, nil when the request's context is ctx itself, ends the request sooner.
func (d *delegation) requestContext(ctx context.Context) (_ context.Context, cancel context.CancelFunc, release func()) {
	grace := d.a.opts.IDGrace
	if grace < 0 || d.taskID != "" {
		return ctx, nil, func() {}
	}
	sctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	var (
		mu    sync.Mutex
		timer *time.Timer
	)
	stopAfter := context.AfterFunc(ctx, func() {
		mu.Lock()
		defer mu.Unlock()
		if d.taskKnown.Load() {
			cancel()
			return
		}
		timer = time.AfterFunc(grace, cancel)
	})
	return sctx, cancel, func() {
		stopAfter()
		mu.Lock()
		if timer != nil {
			timer.Stop()
		}
		mu.Unlock()
		cancel()
	}
}

// retryWait decides whether a failed initial send is attempted again, and waits; it
// returns the error to report when not.
func (d *delegation) retryWait(ctx context.Context, attempt int, err error, rec *httpStatus) error {
	if !isTransient(err, rec) && d.followInstead(err) {
		d.a.logger.Debug("a2a continuation refused, following the parked task", "task", d.taskID, "error", err)
		return errFollow
	}
	protocol := isProtocolError(err, rec)
	if (!isTransient(err, rec) && !protocol) || attempt >= maxAttempts {
		return classify(d.a.Name, err, rec, d.continuation())
	}
	if protocol && d.taskID == "" {
		// The agent may have moved or changed its interface: the next attempt uses a
		// freshly read card (the message id stays the same).
		d.a.invalidate()
		if b, berr := d.a.current(ctx); berr == nil {
			d.b = b
		}
	}
	wait, ok := retryDelay(d.a.opts.RetryBackoff, attempt, rec)
	if !ok {
		return fmt.Errorf("a2a: agent %q: asked to retry after %s: %w: %w", d.a.Name, wait, ErrUnreachable, err)
	}
	d.a.logger.Debug("a2a send failed, retrying", "attempt", attempt, "wait", wait, "error", err)
	if sleep(ctx, wait) != nil {
		return d.ctxErr(ctx)
	}
	return nil
}

// errFollow tells a sender to follow the task instead of failing (see followInstead).
var errFollow = errors.New("follow the task")

// followInstead reports whether a refused continuation should follow the task instead: a
// server that keeps the execution of an auth-required task running (a2a-go does: the
// credentials arrive out of band) refuses a new message for it with a generic error, and
// the task goes on by itself. Refusals that say something definite are reported.
func (d *delegation) followInstead(err error) bool {
	if !d.continuation() || d.baseline == nil || stateOf(d.baseline.State) != StateAuthRequired {
		return false
	}
	return !definiteRefusal(err)
}

// resume follows a task whose stream dropped: SubscribeToTask, then GetTask polling.
func (d *delegation) resume(ctx context.Context) error {
	for i := 0; i < d.a.opts.MaxResubscribe; i++ {
		actx, rec := withStatus(ctx)
		var subErr error
		for ev, err := range recoverStream(d.b.client.SubscribeToTask(actx, &sdk.SubscribeToTaskRequest{ID: sdk.TaskID(d.taskID)})) {
			if err != nil {
				subErr = err
				break
			}
			if d.apply(ev) {
				return nil
			}
		}
		if ctx.Err() != nil {
			return d.ctxErr(ctx)
		}
		if subErr != nil && !isTransient(subErr, rec) {
			// No active execution (the task is parked or over), or resubscribing is not
			// supported: the task itself tells.
			d.a.logger.Debug("a2a resubscribe refused, polling", "task", d.taskID, "error", subErr)
			break
		}
		d.a.logger.Debug("a2a resubscribe ended early", "task", d.taskID, "error", subErr)
		if sleep(ctx, d.a.opts.PollInterval) != nil {
			return d.ctxErr(ctx)
		}
	}
	return d.poll(ctx)
}

// poll reads the task until it is terminal or interrupted. The period starts at
// Options.PollInterval and grows by half each time the task did not change, up to
// Options.MaxPollInterval, so that a long task is not read several times a second for its
// whole life; a change brings it back to PollInterval. The caller's context (the
// delegation's timeout) bounds the whole.
func (d *delegation) poll(ctx context.Context) error {
	failures := 0
	period := d.a.opts.PollInterval
	for {
		actx, rec := withStatus(ctx)
		task, err := d.b.client.GetTask(actx, &sdk.GetTaskRequest{ID: sdk.TaskID(d.taskID)})
		wait := period
		switch {
		case err == nil:
			failures = 0
			before := d.status
			if d.apply(task) {
				return nil
			}
			if sameStatus(before, d.status) {
				period = min(period+period/2, max(d.a.opts.MaxPollInterval, d.a.opts.PollInterval))
			} else {
				period = d.a.opts.PollInterval
			}
			wait = period
		case ctx.Err() != nil:
			return d.ctxErr(ctx)
		case !isTransient(err, rec) && !isProtocolError(err, rec):
			return classify(d.a.Name, err, rec, d.continuation())
		default:
			failures++
			if failures >= maxAttempts {
				return classify(d.a.Name, err, rec, d.continuation())
			}
			w, ok := retryDelay(d.a.opts.RetryBackoff, failures, rec)
			if !ok {
				return fmt.Errorf("a2a: agent %q: asked to retry after %s: %w: %w", d.a.Name, w, ErrUnreachable, err)
			}
			wait = max(wait, w)
		}
		if sleep(ctx, wait) != nil {
			return d.ctxErr(ctx)
		}
	}
}

func (d *delegation) ctxErr(ctx context.Context) error {
	return fmt.Errorf("a2a: agent %q: delegation stopped: %w", d.a.Name, ctx.Err())
}

// silently applies updates without reporting text or state changes.
func (d *delegation) silently(f func()) {
	d.tr.silent = true
	defer func() { d.tr.silent = false }()
	f()
}

// apply integrates one event or result and reports whether reading can stop.
func (d *delegation) apply(ev sdk.Event) bool {
	d.pace.mu.Lock()
	defer d.pace.mu.Unlock()
	first := d.events == 0
	d.events++
	switch e := ev.(type) {
	case *sdk.Message:
		if d.taskID == "" || e.TaskID == "" {
			// A direct reply, also to a continuation: the agent answered without the task.
			d.reply = e
			if e.ContextID != "" {
				d.contextID = e.ContextID
			}
			d.pace.release()
			d.tr.set(messageKey(e), PartsText(e.Parts))
			d.setState(StateMessage)
			return true
		}
		d.applyMessage(e)
	case *sdk.Task:
		d.noteTask(string(e.ID), e.ContextID)
		if first && d.continuation() && d.baseline == nil && stateOf(e.Status.State).Interrupted() {
			// The continued task could not be read beforehand: a parked task streamed
			// first is the old state, whose text was reported by the previous Send.
			st := e.Status
			d.baseline = &st
			d.silently(func() { d.applyTask(e) })
		} else {
			d.applyTask(e)
		}
	case *sdk.TaskStatusUpdateEvent:
		d.noteTask(string(e.TaskID), e.ContextID)
		d.noteUsage(e.Metadata)
		d.applyStatus(e.Status)
	case *sdk.TaskArtifactUpdateEvent:
		d.noteTask(string(e.TaskID), e.ContextID)
		d.applyArtifact(e)
	}
	return d.finished()
}

// finished reports whether the task is terminal, or interrupted in a status that is not the
// baseline of a continuation.
func (d *delegation) finished() bool {
	if d.reply != nil {
		return true
	}
	st := stateOf(d.status.State)
	if st.Terminal() {
		return true
	}
	if !st.Interrupted() {
		if st != "" {
			d.baseline = nil // the task moved on; the old parked status cannot come back
		}
		return false
	}
	if d.baseline != nil && sameStatus(d.status, *d.baseline) {
		return false
	}
	return true
}

// sameStatus reports whether two statuses are the same status update (not merely the same
// state): same status message, or no message and the same timestamp.
func sameStatus(a, b sdk.TaskStatus) bool {
	if a.State != b.State {
		return false
	}
	if a.Message != nil && b.Message != nil {
		return a.Message.ID != "" && a.Message.ID == b.Message.ID
	}
	if a.Message == nil && b.Message == nil && a.Timestamp != nil && b.Timestamp != nil {
		return a.Timestamp.Equal(*b.Timestamp)
	}
	return false
}

func (d *delegation) noteTask(taskID, contextID string) {
	if d.contextID == "" && contextID != "" {
		d.contextID = contextID
	}
	if d.taskID != "" || taskID == "" {
		return
	}
	d.taskID = taskID
	d.taskKnown.Store(true)
	if d.obs.Task != nil {
		d.obs.Task(d.taskID, d.contextID)
	}
}

func (d *delegation) setState(s State) {
	if s == "" || s == d.state {
		return
	}
	d.state = s
	if d.obs.State != nil && !d.tr.silent {
		d.obs.State(s)
	}
}

// applyTask integrates a snapshot, which is authoritative: missed agent messages from the
// history, then the artifacts, then the status.
func (d *delegation) applyTask(t *sdk.Task) {
	d.noteUsage(t.Metadata)
	for _, m := range d.newHistory(t.History) {
		d.applyMessage(m)
	}
	if st := stateOf(t.Status.State); st == StateWorking || st == StateSubmitted {
		// The status message of a task still at work came before the artifacts it is
		// producing (a poll in the middle of a run sees both): report it first, in the
		// order a stream would have had.
		d.applyStatus(t.Status)
	}
	views := make([]*artifactView, 0, len(t.Artifacts))
	d.fileBytes = 0 // the snapshot's views replace every view
	for _, art := range t.Artifacts {
		if art == nil {
			continue
		}
		v := d.newArtifactView(art.ID)
		var full strings.Builder
		v.add(art.Parts, func(s string) { full.WriteString(s) })
		views = append(views, v)
		d.pace.release()
		d.tr.set(artifactKey(v.id), full.String())
	}
	d.artifacts = views
	d.applyStatus(t.Status)
}

// newHistory returns the agent messages of a snapshot's history that came after our own
// message. Without our message in the history, a new task's history is all ours, while a
// continued task's history is about earlier turns.
func (d *delegation) newHistory(history []*sdk.Message) []*sdk.Message {
	start := -1
	for i, m := range history {
		if m != nil && m.ID == d.msgID {
			start = i + 1
		}
	}
	if start < 0 {
		if d.continuation() {
			return nil
		}
		start = 0
	}
	var out []*sdk.Message
	for _, m := range history[start:] {
		if m != nil && m.Role == sdk.MessageRoleAgent {
			out = append(out, m)
		}
	}
	return out
}

func (d *delegation) applyMessage(m *sdk.Message) {
	if m == nil || m.Role == sdk.MessageRoleUser {
		return
	}
	d.pace.release()
	d.tr.set(messageKey(m), PartsText(m.Parts))
}

func (d *delegation) applyStatus(st sdk.TaskStatus) {
	if st.State == sdk.TaskStateUnspecified {
		st.State = d.status.State
	}
	d.status = st
	atWork := st.State == sdk.TaskStateWorking || st.State == sdk.TaskStateSubmitted
	switch {
	case st.Message != nil && atWork:
		// A status of a task at work is replaced by the next: paced (pace.go).
		d.pace.status(messageKey(st.Message), PartsText(st.Message.Parts))
	case st.Message != nil:
		d.pace.release()
		d.tr.set(messageKey(st.Message), PartsText(st.Message.Parts))
	default:
		if !atWork {
			d.pace.release()
		}
	}
	d.setState(stateOf(st.State))
}

func (d *delegation) applyArtifact(e *sdk.TaskArtifactUpdateEvent) {
	if e.Artifact == nil {
		return
	}
	d.pace.release()
	var v *artifactView
	for _, a := range d.artifacts {
		if a.id == e.Artifact.ID {
			v = a
			break
		}
	}
	key := artifactKey(e.Artifact.ID)
	if v == nil || !e.Append {
		// A new artifact, or a replaced one: its text is known whole, and the transcript
		// compares it with what was reported.
		nv := d.newArtifactView(e.Artifact.ID)
		var full strings.Builder
		nv.add(e.Artifact.Parts, func(s string) { full.WriteString(s) })
		if v == nil {
			d.artifacts = append(d.artifacts, nv)
		} else {
			*v = *nv
		}
		d.tr.set(key, full.String())
		return
	}
	// An appended chunk extends the artifact: only the chunk is rendered and reported.
	v.add(e.Artifact.Parts, func(s string) { d.tr.add(key, s) })
}

func artifactKey(id sdk.ArtifactID) string { return "artifact:" + string(id) }

func messageKey(m *sdk.Message) string {
	if m.ID == "" {
		return "message:" + PartsText(m.Parts)
	}
	return "message-id:" + m.ID
}

// result builds the Result from the delegation's view of the task.
func (d *delegation) result() *Result {
	res := &Result{State: d.state, TaskID: d.taskID, ContextID: d.contextID, Usage: d.reportedUsage()}
	if d.state == StateCompleted || d.state == StateMessage {
		res.Files, res.FilesOmitted = d.files()
	}
	if d.reply != nil {
		res.Text = PartsText(d.reply.Parts)
		return res
	}
	var statusText string
	if d.status.Message != nil {
		statusText = PartsText(d.status.Message.Parts)
	}
	var arts []string
	room := d.a.opts.MaxResultText
	for _, v := range d.artifacts {
		t := v.text.String()
		if v.text.omitted > 0 {
			res.Omitted += v.text.omitted
		}
		if t == "" {
			continue
		}
		if len(t) > room {
			cut := room
			for cut > 0 && !utf8.RuneStart(t[cut]) {
				cut--
			}
			res.Omitted += int64(len(t) - cut)
			t = t[:cut]
		}
		room -= len(t)
		if t != "" {
			arts = append(arts, t)
		}
	}
	switch {
	case d.state == StateCompleted:
		if statusText != "" {
			arts = append(arts, statusText)
		}
		res.Text = strings.Join(arts, "\n")
	case statusText != "":
		res.Text = statusText
	default:
		res.Text = strings.Join(arts, "\n")
	}
	return res
}

// Follow follows a task that an earlier Send started (in another process, say one that
// died: a replica taking its run over) until the task is terminal or interrupted, and
// returns its outcome like Send. Nothing is sent to the task: it is read (GetTask), then
// followed with SubscribeToTask, and polled with GetTask when the subscription ends or is
// refused. What the task holds when it is first read is taken as already reported (the
// earlier Send streamed it); only what comes after reaches [Observer.Text]. An unknown
// task is an error wrapping [ErrInvalidTransition].
func (a *Agent) Follow(ctx context.Context, taskID, contextID string, obs Observer) (*Result, error) {
	ctx = a2alog.AttachLogger(ctx, a.logger)
	fail := func(err error) (*Result, error) {
		return nil, &TaskError{TaskID: taskID, ContextID: contextID, Err: err}
	}
	b, err := a.current(ctx)
	if err != nil {
		return fail(err)
	}
	d := a.newDelegation(b, Request{}, obs)
	defer d.pace.stop()
	d.noteTask(taskID, contextID)
	actx, rec := withStatus(ctx)
	task, err := b.client.GetTask(actx, &sdk.GetTaskRequest{ID: sdk.TaskID(taskID)})
	if err != nil {
		if ctx.Err() != nil {
			return fail(d.ctxErr(ctx))
		}
		if errors.Is(err, ErrUnreachable) || isTransient(err, rec) {
			// Not read now; the subscription and the polling that follows will tell.
			a.logger.Debug("a2a follow: reading the task failed, subscribing anyway", "task", taskID, "error", err)
		} else {
			return fail(classify(a.Name, err, rec, true))
		}
	} else {
		d.silently(func() { d.applyTask(task) })
		if d.finished() {
			return d.result(), nil
		}
	}
	if err := d.resume(ctx); err != nil {
		if errors.Is(err, ErrUnreachable) {
			a.invalidate()
		}
		return fail(err)
	}
	return d.result(), nil
}
