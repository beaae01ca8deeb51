package coordinator

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/baton-dev/baton/agui"
	"github.com/baton-dev/baton/cancel"
	"github.com/baton-dev/baton/durable"
	"github.com/baton-dev/baton/failure"
	"github.com/baton-dev/baton/fence"
	"github.com/baton-dev/baton/hitl"
	"github.com/baton-dev/baton/runs"
	"github.com/baton-dev/baton/store"
	"github.com/baton-dev/baton/subagent"
)

// Sentinel errors of the engine; the HTTP layer maps them to status codes.
var (
	// ErrThreadBusy means the thread already has an active run (HTTP 409).
	ErrThreadBusy = runs.ErrThreadBusy
	// ErrShuttingDown means the engine no longer accepts runs (HTTP 503).
	ErrShuttingDown = runs.ErrShuttingDown
	// ErrRunNotFound means no such run is known (HTTP 404).
	ErrRunNotFound = runs.ErrRunNotFound
	// ErrRunFinished means the run has already ended (HTTP 409).
	ErrRunFinished = runs.ErrRunFinished
	// ErrThreadNotFound means no such thread of this principal (HTTP 404).
	ErrThreadNotFound = runs.ErrThreadNotFound
	// ErrForbidden means the thread belongs to another principal (HTTP 403).
	ErrForbidden = runs.ErrForbidden
	// ErrTooManyThreads means the run would create a thread beyond the principal's cap
	// (HTTP 429).
	ErrTooManyThreads = runs.ErrTooManyThreads
	// ErrTooManyRuns means the run would go beyond the cap of active runs it was started
	// with (server.max_active_runs; HTTP 503, retry later).
	ErrTooManyRuns = runs.ErrTooManyRuns
	// ErrThreadExpired means the thread was deleted by server.thread_retention: a new run
	// on its id is refused rather than silently starting a conversation without its
	// history (410 THREAD_EXPIRED).
	ErrThreadExpired = runs.ErrThreadExpired
	// ErrNotStarted means the engine was built but not launched (Engine.Start): a run
	// there would have no heartbeat, so its lease would lapse and another replica take it
	// over.
	ErrNotStarted = errors.New("coordinator not started")
)

// Causes with which a run is cancelled; they decide how the stream ends and are recorded.
var (
	// ErrClientGone: the streaming client disconnected.
	ErrClientGone = runs.ErrClientGone
	// ErrClientTooSlow: the streaming client took nothing for the stream's write timeout
	// and was dropped; it counts as a disconnect.
	ErrClientTooSlow = runs.ErrClientTooSlow
	// ErrStopped: a producer-side stop was requested.
	ErrStopped = errors.New("stop requested")
	// ErrShutdown: the coordinator is shutting down.
	ErrShutdown = errors.New("coordinator shutdown")
	// ErrRunTimeLimit: work was still in flight when the run's time allowance
	// (limits.max_run_seconds of active time) and its grace were spent. A run that reaches
	// the limit between turns asks the user instead (time_limit, DESIGN §6).
	ErrRunTimeLimit = errors.New("run time limit reached")
)

// Engine runs AG-UI runs. It is safe for concurrent use.
type Engine struct {
	cfg Config
	log *slog.Logger
	// logBudget bounds the bytes the runs' event logs hold in memory, all runs together.
	logBudget *durable.LogBudget
	agents    map[string]*Agent
	// cancels cancels tasks outside a run's scope, and follows the unconfirmed cancels of
	// every run in the background (design/cancel-confirm.md); Stop waits for them, bounded.
	cancels *taskCancels

	mu       sync.Mutex
	active   map[string]*Run // by thread id
	finished map[string]string
	threads  map[string]*thread
	// tasks are the A2A tasks of the threads remembered in threads (taken after mu).
	tasks    *taskBook
	closing  bool
	wg       sync.WaitGroup
	sessions *SessionElicitor
	running  atomic.Int64 // runs whose goroutine has not ended
	// jobs are the background services: the interrupt expiry, the heartbeat and the
	// takeover (acting on the runs through the engine's durable.Engine port,
	// durable_port.go) and the sweep; and the hand-off at shutdown.
	jobs *durable.Jobs
	// records keeps the runs' starts and ends in the store.
	records *durable.Records
	// limiter holds the rate-limit windows, shared by every run.
	limiter *failure.RateLimiter
	// tools are the backend tools of the current configuration, cards and catalogue,
	// shared by runs.
	tools *toolCache
	// leases is this replica's contact with the store (its heartbeats), for the claim
	// rule (fencing.go).
	leases fence.Contact
	// quit is closed when a shutdown gives up waiting: the runs' store writes stop
	// retrying.
	quit     chan struct{}
	quitOnce sync.Once
	// journal records the runs' steps (design/journal.md).
	journal *durable.Journal
	// pending keeps the cancels not confirmed yet in the store, for a restart.
	pending *durable.PendingCancels
	// started (under mu) says Start has started the jobs: runs are accepted from then on.
	started bool
	// launching serialises Start, so that a second call finds the first one's work done.
	launching sync.Mutex
}

// activeRun is the run of the thread active on this replica, or nil.
func (e *Engine) activeRun(threadID string) *Run {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.active[threadID]
}

// New validates cfg and builds an Engine. It starts nothing and does no remote work:
// Start starts the engine, Stop stops it.
func New(cfg Config) (*Engine, error) {
	if cfg.Model == nil {
		return nil, errors.New("coordinator: a model is required")
	}
	if err := cfg.withDefaults(); err != nil {
		return nil, err
	}
	e := &Engine{
		logBudget: durable.NewLogBudget(durable.DefaultLogBytes),
		cfg:       cfg,
		log:       cfg.Logger,
		agents:    make(map[string]*Agent),
		active:    make(map[string]*Run),
		finished:  make(map[string]string),
		threads:   make(map[string]*thread),
		tasks:     newTaskBook(),
		sessions:  cfg.Sessions,
		limiter:   failure.NewRateLimiter(cfg.Guard.RateLimits),
		quit:      make(chan struct{}),
		journal:   durable.NewJournal(cfg.Store, cfg.Replica, cfg.Logger),
		pending:   durable.NewPendingCancels(cfg.Store, cfg.Logger),
	}
	e.records = durable.NewRecords(durable.RecordsConfig{Store: cfg.Store, Journal: e.journal, Replica: cfg.Replica,
		Lease: cfg.Lease, MaxThreads: cfg.maxThreads(), Logger: cfg.Logger})
	confirm := cancel.NewConfirmer(cancel.ConfirmerConfig{
		Horizon:    cfg.CancelHorizon,
		PerAgent:   cfg.CancelPerAgent,
		Attempt:    cfg.CancelTimeout,
		Permanent:  permanentCancelError,
		RetryAfter: subagent.RetryAfterOf,
		Logger:     cfg.Logger,
		OnFollow:   e.pending.Record,
		OnSettle:   e.pending.Forget,
	})
	e.cancels = &taskCancels{confirm: confirm, signIn: cfg.A2ASignIn, metrics: cfg.Metrics, timeout: cfg.CancelTimeout}
	// Agents first: a bad one fails New before any background goroutine starts.
	if err := addAgents(e.agents, e.cfg.Agents); err != nil {
		return nil, err
	}
	e.tools = &toolCache{server: cfg.Tools, instructions: cfg.SystemPrompt}
	for _, a := range e.cfg.Agents {
		e.tools.agents = append(e.tools.agents, e.agents[a.Name])
	}
	e.jobs = durable.NewJobs(durable.JobsConfig{
		Store: cfg.Store, Replica: cfg.Replica, Lease: cfg.Lease, Heartbeat: cfg.Heartbeat,
		TakeOverAtStart: cfg.TakeOverAtStart, EventRetention: cfg.EventRetention,
		ExpiryEvery: cfg.ExpiryInterval, CancelTimeout: cfg.CancelTimeout,
		Contact: &e.leases, Now: cfg.Now, Journal: e.journal, Engine: e, Logger: cfg.Logger,
	})
	return e, nil
}

// Start starts e: the cancels an earlier process left pending go on, the interrupts open
// in the store are counted, and the background jobs (interrupt expiry, heartbeat, takeover,
// sweep) start. A run is refused with ErrNotStarted until then. ctx bounds the store reads
// of the launch; the jobs run until Stop. Starting a started engine does nothing;
// starting one that has stopped returns ErrShuttingDown.
func (e *Engine) Start(ctx context.Context) error {
	e.launching.Lock()
	defer e.launching.Unlock()
	e.mu.Lock()
	closing, started := e.closing, e.started
	e.mu.Unlock()
	switch {
	case closing:
		return ErrShuttingDown
	case started:
		return nil
	}
	// Each cancel goes on as its owner.
	if _, err := e.pending.Resume(ctx, e, e.cfg.CancelHorizon); err != nil {
		e.log.Warn("store: pending cancels could not be read; they are not continued", "err", err)
	}
	e.loadInterruptsOpen(ctx)
	// The jobs outlive ctx: a heartbeat that ended with its caller's context would let the
	// leases of the runs still here lapse, and another replica take them over.
	e.jobs.Start(context.WithoutCancel(ctx))
	e.mu.Lock()
	// A Stop that came meanwhile has stopped the jobs, and they stay stopped.
	e.started = true
	e.mu.Unlock()
	return nil
}

// withDefaults fills the zero fields of c with the engine's defaults.
func (c *Config) withDefaults() error {
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	c.History = c.History.WithDefaults()
	if c.Limits.MaxIterations <= 0 {
		c.Limits.MaxIterations = DefaultMaxIterations
	}
	if c.Limits.MaxRunTime <= 0 {
		c.Limits.MaxRunTime = DefaultMaxRunTime
	}
	if c.Limits.ToolTimeout <= 0 {
		c.Limits.ToolTimeout = DefaultToolTimeout
	}
	if c.CancelTimeout <= 0 {
		c.CancelTimeout = 5 * time.Second
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	if c.Store == nil {
		// Opening the memory store does no I/O, and New has no context to give it.
		st, err := store.Open(context.Background(), "memory:")
		if err != nil {
			return fmt.Errorf("coordinator: memory store: %w", err)
		}
		c.Store = st
	}
	if c.Sessions == nil {
		c.Sessions = NewSessionElicitor()
	}
	if c.Policy == nil {
		c.Policy = &failure.DefaultPolicy{}
	}
	if c.Replica == "" {
		c.Replica = newReplicaID()
	}
	if c.Lease <= 0 {
		c.Lease = DefaultLease
	}
	if c.Heartbeat <= 0 {
		c.Lease = max(c.Lease, time.Hour)
	}
	if c.EventRetention <= 0 {
		c.EventRetention = DefaultEventRetention
	}
	if c.ReconnectGrace <= 0 {
		c.ReconnectGrace = DefaultReconnectGrace
	}
	if c.Loop == (failure.LoopConfig{}) {
		c.Loop = failure.LoopConfig{SoftThreshold: failure.DefaultLoopSoft, HardThreshold: failure.DefaultLoopHard, StallTurns: failure.DefaultStallTurns}
	}
	return nil
}

// addAgents registers the configured sub-agents in agents by name, with their defaults.
func addAgents(agents map[string]*Agent, configured []Agent) error {
	for i := range configured {
		a := &configured[i]
		if a.Client == nil {
			return fmt.Errorf("coordinator: agent %q has no client", a.Name)
		}
		if a.Timeout <= 0 {
			a.Timeout = DefaultAgentTimeout
		}
		if _, dup := agents[a.Name]; dup {
			return fmt.Errorf("coordinator: duplicate agent %q", a.Name)
		}
		agents[a.Name] = a
	}
	return nil
}

// admission is what e knows of in's thread before a run of it starts (the thread, nil when
// none is remembered; whether a run of it is active), or why e takes no run.
func (e *Engine) admission(in *agui.RunAgentInput) (th *thread, busy bool, err error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	switch {
	case e.closing:
		return nil, false, ErrShuttingDown
	case !e.started:
		return nil, false, fmt.Errorf("coordinator: run %q of thread %q refused: %w (Engine.Start was not called)", in.RunID, in.ThreadID, ErrNotStarted)
	}
	_, busy = e.active[in.ThreadID]
	return e.threads[in.ThreadID], busy, nil
}

// StartOption sets how StartContext admits a run.
type StartOption func(*startOptions)

type startOptions struct{ maxActive int }

// MaxActive makes StartContext refuse the run with ErrTooManyRuns when n runs (if n is
// positive) are active already (server.max_active_runs). The check and the run's count
// are one step under the engine's lock: concurrent starts on any surface never admit n+1.
func MaxActive(n int) StartOption { return func(o *startOptions) { o.maxActive = n } }

func startOptionsOf(opts []StartOption) startOptions {
	var o startOptions
	for _, opt := range opts {
		opt(&o)
	}
	return o
}

// StartRun is Start for a run whose trace parent is the span context in parent (the
// request's incoming traceparent). Only the span context is kept: the run is detached
// from parent's cancellation and values.
func (e *Engine) StartRun(parent context.Context, in *agui.RunAgentInput, principal string, opts ...StartOption) (*Run, error) {
	o := startOptionsOf(opts)
	in = ownInput(in)
	th, busy, err := admitRun(e, in, principal)
	if err != nil {
		return nil, err
	}
	// parent is the request's, and a run is admitted or refused whole: a client that goes
	// away meanwhile must not leave a thread half written. The store's timeout bounds it.
	ctx, cancel := context.WithTimeout(context.Background(), storeWriteTimeout)
	defer cancel()
	if th != nil && th.owner != principal {
		// Remembered as another principal's: the store decides, since another replica
		// may have deleted the thread (and someone re-created it) since.
		if stored, err := e.cfg.Store.GetThread(ctx, in.ThreadID); err == nil && stored.Owner != principal {
			return nil, ErrForbidden
		} else if err != nil && !errors.Is(err, store.ErrNotFound) {
			return nil, fmt.Errorf("coordinator: read thread: %w", err)
		}
		e.forgetThread(in.ThreadID, th)
		th = nil
	}
	if busy {
		return nil, busyError(ctx, e.records, in.ThreadID, principal, th)
	}
	// The history goes into the input before the run's first checkpoint is taken.
	prepended, err := e.records.Admit(ctx, in, principal, th == nil)
	if err != nil {
		return nil, err
	}

	e.mu.Lock()
	if e.closing {
		e.mu.Unlock()
		return nil, ErrShuttingDown
	}
	if _, busy := e.active[in.ThreadID]; busy {
		th := e.threads[in.ThreadID]
		e.mu.Unlock()
		return nil, busyError(ctx, e.records, in.ThreadID, principal, th)
	}
	// Counted from here, under the lock of every other admission (so starts racing each
	// other cannot pass the cap) and of Stop's closing (so the add precedes its Wait).
	if o.maxActive > 0 && e.running.Load() >= int64(o.maxActive) {
		e.mu.Unlock()
		return nil, fmt.Errorf("coordinator: run %q of thread %q refused: %w (%d)", in.RunID, in.ThreadID, ErrTooManyRuns, o.maxActive)
	}
	e.running.Add(1)
	e.wg.Add(1)
	r := newRun(e, in)
	r.owner = principal
	r.startTrace(parent)
	// The thread is reserved here before the store is asked, so that two requests on this
	// replica never both reach it.
	e.active[in.ThreadID] = r
	e.mu.Unlock()

	if err := r.dur.recordStart(ctx, principal, prepended); err != nil {
		r.unadmit()
		return nil, err
	}
	r.begun.Store(true)
	e.mu.Lock()
	// Remembered only now: the store has confirmed that the thread is principal's.
	if e.threads[in.ThreadID] == nil {
		e.threads[in.ThreadID] = &thread{owner: principal}
		e.tasks.open(in.ThreadID)
	}
	delete(e.finished, runKey(in.ThreadID, in.RunID))
	e.mu.Unlock()
	go func() {
		defer e.wg.Done()
		defer e.running.Add(-1)
		defer r.elog.RunEnded() // before wg.Done: the log's writer joins e.wg first
		// The run's start step was written with its start (durability.recordStart).
		r.execute()
	}()
	return r, nil
}

// admitRun applies the checks a run passes before anything is written: its depth, the
// engine's admission (run cap, thread busy here) and the principal's daily budget.
func admitRun(e *Engine, in *agui.RunAgentInput, principal string) (th *thread, busy bool, err error) {
	if err := checkDepth(in, e.cfg.maxDepth()); err != nil {
		return nil, false, err
	}
	if th, busy, err = e.admission(in); err != nil {
		return nil, false, err
	}
	if err := admitSpend(e, principal); err != nil {
		return nil, false, err
	}
	return th, busy, nil
}

// busyError is the refusal of a start on a thread with a run reserved on this replica:
// ErrThreadBusy, or ErrForbidden when the thread is another principal's. th is what this
// process remembers of the thread (its owner is immutable), nil when nothing: the thread's
// first start is then in flight (the owner is remembered once the store confirmed it), and
// the store is asked (durable.Records.Busy), so that another principal gets 403 as the
// contract says whatever the timing.
func busyError(ctx context.Context, records *durable.Records, threadID, principal string, th *thread) error {
	if th != nil && th.owner == principal {
		return ErrThreadBusy
	}
	return records.Busy(ctx, threadID, principal)
}

// release frees the run's thread for the next run, as soon as its stream has ended.
func (e *Engine) release(r *Run) {
	// The event log and the thread's messages are stored before the client can see the
	// terminal event, so that a reload right after it finds everything; the wait is
	// bounded by the writer's own store timeout.
	r.elog.WaitEnded()
	// The store's record goes first: a client that posts its next run on the terminal
	// event must find the thread free on every replica.
	// A run handed off goes on elsewhere: its record is the new owner's.
	if !r.handedOff.Load() {
		r.dur.recordEnd() // with the run_end step
	}
	e.mu.Lock()
	if e.active[r.ThreadID] == r {
		delete(e.active, r.ThreadID)
	}
	if len(e.finished) > maxFinished {
		clear(e.finished) // only used to tell "finished" from "unknown" on stop
	}
	e.finished[runKey(r.ThreadID, r.RunID)] = r.EndReason()
	if len(e.threads) > maxThreads {
		// Idle threads are forgotten (their owner and task cache); a parked thread is
		// still known to the store, which keeps its owner.
		for id := range e.threads {
			if _, busy := e.active[id]; !busy {
				delete(e.threads, id)
				e.tasks.drop(id)
			}
			if len(e.threads) <= maxThreads*9/10 {
				break
			}
		}
	}
	e.mu.Unlock()
	r.stream.release()
}

// maxFinished bounds the memory of finished runs kept for the stop endpoint's 409.
const maxFinished = 10000

// maxThreads bounds the threads remembered in memory between runs.
const maxThreads = 100000

func runKey(threadID, runID string) string { return threadID + "\x00" + runID }

// permanentCancelError reports CancelTask failures that repeating cannot change: the agent
// refuses the caller, does not support cancelling, or does not know the task.
func permanentCancelError(err error) bool {
	return errors.Is(err, subagent.ErrAuth) || errors.Is(err, subagent.ErrCapabilityGap) || errors.Is(err, subagent.ErrInvalidTransition)
}

// Active reports the number of runs executing now.
// A run counts until its downstream cancellation has finished, not only until its stream
// ended (the thread is free for the next run a little earlier).
func (e *Engine) Active() int {
	return int(e.running.Load())
}

// Stop stops accepting runs, lets active runs finish until ctx is done, then cancels
// the rest (downstream cancellation included) and waits for them to end.
func (e *Engine) Stop(ctx context.Context) error {
	e.mu.Lock()
	wasClosing := e.closing
	e.closing = true
	e.mu.Unlock()
	if !wasClosing {
		// No run is taken over from here on: the look in progress ends first (a run it
		// claims is left to its lease, or to the hand-off's release).
		e.jobs.StopIntake(context.WithoutCancel(ctx))
	}
	// The heartbeat outlives the runs: their leases hold until they have ended.
	defer func() { _ = e.jobs.Stop(context.Background()) }()
	idle := make(chan struct{})
	go func() { e.wg.Wait(); close(idle) }()
	select {
	case <-idle:
		e.cancels.awaitPending(ctx)
		return nil
	case <-ctx.Done():
	}
	// The runs' writers stop retrying a store that does not take their writes.
	e.quitOnce.Do(func() { close(e.quit) })
	e.mu.Lock()
	runs := make([]*Run, 0, len(e.active))
	for _, r := range e.active {
		runs = append(runs, r)
	}
	e.mu.Unlock()
	if e.cfg.Handoff && len(runs) > 0 {
		// Not waited for: a run handed off may be blocked on downstream work that is
		// deliberately not cancelled; the process ends without it.
		e.handOff(runs)
		// CancelTask calls of runs that ended earlier may still be being confirmed.
		e.cancels.awaitPending(ctx)
		return nil
	}
	for _, r := range runs {
		r.Cancel(ErrShutdown)
	}
	<-idle
	e.cancels.awaitPending(ctx)
	return nil
}

// handOff hands the runs to the jobs' hand-off (durable.HandOff), which freezes their logs, stops them here
// without cancelling their downstream work, stores what their logs had pending, stops the
// heartbeat and ends their leases so that another replica takes them over.
func (e *Engine) handOff(runs []*Run) {
	leaving := make([]durable.Leaving, 0, len(runs))
	for _, r := range runs {
		// Before its log is frozen: a run handed off never ends its record here.
		r.handedOff.Store(true)
		leaving = append(leaving, durable.Leaving{Log: r.elog, Stop: func() {
			// The live stream ends without a terminal event (the run is not over): its
			// client reconnects (GET …/events) and follows the run on the replica that
			// takes it.
			r.stream.q.abandon()
			r.cancel(ErrHandoff)
		}})
	}
	n, err := e.jobs.HandOff(leaving)
	if err != nil {
		e.log.Error("handoff: releasing the runs failed; they are taken over once their lease lapses", "err", err)
		return
	}
	e.log.Info("runs handed off", "runs", n)
}

// hitlOptions are the clock and lifetime every interrupt of e's runs is made with.
func (e *Engine) hitlOptions() hitl.Options {
	return hitl.Options{Now: e.cfg.Now, TTL: e.cfg.InterruptTTL}
}

// gaugeSetter is the part of Metrics that takes the open interrupts at start; optional,
// so that a Metrics without it still works.
type gaugeSetter interface{ SetInterruptsOpen(n int) }

// loadInterruptsOpen sets the open-interrupts gauge from the store: the interrupts that
// were open before a restart are counted down when they are resumed or expire, so the
// gauge must count them up first.
func (e *Engine) loadInterruptsOpen(ctx context.Context) {
	g, ok := e.cfg.Metrics.(gaugeSetter)
	if !ok {
		return
	}
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	// Every interrupt expires (hitl sets ExpiresAt), so "expired a century from now" is
	// every open one (the store compares Unix nanoseconds, which end in 2262).
	open, err := e.cfg.Store.Expired(ctx, e.cfg.Now().AddDate(100, 0, 0))
	if err != nil {
		e.log.Warn("open interrupts not counted", "err", err)
		return
	}
	n := 0
	for _, s := range open {
		n += len(s.Interrupts)
	}
	g.SetInterruptsOpen(n)
}
