package coordinator

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/baton-dev/baton/agui"
	"github.com/baton-dev/baton/bridge"
	"github.com/baton-dev/baton/cancel"
	"github.com/baton-dev/baton/llm"
	"github.com/baton-dev/baton/prompts"
	"github.com/baton-dev/baton/store"
)

// Run is one AG-UI run executing in the engine.
type Run struct {
	ThreadID string
	RunID    string
	owner    string

	e      *Engine
	in     *agui.RunAgentInput
	log    *slog.Logger
	seq    *agui.Sequencer
	q      *eventQueue
	ctx    context.Context
	cancel context.CancelCauseFunc
	done   chan struct{}
	// released is closed when the thread is free for its next run (right after the
	// terminal event); done follows once downstream cleanup has finished.
	released chan struct{}

	// scope holds what the run has in flight downstream, to cancel it all at once.
	scope *cancel.Scope

	endReason atomic.Value // string
	// fatal holds the first terminal tool failure (on_tool_error: error).
	fatalMu sync.Mutex
	fatal   error
}

func newRun(e *Engine, in *agui.RunAgentInput) *Run {
	ctx, stop := context.WithCancelCause(context.Background())
	r := &Run{
		ThreadID: in.ThreadID,
		RunID:    in.RunID,
		e:        e,
		in:       in,
		log:      e.log.With("thread_id", in.ThreadID, "run_id", in.RunID),
		q:        newEventQueue(),
		ctx:      ctx,
		cancel:   stop,
		done:     make(chan struct{}),
		released: make(chan struct{}),
	}
	r.seq = agui.NewSequencer(r.q.push, agui.SequencerOptions{Legacy: in.Legacy(), Now: e.cfg.Now})
	r.scope = cancel.NewScope(cancel.Options{Timeout: e.cfg.CancelTimeout, OnReport: r.logCancel})
	return r
}

// Next returns the events produced since the last call, and whether the stream has ended.
// wake fires when more events may be available.
func (r *Run) Next() (events []agui.Event, ended bool) { return r.q.take() }

// Wake returns a channel that receives when new events may be available.
func (r *Run) Wake() <-chan struct{} { return r.q.wake }

// Done is closed when the run has ended and all its downstream work has been cancelled.
func (r *Run) Done() <-chan struct{} { return r.done }

// Released is closed when the run's thread accepts a new run (right after its terminal
// event). A stream should end only then, so that a client's next request never races it.
func (r *Run) Released() <-chan struct{} { return r.released }

// Cancel cancels the run with cause (ErrClientGone, ErrStopped, ErrShutdown, ...). The
// downstream cancellation starts before the run's context ends, so that every piece in
// flight is claimed (and recorded) by the cancellation rather than ending on its own.
func (r *Run) Cancel(cause error) {
	r.scope.Begin(cause)
	r.cancel(cause)
}

// Cancellations reports what was cancelled downstream, and how it went.
func (r *Run) Cancellations() []cancel.Report { return r.scope.Reports() }

func (r *Run) logCancel(rep cancel.Report) {
	r.log.Info("cancelled downstream", "kind", rep.Kind, "name", rep.Name, "task_id", rep.ID,
		"result", rep.Result, "latency_ms", rep.Latency.Milliseconds(), "err", errString(rep.Err))
	if r.e.cfg.Metrics != nil {
		r.e.cfg.Metrics.Cancellation(rep.Result, rep.Latency)
	}
}

// EndReason says why the run ended ("" while it runs).
func (r *Run) EndReason() string {
	s, _ := r.endReason.Load().(string)
	return s
}

func (r *Run) terminated() bool { return r.seq.Terminated() }

// emit sends an event through the sequencer. An ordering error is a bug in the engine; it
// is logged, never sent to the client.
func (r *Run) emit(ev agui.Event) {
	if err := r.seq.Emit(ev); err != nil && !errors.Is(err, agui.ErrTerminated) {
		r.log.Error("event rejected by sequencer", "type", ev.EventType(), "err", err)
	}
}

func (r *Run) execute() {
	defer close(r.done)
	start := time.Now()
	r.emit(&agui.RunStarted{ThreadID: r.ThreadID, RunID: r.RunID, ParentRunID: r.in.ParentRunID, ProtocolVersion: protocolVersion(r.in)})

	ctx, cancelLimit := context.WithTimeoutCause(r.ctx, r.e.cfg.Limits.MaxRunTime, ErrRunTimeLimit)
	defer cancelLimit()
	// Whatever ends the run early (disconnect, stop, time limit, shutdown) cancels all of
	// its downstream work at once, in parallel, on the scope's own deadline.
	stopWatch := context.AfterFunc(ctx, func() { r.scope.Cancel(context.Cause(ctx)) })
	defer stopWatch()

	reason := r.loop(ctx)
	r.endReason.Store(reason)
	r.e.release(r)
	if !stopWatch() && ctx.Err() != nil {
		// The watcher is cancelling downstream work: the run ends only after it has.
		r.scope.Cancel(context.Cause(ctx))
	}
	if m := r.e.cfg.Metrics; m != nil {
		outcome, _, _ := strings.Cut(reason, ":")
		m.RunFinished(outcome)
	}
	r.log.Info("run ended", "reason", reason, "duration_ms", time.Since(start).Milliseconds())
	r.cancel(nil)
}

// loop runs LLM turns until the run ends, and returns why it ended.
func (r *Run) loop(ctx context.Context) string {
	tools := r.e.toolset(r.in)
	system, err := prompts.System(r.e.systemInput(r.in, tools))
	if err != nil {
		r.log.Error("system prompt", "err", err)
		r.seq.Fail("INTERNAL", "The coordinator could not prepare the request.")
		return "error: system prompt"
	}
	conv := fromAGUI(r.in.Messages)

	// A thread parked on interrupts is resumed (or its interrupts re-emitted) first.
	susp, err := r.e.loadSuspension(ctx, r.ThreadID)
	if err != nil {
		r.log.Error("load suspension", "err", err)
		r.seq.Fail("STORE_UNAVAILABLE", "The coordinator could not read this thread's saved state. Please try again.")
		return "error: store"
	}
	switch {
	case susp != nil && len(r.in.Resume) == 0:
		// A plain run on a thread with open interrupts: ask again, do not continue silently.
		r.finishInterrupted(susp.Interrupts)
		return "interrupt: re-emitted"
	case susp != nil:
		var done bool
		var reason string
		conv, done, reason = r.resume(ctx, tools, susp)
		if done {
			return reason
		}
	case len(r.in.Resume) > 0:
		if dup, err := r.e.duplicateResume(ctx, r.ThreadID, r.in.Resume); err == nil && dup {
			// The same answers again: they were delivered once; nothing is sent twice.
			r.seq.Finish(r.ThreadID, r.RunID, &agui.Outcome{Type: agui.OutcomeSuccess}, nil)
			return "completed: duplicate resume"
		}
		r.log.Warn("resume for unknown interrupts ignored", "entries", len(r.in.Resume))
	}

	for iter := 1; ; iter++ {
		if err := ctx.Err(); err != nil {
			return r.finishCancelled(ctx)
		}
		if iter > r.e.cfg.Limits.MaxIterations {
			return r.finishPartial("iteration_limit",
				fmt.Sprintf("I stopped after %d steps without finishing, which is this coordinator's limit.", r.e.cfg.Limits.MaxIterations),
				[]string{"the step limit was reached"}, []string{"ask again with a narrower request", "raise limits.max_iterations"})
		}
		req := &llm.Request{Messages: append([]llm.Message{{Role: llm.RoleSystem, Content: system}}, conv...), Tools: tools.llm}
		turn, err := r.modelTurn(ctx, req)
		if err != nil {
			if ctx.Err() != nil {
				return r.finishCancelled(ctx)
			}
			r.log.Warn("model turn failed", "err", err)
			r.seq.Fail("MODEL_UNAVAILABLE", userMessage(err))
			return "error: model"
		}
		conv = append(conv, turn.message)
		if len(turn.message.ToolCalls) == 0 {
			r.seq.Finish(r.ThreadID, r.RunID, &agui.Outcome{Type: agui.OutcomeSuccess}, nil)
			return "completed"
		}

		var backend []llm.ToolCall
		var pending []string
		for _, c := range turn.message.ToolCalls {
			if tools.isFrontend(c.Name) {
				pending = append(pending, c.ID)
				continue
			}
			backend = append(backend, c)
		}
		outcomes := r.runTools(ctx, tools, backend)
		var done bool
		var reason string
		conv, done, reason = r.afterTools(ctx, conv, backend, outcomes)
		if done {
			return reason
		}
		if len(pending) > 0 {
			// Frontend tools: the application runs them and sends the results in the next run.
			r.seq.Finish(r.ThreadID, r.RunID, &agui.Outcome{Type: agui.OutcomeSuccess, PendingToolCallIDs: pending}, nil)
			return "completed: frontend tools pending"
		}
	}
}

// toolOutcome is what one tool call produced: a tagged result, or interrupts to raise.
type toolOutcome struct {
	result     string
	interrupts []store.Interrupt
}

// afterTools records the tool outcomes in the conversation. When some calls wait for the
// user, the run is suspended (persisted) and ends with the interrupt outcome.
func (r *Run) afterTools(ctx context.Context, conv []llm.Message, calls []llm.ToolCall, outcomes []toolOutcome) ([]llm.Message, bool, string) {
	if ctx.Err() != nil {
		return conv, true, r.finishCancelled(ctx)
	}
	if err := r.fatalErr(); err != nil {
		r.seq.Fail("TOOL_FAILED", err.Error())
		return conv, true, "error: tool failed"
	}
	var open []store.Interrupt
	for i, c := range calls {
		if len(outcomes[i].interrupts) > 0 {
			open = append(open, outcomes[i].interrupts...)
			continue
		}
		conv = append(conv, llm.Message{Role: llm.RoleTool, ToolCallID: c.ID, Content: outcomes[i].result})
	}
	if len(open) == 0 {
		return conv, false, ""
	}
	if err := r.suspend(ctx, conv, open); err != nil {
		r.log.Error("save suspension", "err", err)
		r.seq.Fail("STORE_UNAVAILABLE", "The coordinator could not save this conversation's question for later. Please try again.")
		return conv, true, "error: store"
	}
	r.finishInterrupted(open)
	return conv, true, "interrupt"
}

// runTools executes backend tool calls concurrently and returns their outcomes in order.
// A tagged result is streamed as TOOL_CALL_RESULT as soon as its call ends.
func (r *Run) runTools(ctx context.Context, tools *toolset, calls []llm.ToolCall) []toolOutcome {
	outcomes := make([]toolOutcome, len(calls))
	var wg sync.WaitGroup
	for i, c := range calls {
		wg.Go(func() {
			outcomes[i] = r.runTool(ctx, tools, c)
			r.emitResult(ctx, c.ID, outcomes[i])
		})
	}
	wg.Wait()
	return outcomes
}

// emitResult streams a finished tool call's tagged result (not for a suspended call).
func (r *Run) emitResult(ctx context.Context, toolCallID string, o toolOutcome) {
	if len(o.interrupts) > 0 || ctx.Err() != nil || r.fatalErr() != nil {
		return
	}
	if m := r.e.cfg.Metrics; m != nil {
		tag, arg, _ := bridge.ParseTag(o.result)
		if tag == bridge.TagRetry {
			tag += ":" + arg
		}
		m.ToolResult(tag)
	}
	r.emit(&agui.ToolCallResult{MessageID: newID("tr"), ToolCallID: toolCallID, Content: o.result, Role: "tool"})
}

func (r *Run) setFatal(err error) {
	r.fatalMu.Lock()
	defer r.fatalMu.Unlock()
	if r.fatal == nil {
		r.fatal = err
	}
}

func (r *Run) fatalErr() error {
	r.fatalMu.Lock()
	defer r.fatalMu.Unlock()
	return r.fatal
}

// finishCancelled ends the stream after a cancellation, according to its cause.
func (r *Run) finishCancelled(ctx context.Context) string {
	cause := context.Cause(ctx)
	if cause == nil {
		cause = context.Canceled
	}
	r.log.Info("run cancelled", "cause", cause.Error())
	// The sequencer downgrades "cancelled" to RUN_ERROR{CANCELLED} for pre-1.0 clients.
	// A client that is gone gets the same events; nobody reads them.
	r.seq.Finish(r.ThreadID, r.RunID, &agui.Outcome{Type: agui.OutcomeCancelled}, nil)
	return "cancelled: " + cause.Error()
}

// finishPartial ends a run that stops on purpose with a partial result.
func (r *Run) finishPartial(kind, text string, blockers, next []string) string {
	id := newID("msg")
	r.emit(&agui.TextMessageStart{MessageID: id, Role: "assistant"})
	r.emit(&agui.TextMessageContent{MessageID: id, Delta: text})
	r.emit(&agui.TextMessageEnd{MessageID: id})
	r.emit(&agui.Custom{Name: "baton.partial", Value: map[string]any{"rationale": text, "blockers": blockers, "next_steps": next}})
	r.seq.Finish(r.ThreadID, r.RunID, &agui.Outcome{Type: agui.OutcomeSuccess}, map[string]any{"stopped": kind})
	return "stopped: " + kind
}

func protocolVersion(in *agui.RunAgentInput) string {
	if in.Legacy() {
		return ""
	}
	return "1.0"
}

// newID returns a short random id with a prefix.
func newID(prefix string) string {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return prefix + "-" + hex.EncodeToString(b[:])
}
