package coordinator

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/baton-dev/baton/a2a"
	"github.com/baton-dev/baton/agui"
	"github.com/baton-dev/baton/llm"
	"github.com/baton-dev/baton/mcpclient"
	"github.com/baton-dev/baton/store"
)

// Sentinel errors of the engine; the HTTP layer maps them to status codes.
var (
	// ErrThreadBusy means the thread already has an active run (HTTP 409).
	ErrThreadBusy = errors.New("thread has an active run")
	// ErrShuttingDown means the engine no longer accepts runs (HTTP 503).
	ErrShuttingDown = errors.New("coordinator is shutting down")
	// ErrRunNotFound means no such run is known (HTTP 404).
	ErrRunNotFound = errors.New("run not found")
	// ErrRunFinished means the run has already ended (HTTP 409).
	ErrRunFinished = errors.New("run already finished")
	// ErrForbidden means the thread belongs to another principal (HTTP 403).
	ErrForbidden = errors.New("thread belongs to another principal")
)

// Causes with which a run is cancelled; they decide how the stream ends and are recorded.
var (
	// ErrClientGone: the streaming client disconnected.
	ErrClientGone = errors.New("client disconnected")
	// ErrStopped: a producer-side stop was requested.
	ErrStopped = errors.New("stop requested")
	// ErrShutdown: the coordinator is shutting down.
	ErrShutdown = errors.New("coordinator shutdown")
	// ErrRunTimeLimit: work was still in flight when the run's time allowance
	// (limits.max_run_seconds of active time) and its grace were spent. A run that reaches
	// the limit between turns asks the user instead (time_limit, DESIGN §6).
	ErrRunTimeLimit = errors.New("run time limit reached")
)

// Delegate is the A2A client side of one sub-agent, as the engine uses it.
type Delegate interface {
	Send(ctx context.Context, req a2a.Request, obs a2a.Observer) (*a2a.Result, error)
	Cancel(ctx context.Context, taskID string) error
	GetTask(ctx context.Context, taskID string) (*a2a.Result, error)
}

// ToolServer is the MCP side as the engine uses it (implemented by *mcpclient.Registry).
type ToolServer interface {
	Tools() []mcpclient.Tool
	Call(ctx context.Context, name string, args json.RawMessage, opts mcpclient.CallOptions) (mcpclient.Result, error)
	Resume(ctx context.Context, in *mcpclient.InputRequired, responses map[string]*mcp.ElicitResult, opts mcpclient.CallOptions) (mcpclient.Result, error)
	Abandon(ctx context.Context, in *mcpclient.InputRequired) error
}

// Metrics receives the engine's operational counters (implemented by package metrics).
type Metrics interface {
	RunFinished(outcome string)
	ToolResult(tag string)
	A2ATaskState(state string)
	Cancellation(result string, d time.Duration)
	InterruptsOpen(delta int)
	Retry(kind string)
}

// Agent is a sub-agent offered to the model as a tool.
type Agent struct {
	// Name is the tool name (already sanitised).
	Name        string
	Description string
	Skills      []a2a.Skill
	// Timeout bounds the active time of one delegation; 0 means 120 s.
	Timeout time.Duration
	// InputRequired is "ask_user" or "model" (config agents[].input_required).
	InputRequired string
	Client        Delegate
}

// Limits are the run limits of the config's limits section.
type Limits struct {
	MaxIterations int
	MaxRunTime    time.Duration
	ToolTimeout   time.Duration
}

// Config configures an Engine.
type Config struct {
	Model  llm.Model
	Agents []Agent
	// Tools is optional: nil when no MCP servers are configured.
	Tools ToolServer
	// OnToolError maps an MCP server's name to what a tool error does to the run
	// (OnToolErrorRetry, the default, OnToolErrorFail or OnToolErrorError).
	OnToolError map[string]string
	Limits      Limits
	Logger      *slog.Logger
	// CancelTimeout bounds the downstream cancellation of a run (CancelTask calls); default 5 s.
	CancelTimeout time.Duration
	// Metrics is optional.
	Metrics Metrics
	// Store persists suspensions (interrupts); default: an in-memory store.
	Store store.Store
	// Sessions answers in-session MCP elicitations; pass the same value to
	// mcpclient.Options.Elicitor. Default: a fresh one (in-session questions then decline).
	Sessions *SessionElicitor
	// InterruptTTL is how long an interrupt stays open; default 30 min.
	InterruptTTL time.Duration
	// ExpiryInterval is how often expired interrupts are looked for; 0 disables the scan
	// (expired interrupts are then only noticed by a resume).
	ExpiryInterval time.Duration
	// Now is the clock; default time.Now.
	Now func() time.Time
	// Policy decides what to do about failures (DESIGN §6); default &DefaultPolicy{}.
	Policy Policy
	// Guard is the config's policy section: allow/deny lists, rate limits, budget
	// (DESIGN §7). The zero value allows everything.
	Guard GuardPolicy
	// Loop sets the loop detector's thresholds and the stall detection; the zero value
	// means the defaults (DefaultLoopSoft, DefaultLoopHard, DefaultStallTurns).
	Loop LoopConfig
}

// Engine runs AG-UI runs. It is safe for concurrent use.
type Engine struct {
	cfg    Config
	log    *slog.Logger
	agents map[string]*Agent

	mu       sync.Mutex
	active   map[string]*Run // by thread id
	finished map[string]string
	threads  map[string]*thread
	closing  bool
	wg       sync.WaitGroup
	sessions *SessionElicitor
	running  atomic.Int64 // runs whose goroutine has not ended
	stopJan  chan struct{}
	janDone  chan struct{}
	// limiter holds the rate-limit windows, shared by every run.
	limiter *RateLimiter
}

// thread is what the engine remembers about a thread between runs.
type thread struct {
	owner string
	// tasks maps A2A task ids seen in this thread to their agent and context, so that a
	// continuation can be checked and sent with the right context id.
	tasks map[string]taskRef
}

// New validates cfg and builds an Engine.
func New(cfg Config) (*Engine, error) {
	if cfg.Model == nil {
		return nil, errors.New("coordinator: a model is required")
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.Limits.MaxIterations <= 0 {
		cfg.Limits.MaxIterations = 25
	}
	if cfg.Limits.MaxRunTime <= 0 {
		cfg.Limits.MaxRunTime = 600 * time.Second
	}
	if cfg.Limits.ToolTimeout <= 0 {
		cfg.Limits.ToolTimeout = 120 * time.Second
	}
	if cfg.CancelTimeout <= 0 {
		cfg.CancelTimeout = 5 * time.Second
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Store == nil {
		st, err := store.Open(context.Background(), "memory:")
		if err != nil {
			return nil, fmt.Errorf("coordinator: memory store: %w", err)
		}
		cfg.Store = st
	}
	if cfg.Sessions == nil {
		cfg.Sessions = NewSessionElicitor()
	}
	if cfg.Policy == nil {
		cfg.Policy = &DefaultPolicy{}
	}
	if cfg.Loop == (LoopConfig{}) {
		cfg.Loop = LoopConfig{SoftThreshold: DefaultLoopSoft, HardThreshold: DefaultLoopHard, StallTurns: DefaultStallTurns}
	}
	e := &Engine{
		cfg:      cfg,
		log:      cfg.Logger,
		agents:   make(map[string]*Agent),
		active:   make(map[string]*Run),
		finished: make(map[string]string),
		threads:  make(map[string]*thread),
		sessions: cfg.Sessions,
		limiter:  NewRateLimiter(cfg.Guard.RateLimits),
	}
	e.loadInterruptsOpen()
	if cfg.ExpiryInterval > 0 {
		e.stopJan, e.janDone = make(chan struct{}), make(chan struct{})
		go func() { defer close(e.janDone); e.janitor(e.stopJan, cfg.ExpiryInterval) }()
	}
	for i := range cfg.Agents {
		a := &cfg.Agents[i]
		if a.Client == nil {
			return nil, fmt.Errorf("coordinator: agent %q has no client", a.Name)
		}
		if a.Timeout <= 0 {
			a.Timeout = 120 * time.Second
		}
		if _, dup := e.agents[a.Name]; dup {
			return nil, fmt.Errorf("coordinator: duplicate agent %q", a.Name)
		}
		e.agents[a.Name] = a
	}
	return e, nil
}

// gaugeSetter is the part of Metrics that takes the open interrupts at start; optional,
// so that a Metrics without it still works.
type gaugeSetter interface{ SetInterruptsOpen(n int) }

// loadInterruptsOpen sets the open-interrupts gauge from the store: the interrupts that
// were open before a restart are counted down when they are resumed or expire, so the
// gauge must count them up first.
func (e *Engine) loadInterruptsOpen() {
	g, ok := e.cfg.Metrics.(gaugeSetter)
	if !ok {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
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

// Start begins a run for in on behalf of principal ("" without auth). The run executes in
// the background; stream its events with Run.Next.
func (e *Engine) Start(in *agui.RunAgentInput, principal string) (*Run, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.closing {
		return nil, ErrShuttingDown
	}
	th := e.threads[in.ThreadID]
	if th != nil && th.owner != principal {
		return nil, ErrForbidden
	}
	if th == nil {
		// After a restart the thread is known only to the store (a parked run).
		susp, err := e.loadSuspension(context.Background(), in.ThreadID)
		if err == nil && susp != nil && susp.Owner != principal {
			return nil, ErrForbidden
		}
	}
	if _, busy := e.active[in.ThreadID]; busy {
		return nil, ErrThreadBusy
	}
	if th == nil {
		th = &thread{owner: principal, tasks: make(map[string]taskRef)}
		e.threads[in.ThreadID] = th
	}
	r := newRun(e, in)
	r.owner = principal
	e.active[in.ThreadID] = r
	delete(e.finished, runKey(in.ThreadID, in.RunID))
	e.wg.Add(1)
	e.running.Add(1)
	go func() {
		defer e.wg.Done()
		defer e.running.Add(-1)
		r.execute()
	}()
	return r, nil
}

// release frees the run's thread for the next run, as soon as its stream has ended.
func (e *Engine) release(r *Run) {
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
			}
			if len(e.threads) <= maxThreads*9/10 {
				break
			}
		}
	}
	e.mu.Unlock()
	close(r.released)
}

// maxFinished bounds the memory of finished runs kept for the stop endpoint's 409.
const maxFinished = 10000

// maxThreads bounds the threads remembered in memory between runs.
const maxThreads = 100000

// Stop cancels the active run (threadID, runID) on the producer side: its stream ends with
// the cancelled outcome.
func (e *Engine) Stop(threadID, runID, principal string) error {
	e.mu.Lock()
	th := e.threads[threadID]
	r := e.active[threadID]
	_, done := e.finished[runKey(threadID, runID)]
	e.mu.Unlock()
	if th == nil {
		return ErrRunNotFound
	}
	if th.owner != principal {
		return ErrForbidden
	}
	if r == nil || r.RunID != runID {
		if done {
			return ErrRunFinished
		}
		return ErrRunNotFound
	}
	if r.terminated() {
		return ErrRunFinished
	}
	r.Cancel(ErrStopped)
	return nil
}

// Active reports the number of runs executing now.
// A run counts until its downstream cancellation has finished, not only until its stream
// ended (the thread is free for the next run a little earlier).
func (e *Engine) Active() int {
	return int(e.running.Load())
}

// Shutdown stops accepting runs, lets active runs finish until ctx is done, then cancels
// the rest (downstream cancellation included) and waits for them to end.
func (e *Engine) Shutdown(ctx context.Context) error {
	e.mu.Lock()
	wasClosing := e.closing
	e.closing = true
	e.mu.Unlock()
	if e.stopJan != nil && !wasClosing {
		close(e.stopJan)
		<-e.janDone
	}
	idle := make(chan struct{})
	go func() { e.wg.Wait(); close(idle) }()
	select {
	case <-idle:
		return nil
	case <-ctx.Done():
	}
	e.mu.Lock()
	runs := make([]*Run, 0, len(e.active))
	for _, r := range e.active {
		runs = append(runs, r)
	}
	e.mu.Unlock()
	for _, r := range runs {
		r.Cancel(ErrShutdown)
	}
	<-idle
	return nil
}

func runKey(threadID, runID string) string { return threadID + "\x00" + runID }
