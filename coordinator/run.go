package coordinator

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"log/slog"

	"sync"
	"sync/atomic"
	"time"

	"github.com/baton-dev/baton/agui"
	"github.com/baton-dev/baton/cancel"
	"github.com/baton-dev/baton/durable"
	"github.com/baton-dev/baton/failure"
	"github.com/baton-dev/baton/store"
	"github.com/baton-dev/baton/telemetry"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"
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
	// elog writes the run's events to the store's event log.
	elog   *durable.EventLog
	ctx    context.Context
	cancel context.CancelCauseFunc
	done   chan struct{}

	// scope holds what the run has in flight downstream, to cancel it all at once.
	scope *cancel.Scope

	endReason atomic.Pointer[EndReason]
	// fatal holds the first terminal tool failure (on_tool_error: error).
	fatalMu sync.Mutex
	fatal   error

	// The failure model (DESIGN §6), owned by the run's loop goroutine: the failure state
	// (restored from a suspension), the guard that refuses calls the policy does not
	// allow, and the loop detector over fs's signatures.
	fs    failure.State
	guard *failure.Guard
	loops *failure.LoopDetector
	// start is when the active time of the current time allowance began in this run.
	start time.Time
	// hardStop cancels the run once the time allowance and its grace are spent.
	hardStop *time.Timer
	// trace is the run's tracing (its span, set before the run starts).
	trace *runTrace
	// tools is the run's toolset, set with the guard once it is known (armTools): every
	// backend call of the run goes through the engine's chain with it (callChain).
	tools *toolset
	// sp is the run's model usage bookkeeping and fallback link (spend.go).
	sp runSpend

	// dur keeps the run across stops and replicas: suspension, resume, checkpoints,
	// journal, takeover and fencing.
	dur durability
	// handedOff: the run was handed to another replica, at shutdown or after it took the
	// run over while this one was stalled (handoff.go).
	handedOff atomic.Bool
	// begun: the store records the run as this replica's (BeginRun, or a takeover).
	begun atomic.Bool
	// own is this replica's ownership of the run: its epoch, and the lease that holds back
	// its side effects while the lease is not known to hold (fencing.go). Set before begun.
	own *durable.Owner
	// cascade is the state of the cascade from a cancelled run to its downstream work
	// (cascadeIdle, ...).
	cascade atomic.Int32
	// workRefused: every call of the last tool round was refused with a model-fixable
	// signal, so the work the model asked for is still pending (PendingWork). Consumed by
	// the next turn, which it nudges at most once.
	workRefused bool
	// holdText: the current turn's text is not streamed as it arrives but only once the
	// turn is complete, and only if it calls tools (streamTurn).
	holdText bool
	// newThread: the run's start created its thread (store.Started), so the store holds
	// no suspension, history or task of it from before: the run reads none.
	newThread bool
	// hooks run when ctx is cancelled (r.cancel fires them): see withRunCancel.
	hooks cancelHooks
	// stream delivers the run's events to its clients.
	stream Stream
}

func newRun(e *Engine, in *agui.RunAgentInput) *Run {
	// A run outlives the request that started it (a client may disconnect and come back):
	// only its own cancel ends it.
	ctx, stop := context.WithCancelCause(context.Background())
	r := &Run{
		ThreadID: in.ThreadID,
		RunID:    in.RunID,
		e:        e,
		in:       in,
		log:      e.log.With("thread_id", in.ThreadID, "run_id", in.RunID),
		ctx:      ctx,
		done:     make(chan struct{}),
	}
	r.stream = Stream{run: r, released: make(chan struct{})}
	s := &r.stream
	r.cancel = func(cause error) {
		stop(cause)
		r.hooks.fire()
	}
	// A client that falls more than the buffer behind is not dropped: it reads what it
	// missed from the event log (Stream.Backlog) and comes back to the live events.
	s.q = newEventQueue(e.cfg.StreamBufferBytes, func() {
		r.log.Info("client fell more than the stream buffer behind; it continues from the event log", "limit_bytes", s.q.limit)
	})
	// The stream of the starting request is the first watcher.
	s.attached.n = 1
	// The live stream shows an event once the log has it (design/fencing.md).
	r.elog = durable.NewEventLog(e.cfg.Store, in.ThreadID, in.RunID, r.log, &e.wg, s.q.storedUpTo)
	r.elog.SetBudget(e.logBudget)
	r.dur.init(r)
	s.q.gated = true
	r.seq = agui.NewSequencer(func(ev agui.Event) error {
		if !s.limit.admit(ev) {
			return nil
		}
		r.elog.Add(ev)
		return s.q.push(ev)
	}, agui.SequencerOptions{Legacy: in.Legacy(), Now: e.cfg.Now})
	s.limit.max = e.cfg.MaxEventsPerRun
	if s.limit.max <= 0 {
		s.limit.max = DefaultMaxEventsPerRun
	}
	s.limit.reached = func() {
		r.log.Warn("the run reached its event limit; cancelling it", "max_events", s.limit.max)
		r.Cancel(ErrEventLimit)
	}
	r.scope = cancel.NewScope(cancel.Options{Timeout: e.cfg.CancelTimeout, OnReport: r.logCancel, Confirmer: e.cancels.confirm})
	return r
}

// Stream is the delivery of the run's events to the client streams that follow it.
func (r *Run) Stream() *Stream { return &r.stream }

// Done is closed when the run has ended and all its downstream work has been cancelled.
func (r *Run) Done() <-chan struct{} { return r.done }

// Cancel cancels the run with cause (ErrClientGone, ErrStopped, ErrShutdown, ...). The
// downstream cancellation starts before the run's context ends, so that every piece in
// flight is claimed (and recorded) by the cancellation rather than ending on its own.
func (r *Run) Cancel(cause error) {
	r.scope.Begin(cause)
	r.cancel(cause)
	r.fireCascade()
}

// The states of Run.cascade: while it is armed (execute runs the loop), a cancellation of
// the run's context starts the cancellation of its downstream work (what a
// context.AfterFunc on it would do).
const (
	cascadeIdle  int32 = iota // before execute arms it, or after
	cascadeArmed              // execute runs the loop
	cascadeFired              // the downstream cancellation was started
)

// armCascade arms the cascade; a run cancelled before it was armed fires it at once.
func (r *Run) armCascade() {
	r.cascade.CompareAndSwap(cascadeIdle, cascadeArmed)
	if r.ctx.Err() != nil {
		r.fireCascade()
	}
}

// disarmCascade disarms the cascade (execute then cancels what is left itself,
// synchronously).
func (r *Run) disarmCascade() { r.cascade.CompareAndSwap(cascadeArmed, cascadeIdle) }

// fireCascade starts, once and on its own goroutine, the cancellation of the run's
// downstream work when its context is done and the cascade is armed; a run handed off to
// another replica keeps its downstream work.
func (r *Run) fireCascade() {
	if r.ctx.Err() == nil || !r.cascade.CompareAndSwap(cascadeArmed, cascadeFired) {
		return
	}
	if cause := context.Cause(r.ctx); !errors.Is(cause, ErrHandoff) {
		go r.scope.Cancel(cause)
	}
}

// Cancellations reports what was cancelled downstream, and how it went.
func (r *Run) Cancellations() []cancel.Report { return r.scope.Reports() }

func (r *Run) logCancel(rep cancel.Report) {
	if rep.Result == cancel.ResultPending {
		// Retried in the background; the final outcome is logged and counted then.
		r.log.Info("downstream cancel not confirmed yet, retrying in the background", "kind", rep.Kind,
			"name", rep.Name, "task_id", rep.ID, "err", errString(rep.Err))
		return
	}
	r.log.Info("cancelled downstream", "kind", rep.Kind, "name", rep.Name, "task_id", rep.ID,
		"result", rep.Result, "latency_ms", rep.Latency.Milliseconds(), "err", errString(rep.Err))
	if step, ok := unconfirmedStep(rep); ok {
		r.dur.step(store.StepCancel, rep.Name, rep.ID, step)
	}
	if r.e.cfg.Metrics != nil {
		r.e.cfg.Metrics.Cancellation(rep.Result, rep.Latency)
	}
}

// EndReason says why the run ended ("" while it runs).
func (r *Run) EndReason() string {
	return r.endOutcome().String()
}

// endOutcome is the typed reason the run ended (zero while it runs).
func (r *Run) endOutcome() EndReason {
	if e := r.endReason.Load(); e != nil {
		return *e
	}
	return EndReason{}
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
	if r.dur.resumed == nil || r.dur.resumed.fresh {
		r.emit(&agui.RunStarted{ThreadID: r.ThreadID, RunID: r.RunID, ParentRunID: r.in.ParentRunID, ProtocolVersion: protocolVersion(r.in)})
	}

	// The time limit has two parts. At each turn boundary DetectBeforeTurn compares the
	// active time with limits.max_run_seconds and, once it is spent, asks the user whether
	// to go on (time_limit → ask_user, DESIGN §6). Work still in flight when the limit
	// passes is the hard stop's: it is cancelled a grace period later (hardStopAfter), and
	// the run ends with the cancelled outcome like any other cancellation (DESIGN §10).
	// Without the grace the boundary check could never see the limit: a deadline at the
	// limit itself would always cancel the work first. A resumed run moves the hard stop
	// once it knows the active time its earlier parts used.
	//
	// The run's own context is the loop's: a child per run and a context.AfterFunc to
	// follow it would be two more contexts retained by every open run, so what
	// cancels it (Cancel, the hard stop) starts the downstream cancellation itself
	// (fireCascade) while the cascade is armed.
	ctx := r.trace.traced(r.ctx)
	r.hardStop = time.AfterFunc(hardStopAfter(r.e.cfg.Limits.MaxRunTime), func() {
		r.cancel(ErrRunTimeLimit)
		r.fireCascade()
	})
	defer r.hardStop.Stop()
	// Whatever ends the run early (disconnect, stop, time limit, shutdown) cancels all of
	// its downstream work at once, in parallel, on the scope's own deadline.
	r.armCascade()
	defer r.disarmCascade()

	reason := r.loop(ctx)
	r.endReason.Store(&reason)
	// Counted before the thread is released: a client that has seen the stream end sees
	// the run in /metrics.
	if m := r.e.cfg.Metrics; m != nil {
		m.RunFinished(string(reason.Outcome))
	}
	r.trace.end(reason, time.Since(begun))
	r.stream.stopGrace()
	r.e.release(r)
	r.disarmCascade()
	if ctx.Err() != nil && !errors.Is(context.Cause(ctx), ErrHandoff) {
		// Downstream work is being cancelled (by Run.Cancel or the cascade; Cancel is
		// idempotent): the run ends, and says so in its log, only after it has been.
		r.scope.Cancel(context.Cause(ctx))
	}
	r.log.Info("run ended", "reason", reason.String(), "duration_ms", time.Since(r.start).Milliseconds())
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

// emitResult streams a finished tool call's tagged result (not for a suspended call).
func (r *Run) emitResult(ctx context.Context, toolCallID string, o toolOutcome) {
	// r.scope.Cause: Run.Cancel cancels the downstream work just before the run's context,
	// so a call may end on that cancellation (a sub-agent's CANCELED) while ctx is not done
	// yet; it is the run's cancellation, not a result to stream before its cancelled end.
	if len(o.interrupts) > 0 || ctx.Err() != nil || r.scope.Cause() != nil || r.fatalErr() != nil {
		return
	}
	r.dur.noteResult(toolCallID, o)
	if m := r.e.cfg.Metrics; m != nil {
		m.ToolResult(o.Tag, o.Code)
	}
	r.emit(&agui.ToolCallResult{MessageID: newID("tr"), ToolCallID: toolCallID, Content: o.Text, Role: "tool"})
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
func (r *Run) finishCancelled(ctx context.Context) EndReason {
	cause := context.Cause(ctx)
	if cause == nil {
		cause = context.Canceled
	}
	r.log.Info("run cancelled", "cause", cause.Error())
	if errors.Is(cause, ErrEventLimit) {
		r.seq.Fail(CodeEventLimit, "This run produced more events than the coordinator keeps for one run, and was stopped.")
		return ended(OutcomeError, cause.Error())
	}
	if errors.Is(cause, ErrStopped) {
		// A stop's stream ends only once every downstream cancel has had its first
		// attempt (confirmed, or followed in the background): a caller that stops a
		// nested Baton sees its stream end cancelled only after the levels below have
		// confirmed (design/a2a-server.md). Bounded by the scope's timeout.
		r.scope.Cancel(cause)
	}
	// The sequencer downgrades "cancelled" to RUN_ERROR{CANCELLED} for pre-1.0 clients.
	// A client that is gone gets the same events; nobody reads them.
	r.seq.Finish(r.ThreadID, r.RunID, &agui.Outcome{Type: agui.OutcomeCancelled}, nil)
	return ended(OutcomeCancelled, cause.Error())
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

// unadmit undoes the admission of a run that could not start (its start was not
// recorded): its thread is free and it counts no more.
func (r *Run) unadmit() {
	e := r.e
	e.mu.Lock()
	if e.active[r.ThreadID] == r {
		delete(e.active, r.ThreadID)
	}
	e.mu.Unlock()
	e.running.Add(-1)
	e.wg.Done()
}

// withRunCancel returns a context carrying ctx's values that is cancelled when the run
// is (through r.hooks, not as ctx's child) or by stop.
func (r *Run) withRunCancel(ctx context.Context) (context.Context, context.CancelFunc) {
	c, cancel := context.WithCancel(context.WithoutCancel(ctx))
	remove := r.hooks.add(cancel)
	return c, func() {
		remove()
		cancel()
	}
}

// startTrace starts the run's invoke_agent span under the trace context of parent (the
// request's, carried without its cancellation), before the run's goroutine starts, and
// gives the run's log lines the trace ids.
func (r *Run) startTrace(parent context.Context) {
	t := &runTrace{tracer: tracerOf(r.e.cfg.Tracing), tracing: r.e.cfg.Tracing, metrics: r.e.cfg.Metrics, threadID: r.ThreadID, runID: r.RunID}
	_, t.span = t.tracer.Start(telemetry.Detached(parent), "invoke_agent baton", trace.WithSpanKind(trace.SpanKindInternal), trace.WithAttributes(
		attribute.String("gen_ai.operation.name", "invoke_agent"),
		attribute.String("gen_ai.provider.name", t.tracing.Provider),
		attribute.String("gen_ai.agent.name", "baton"),
		attribute.String("gen_ai.conversation.id", r.ThreadID),
		attrRunID.String(r.RunID),
	))
	r.trace = t
	if sc := t.span.SpanContext(); sc.IsValid() {
		r.log = r.log.With("trace_id", sc.TraceID().String(), "span_id", sc.SpanID().String())
	}
}
