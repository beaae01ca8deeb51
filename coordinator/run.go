package coordinator

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
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

	e   *Engine
	in  *agui.RunAgentInput
	log *slog.Logger
	seq *agui.Sequencer
	q   *eventQueue
	// elog writes the run's events to the store's event log.
	elog   *runLog
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

	// The failure model (DESIGN §6), owned by the run's loop goroutine: the failure state
	// (restored from a suspension), the guard that refuses calls the policy does not
	// allow, and the loop detector over fs's signatures.
	fs    FailureState
	guard *Guard
	loops *LoopDetector
	// start is when the active time of the current time allowance began in this run.
	start time.Time
	// hardStop cancels the run once the time allowance and its grace are spent.
	hardStop *time.Timer
	// trace is the run's tracing (its span, set before the run starts).
	trace *runTrace

	// susp is the suspension being resumed, while approved calls record their start and
	// result in it (approval.go).
	suspMu sync.Mutex
	susp   *store.Suspension
}

func newRun(e *Engine, in *agui.RunAgentInput) *Run {
	ctx, stop := context.WithCancelCause(context.Background())
	r := &Run{
		ThreadID: in.ThreadID,
		RunID:    in.RunID,
		e:        e,
		in:       in,
		log:      e.log.With("thread_id", in.ThreadID, "run_id", in.RunID),
		ctx:      ctx,
		cancel:   stop,
		done:     make(chan struct{}),
		released: make(chan struct{}),
	}
	// A client that falls behind is a client gone (server.on_disconnect: cancel). The
	// drop is noticed inside an emit; Cancel only marks the scope, starts the downstream
	// cancellations on goroutines of their own and cancels the context, so it is called
	// right there, before the run produces more.
	r.q = newEventQueue(e.cfg.StreamBufferBytes, func() {
		r.log.Warn("client dropped: it fell more than the stream buffer behind", "limit_bytes", r.q.limit)
		r.Cancel(ErrClientTooSlow)
	})
	r.elog = newRunLog(e.cfg.Store, in.ThreadID, in.RunID, r.log)
	r.seq = agui.NewSequencer(func(ev agui.Event) error {
		r.elog.add(ev)
		return r.q.push(ev)
	}, agui.SequencerOptions{Legacy: in.Legacy(), Now: e.cfg.Now})
	r.scope = cancel.NewScope(cancel.Options{Timeout: e.cfg.CancelTimeout, OnReport: r.logCancel})
	return r
}

// Next returns the events produced since the last call, and whether the stream has ended.
// wake fires when more events may be available.
func (r *Run) Next() (events []agui.Event, ended bool) {
	_, events, ended = r.q.take()
	return events, ended
}

// NextFrom is Next with the sequence number of the first event returned (the next ones
// follow on): the SSE id of each frame, the same number as in the run's event log.
func (r *Run) NextFrom() (first int64, events []agui.Event, ended bool) { return r.q.take() }

// Wake returns a channel that receives when new events may be available.
func (r *Run) Wake() <-chan struct{} { return r.q.wake }

// Dropped is closed when the client has been dropped for falling more than the stream
// buffer behind (Config.StreamBufferBytes); the run is then cancelled with
// ErrClientTooSlow, and Next reports the end of the stream without its terminal event.
func (r *Run) Dropped() <-chan struct{} { return r.q.gone }

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
	r.start = time.Now()
	begun := r.start
	r.emit(&agui.RunStarted{ThreadID: r.ThreadID, RunID: r.RunID, ParentRunID: r.in.ParentRunID, ProtocolVersion: protocolVersion(r.in)})

	// The time limit has two parts. At each turn boundary DetectBeforeTurn compares the
	// active time with limits.max_run_seconds and, once it is spent, asks the user whether
	// to go on (time_limit → ask_user, DESIGN §6). Work still in flight when the limit
	// passes is the hard stop's: it is cancelled a grace period later (hardStopAfter), and
	// the run ends with the cancelled outcome like any other cancellation (DESIGN §10).
	// Without the grace the boundary check could never see the limit: a deadline at the
	// limit itself would always cancel the work first. A resumed run moves the hard stop
	// once it knows the active time its earlier parts used.
	ctx, stopRun := context.WithCancelCause(r.traced(r.ctx))
	defer stopRun(nil)
	r.hardStop = time.AfterFunc(hardStopAfter(r.e.cfg.Limits.MaxRunTime), func() { stopRun(ErrRunTimeLimit) })
	defer r.hardStop.Stop()
	// Whatever ends the run early (disconnect, stop, time limit, shutdown) cancels all of
	// its downstream work at once, in parallel, on the scope's own deadline.
	stopWatch := context.AfterFunc(ctx, func() { r.scope.Cancel(context.Cause(ctx)) })
	defer stopWatch()

	reason := r.loop(ctx)
	r.endReason.Store(reason)
	// Counted before the thread is released: a client that has seen the stream end sees
	// the run in /metrics.
	if m := r.e.cfg.Metrics; m != nil {
		outcome, _, _ := strings.Cut(reason, ":")
		m.RunFinished(outcome)
	}
	r.endTrace(reason, time.Since(begun))
	r.e.release(r)
	stopWatch()
	if ctx.Err() != nil {
		// Downstream work is being cancelled (by Run.Cancel or the watcher; Cancel is
		// idempotent): the run ends, and says so in its log, only after it has been.
		r.scope.Cancel(context.Cause(ctx))
	}
	r.log.Info("run ended", "reason", reason, "duration_ms", time.Since(r.start).Milliseconds())
	r.cancel(nil)
}

// hardStopAfter is when work in flight is cancelled, for a time allowance of remaining:
// the allowance plus a grace of a tenth of it, at least 1 s and at most 30 s.
func hardStopAfter(remaining time.Duration) time.Duration {
	remaining = max(remaining, 0)
	return remaining + min(max(remaining/10, time.Second), 30*time.Second)
}

// resetHardStop moves the hard stop to match the time allowance left in r.fs.
func (r *Run) resetHardStop() {
	r.hardStop.Reset(hardStopAfter(r.e.cfg.Limits.MaxRunTime - r.fs.Active - time.Since(r.start)))
}

// loop runs LLM turns until the run ends, and returns why it ended.
func (r *Run) loop(ctx context.Context) string {
	tools := r.e.toolset(r.in)
	// A thread parked on interrupts is resumed (or its interrupts re-emitted) first.
	susp, err := r.e.loadSuspension(ctx, r.ThreadID)
	if err != nil && ctx.Err() != nil {
		// Stopped (or disconnected) while the state was being read: that is a cancellation,
		// not a store failure.
		return r.finishCancelled(ctx)
	}
	if err != nil {
		r.log.Error("load suspension", "err", err)
		r.seq.Fail("STORE_UNAVAILABLE", "The coordinator could not read this thread's saved state. Please try again.")
		return "error: store"
	}
	inFlight := susp != nil && approvalsInFlight(susp)
	if susp != nil && len(susp.State) > 0 {
		var st runState
		if err := json.Unmarshal(susp.State, &st); err != nil {
			r.log.Warn("suspension state unreadable; failure counters start afresh", "err", err)
			st = runState{}
		}
		// The tasks the thread started, also when this process did not see them.
		r.e.restoreTasks(r.ThreadID, st.Tasks)
		if len(r.in.Resume) > 0 || inFlight {
			// Counters, lessons, loop signatures and budget usage go on where they stopped.
			r.fs = st.FailureState
			r.resetHardStop()
			r.traceResume(r.fs.TraceParent, len(r.in.Resume))
		}
	}
	r.guard = r.newGuard(tools)
	r.loops = r.fs.Loops(r.e.cfg.Loop)

	system, err := prompts.System(r.e.systemInput(r.in, tools))
	if err != nil {
		r.log.Error("system prompt", "err", err)
		r.seq.Fail("INTERNAL", "The coordinator could not prepare the request.")
		return "error: system prompt"
	}
	conv := fromAGUI(r.in.Messages)

	if inFlight {
		// The run that acted on approvals stopped before it finished: settle what it did,
		// ask again about calls in doubt (approval.go).
		var done bool
		var reason string
		conv, done, reason = r.recoverApprovals(ctx, tools, susp)
		if done {
			return reason
		}
	}
	switch {
	case inFlight:
		// Recovered above: the conversation goes on with the settled results.
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

	limits := TurnLimits{MaxIterations: r.e.cfg.Limits.MaxIterations, MaxRunTime: r.e.cfg.Limits.MaxRunTime, StallRounds: r.e.cfg.Loop.StallTurns}
	for {
		if err := ctx.Err(); err != nil {
			return r.finishCancelled(ctx)
		}
		// Before the LLM call: the limits, a stall, and a token budget spent by an earlier
		// turn (a turn with tool calls has them refused by the guard instead).
		var before []Failure
		if f := DetectBeforeTurn(limits, r.fs.TurnState(time.Since(r.start))); f != nil {
			before = append(before, *f)
		}
		if f := r.guard.AddTokens(0); f != nil {
			before = append(before, *f)
		}
		if done, reason := r.handle(ctx, conv, before, nil); done {
			return reason
		}

		// Lessons and the pending corrective instruction are rendered once per turn (the
		// corrective is consumed); transient retries within the turn reuse the request.
		addendum, err := r.fs.Addendum()
		if err != nil {
			r.log.Error("render lessons", "err", err)
		}
		msgs := append([]llm.Message{{Role: llm.RoleSystem, Content: system}}, conv...)
		req := &llm.Request{Messages: WithAddendum(msgs, addendum), Tools: tools.llm}
		r.fs.Iterations++
		turn, err := r.modelTurn(ctx, req)
		if err != nil {
			if r.cancelling(ctx) {
				return r.finishCancelled(ctx)
			}
			var decided *decidedError
			if errors.As(err, &decided) {
				// The policy gave up on the provider (retries spent, or a wait longer than
				// it sleeps); its baton.failure event is out already.
				return r.conclude(ctx, conv, decided.d, decided.f, nil)
			}
			r.log.Warn("model turn failed", "err", err)
			r.seq.Fail("MODEL_UNAVAILABLE", userMessage(err))
			return "error: model"
		}
		if turn.completion != nil {
			// Spending the token budget shows at the next boundary, or as budget_exceeded
			// refusals of this turn's calls.
			r.guard.AddTokens(turn.completion.Usage.InputTokens + turn.completion.Usage.OutputTokens)
		}
		if f := DetectTurn(turn.message, turn.completion, false); f != nil {
			if done, reason := r.handle(ctx, conv, []Failure{*f}, nil); done {
				return reason
			}
			// Asked again (truncation) or with a corrective instruction (no progress): the
			// unusable turn stays out of the history and its calls are not run.
			continue
		}
		r.fs.Recovered(KindOutputTruncated, "")
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
		outcomes, sent, predicted := r.dispatch(ctx, tools, backend)
		var done bool
		var reason string
		conv, done, reason = r.afterTools(ctx, conv, backend, outcomes, sent, predicted, pending)
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

// afterTools records the tool outcomes in the conversation and runs the detectors over
// them (tool errors, policy refusals, loops by error signature, stalls). The failures
// found, with fails (the loops dispatch predicted), are decided by the policy, and a
// terminal decision ends the run: it wins over calls waiting for the user and over
// pending frontend tools. Otherwise, when some calls wait for the user, the run is
// suspended (persisted) and ends with the interrupt outcome. sent tells which calls were
// sent (not refused beforehand); pending are the frontend calls of the turn.
func (r *Run) afterTools(ctx context.Context, conv []llm.Message, calls []llm.ToolCall, outcomes []toolOutcome, sent []bool, fails []Failure, pending []string) ([]llm.Message, bool, string) {
	// The turn's tool spans end once the policy has decided about their results.
	defer r.endToolSpans()
	if r.cancelling(ctx) {
		return conv, true, r.finishCancelled(ctx)
	}
	if err := r.fatalErr(); err != nil {
		r.seq.Fail("TOOL_FAILED", err.Error())
		return conv, true, "error: tool failed"
	}
	var open []store.Interrupt
	var results []string
	r.loops.NextTurn()
	for i, c := range calls {
		if len(outcomes[i].interrupts) > 0 {
			open = append(open, outcomes[i].interrupts...)
			continue
		}
		res := outcomes[i].result
		results = append(results, res)
		conv = append(conv, llm.Message{Role: llm.RoleTool, ToolCallID: c.ID, Content: res})
		if f := DetectToolResult(c.Name, res); f != nil && !sameToolError(fails, f) {
			fails = append(fails, *f)
		}
		if sent[i] {
			if f := r.loops.ObserveResult(c, res); f != nil {
				fails = append(fails, *f)
			}
		}
		if IsProgress(res) {
			r.fs.Recovered(KindToolError, c.Name)
		}
	}
	r.fs.ObserveRound(results)
	if len(pending) > 0 && (len(open) > 0 || len(fails) > 0) {
		// The run may end here without the frontend's results, and a resumed run continues
		// from the stored history, which must answer every call.
		for _, id := range pending {
			conv = append(conv, llm.Message{Role: llm.RoleTool, ToolCallID: id, Content: orphanResult})
		}
	}
	if done, reason := r.handle(ctx, conv, fails, open); done {
		return conv, true, reason
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

// sameToolError reports whether fails already holds a tool_error of f's tool: parallel
// calls of one tool in one turn spend one attempt of its retry budget, as they read one
// attempt count when their signals were rendered.
func sameToolError(fails []Failure, f *Failure) bool {
	if f.Kind != KindToolError {
		return false
	}
	for _, g := range fails {
		if g.Kind == KindToolError && g.Tool == f.Tool {
			return true
		}
	}
	return false
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

// cancelling reports whether the run is being cancelled, and then waits until ctx says so.
// Run.Cancel starts the downstream cancellation (the scope) just before it cancels the
// run's context, so work in flight may end on its cancellation a moment before ctx is
// done; its failure must not be taken for a failure of its own.
func (r *Run) cancelling(ctx context.Context) bool {
	if ctx.Err() == nil && r.scope.Cause() == nil {
		return false
	}
	<-ctx.Done()
	return true
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
