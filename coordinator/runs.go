package coordinator

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/baton-dev/baton/agui"
	"github.com/baton-dev/baton/hitl"
	"github.com/baton-dev/baton/internal/config"
	"github.com/baton-dev/baton/internal/followers"
	"github.com/baton-dev/baton/runs"
	"github.com/baton-dev/baton/store"
)

// Runs is the engine's one port for surfaces: AG-UI (server), A2A (a2aserver) and MCP
// (mcpserver) start, follow, resume and stop runs and read a principal's threads, journal
// and tasks through it, and through nothing else. Every method names its principal and
// checks ownership itself, so no surface can forget it: another principal's thread, run or
// task is not found, the same answer as one that does not exist. Admission (active runs,
// followers per run and per principal, threads per principal, the principal's day) is
// counted here, in the same step as what it admits.
//
// Its methods live in runs.go (starts, stops, reads), runs_follow.go (following a run from
// its live queue or its stored log, on any replica) and runs_tasks.go (the A2A door's tasks).
type Runs struct {
	e   *Engine
	cfg RunsConfig

	tails tails // the shared tail of every run followed here (runs_follow.go)
}

// RunsConfig configures the port.
type RunsConfig struct {
	// Followers counts the streams each principal follows, across every surface; nil: a
	// counter of the port's own with followers.DefaultMaxPerPrincipal.
	Followers *followers.Counter
	// MaxFollowersPerRun caps the streams that follow one run on this process
	// (server.max_followers_per_run); 0: DefaultMaxFollowersPerRun; negative: no cap.
	MaxFollowersPerRun int
	// AgentConfigured reports whether an A2A sub-agent (by the engine's tool name for it)
	// is configured on this process; nil: every one is. A downstream cancel of an agent
	// that is not cannot be confirmed here.
	AgentConfigured func(name string) bool
}

// NewRuns returns the engine's port for surfaces.
func NewRuns(e *Engine, cfg RunsConfig) *Runs {
	if cfg.Followers == nil {
		cfg.Followers = followers.New(0)
	}
	if cfg.MaxFollowersPerRun == 0 {
		cfg.MaxFollowersPerRun = DefaultMaxFollowersPerRun
	}
	return &Runs{e: e, cfg: cfg}
}

// DefaultMaxFollowersPerRun is RunsConfig.MaxFollowersPerRun's default.
const DefaultMaxFollowersPerRun = config.DefaultMaxFollowersPerRun

// portTimeout bounds one store read the port makes for a surface.
const portTimeout = 10 * time.Second

// Start starts a run of principal from in, admitted against opts in the same step as every
// other start. The errors are the runs package's sentinels (ErrThreadBusy, ErrTooManyRuns,
// ErrTooManyThreads, ErrThreadExpired, ErrForbidden, ErrTooDeep, ErrShuttingDown) or a
// *runs.BudgetExceededError.
func (p *Runs) Start(ctx context.Context, in *agui.RunAgentInput, principal string, opts runs.StartOptions) (*runs.Started, error) {
	r, err := p.e.StartRun(ctx, in, principal, MaxActive(opts.MaxActive))
	if err != nil {
		return nil, portErr(err)
	}
	return &runs.Started{ThreadID: r.ThreadID, RunID: r.RunID, Stream: r.Stream(), Done: r.Done(), Cancellations: r.Cancellations}, nil
}

// events converts stored events to the port's.
func events(evs []store.Event) []runs.Event {
	if evs == nil {
		return nil
	}
	out := make([]runs.Event, len(evs))
	for i, ev := range evs {
		out[i] = runs.Event{Seq: ev.Seq, Data: ev.Data}
	}
	return out
}

// Stop stops run runID of principal's thread threadID, with its downstream work. Another
// principal's run is runs.ErrRunNotFound, as one that does not exist.
func (p *Runs) Stop(threadID, runID, principal string) error {
	err := p.e.StopRun(threadID, runID, principal)
	if errors.Is(err, ErrForbidden) {
		return runs.ErrRunNotFound
	}
	return portErr(err)
}

// SessionHome returns the address of the replica that holds the live session a resume of
// the thread must answer, or "" when the resume can run here (Engine.SessionHome).
func (p *Runs) SessionHome(ctx context.Context, threadID, principal string) (string, error) {
	home, err := p.e.SessionHome(ctx, threadID, principal)
	return home, portErr(err)
}

// DeleteThread deletes principal's thread (Engine.DeleteThread).
func (p *Runs) DeleteThread(ctx context.Context, threadID, principal string) error {
	return portErr(p.e.DeleteThread(ctx, threadID, principal))
}

// portErr marks an engine error that comes from a store that could not be reached as
// runs.ErrUnavailable, for the surfaces (which do not know the store).
func portErr(err error) error {
	if err != nil && errors.Is(err, store.ErrUnavailable) && !errors.Is(err, runs.ErrUnavailable) {
		return fmt.Errorf("%w: %w", runs.ErrUnavailable, err)
	}
	return err
}

// unavailable wraps a store error as runs.ErrUnavailable, keeping it for the log.
func unavailable(what string, err error) error {
	return fmt.Errorf("%w: %s: %w", runs.ErrUnavailable, what, err)
}

// thread returns principal's thread threadID: runs.ErrThreadNotFound for a thread that
// does not exist or is another principal's, runs.ErrThreadExpired for one of principal's
// that thread_retention swept.
func (p *Runs) thread(ctx context.Context, principal, threadID string) (*store.Thread, error) {
	st := p.e.cfg.Store
	th, err := st.GetThread(ctx, threadID)
	if errors.Is(err, store.ErrNotFound) {
		if owner, expired, xerr := st.ExpiredThread(ctx, threadID); xerr == nil && expired && owner == principal {
			return nil, runs.ErrThreadExpired
		}
		return nil, runs.ErrThreadNotFound
	}
	if err != nil {
		return nil, unavailable("get thread", err)
	}
	if th.Owner != principal {
		return nil, runs.ErrThreadNotFound
	}
	return th, nil
}

// Thread returns principal's thread threadID (runs.ErrThreadNotFound, ErrThreadExpired,
// ErrUnavailable).
func (p *Runs) Thread(ctx context.Context, principal, threadID string) (*runs.Thread, error) {
	ctx, cancel := context.WithTimeout(ctx, portTimeout)
	defer cancel()
	th, err := p.thread(ctx, principal, threadID)
	if err != nil {
		return nil, err
	}
	t := threadOf(*th)
	return &t, nil
}

func threadOf(th store.Thread) runs.Thread {
	return runs.Thread{ID: th.ID, Title: th.Title, CreatedAt: th.CreatedAt, UpdatedAt: th.UpdatedAt,
		LastRunID: th.LastRunID, LastRunAt: th.LastRunAt, Running: th.Running, OpenInterrupts: th.OpenInterrupts}
}

// Threads returns principal's threads, most recently updated first, at most limit.
func (p *Runs) Threads(ctx context.Context, principal string, limit int) ([]runs.Thread, error) {
	ctx, cancel := context.WithTimeout(ctx, portTimeout)
	defer cancel()
	list, err := p.e.cfg.Store.ListThreads(ctx, principal, limit)
	if err != nil {
		return nil, unavailable("list threads", err)
	}
	out := make([]runs.Thread, 0, len(list))
	for _, t := range list {
		out = append(out, threadOf(t))
	}
	return out, nil
}

// ThreadsPage returns principal's threads whose id starts with prefix (an id family, the
// id up to its first '-': "mcp-"), newest first by creation, after before (nil: from the
// newest), at most limit: one index range of the store, whatever the number of threads
// the principal holds.
func (p *Runs) ThreadsPage(ctx context.Context, principal, prefix string, before *runs.ThreadCursor, limit int) ([]runs.Thread, error) {
	ctx, cancel := context.WithTimeout(ctx, portTimeout)
	defer cancel()
	var after *store.ThreadCursor
	if before != nil {
		after = &store.ThreadCursor{CreatedAt: before.CreatedAt, ID: before.ID}
	}
	list, err := p.e.cfg.Store.ThreadsPage(ctx, principal, prefix, after, limit)
	if errors.Is(err, store.ErrBadFamily) {
		return nil, err
	}
	if err != nil {
		return nil, unavailable("threads page", err)
	}
	out := make([]runs.Thread, 0, len(list))
	for _, t := range list {
		out = append(out, threadOf(t))
	}
	return out, nil
}

// ThreadDoc returns everything a read of principal's thread shows: every message (a
// summary marked as such), the open interrupts, the active run and the thread's usage.
func (p *Runs) ThreadDoc(ctx context.Context, principal, threadID string) (*runs.ThreadDoc, error) {
	ctx, cancel := context.WithTimeout(ctx, portTimeout)
	defer cancel()
	th, err := p.thread(ctx, principal, threadID)
	if err != nil {
		return nil, err
	}
	st := p.e.cfg.Store
	doc := &runs.ThreadDoc{Thread: threadOf(*th)}
	msgs, err := st.LoadMessages(ctx, th.ID)
	if err != nil {
		return nil, unavailable("load messages", err)
	}
	for _, m := range msgs {
		doc.Messages = append(doc.Messages, m.Data)
	}
	susp, err := st.LoadSuspension(ctx, th.ID)
	switch {
	case errors.Is(err, store.ErrNotFound):
	case err != nil:
		return nil, unavailable("load suspension", err)
	default:
		for _, in := range susp.Interrupts {
			doc.Interrupts = append(doc.Interrupts, hitl.ToAGUI(in))
		}
	}
	run, err := st.ActiveRun(ctx, th.ID)
	switch {
	case errors.Is(err, store.ErrNotFound):
	case err != nil:
		return nil, unavailable("active run", err)
	default:
		doc.ActiveRun = &runs.ActiveRun{RunID: run.RunID, State: run.State}
	}
	if l, ok := st.(store.SpendLedger); ok {
		u, err := l.ThreadSpend(ctx, th.ID)
		if err != nil {
			return nil, unavailable("thread spend", err)
		}
		doc.Usage = runs.Usage{InputTokens: u.InputTokens, OutputTokens: u.OutputTokens, CostUSD: u.CostUSD}
	}
	return doc, nil
}

// Steps returns principal's thread's journal steps after step after, at most limit
// (runs.MaxStepsRead).
func (p *Runs) Steps(ctx context.Context, principal, threadID string, after int64, limit int) ([]runs.Step, error) {
	ctx, cancel := context.WithTimeout(ctx, portTimeout)
	defer cancel()
	if _, err := p.thread(ctx, principal, threadID); err != nil {
		return nil, err
	}
	steps, err := p.e.cfg.Store.Steps(ctx, threadID, after, limit)
	if err != nil {
		return nil, unavailable("journal", err)
	}
	out := make([]runs.Step, 0, len(steps))
	for _, st := range steps {
		out = append(out, runs.Step{Seq: st.Seq, RunID: st.RunID, At: st.At, Kind: st.Kind, Target: st.Target,
			Attempt: st.Attempt, Outcome: st.Outcome, Tag: st.Tag, FailureKind: st.FailureKind, InDoubt: st.InDoubt,
			Replica: st.Replica, Detail: st.Detail})
	}
	return out, nil
}

// RunEpoch returns the fencing epoch of run runID of thread threadID (0: no such run) and
// whether the thread is principal's. A stranger's thread gives (0, false): the surface
// learns nothing it could tell the stranger.
func (p *Runs) RunEpoch(ctx context.Context, principal, threadID, runID string) (epoch int64, yours bool, err error) {
	ctx, cancel := context.WithTimeout(ctx, portTimeout)
	defer cancel()
	if _, err := p.thread(ctx, principal, threadID); errors.Is(err, runs.ErrThreadNotFound) || errors.Is(err, runs.ErrThreadExpired) {
		return 0, false, nil
	} else if err != nil {
		return 0, false, err
	}
	rec, err := p.e.cfg.Store.GetRun(ctx, threadID, runID)
	if errors.Is(err, store.ErrNotFound) {
		return 0, true, nil
	}
	if err != nil {
		return 0, true, unavailable("get run", err)
	}
	return rec.Epoch, true, nil
}

// Follower counts one more stream of principal that follows key (a run, a task) against
// the principal's cap across every surface and maxPerKey (0: none): it returns
// runs.ErrTooManyFollowers or runs.ErrPrincipalFollowers when either is full, else the
// function that ends the count.
func (p *Runs) Follower(principal, key string, maxPerKey int) (leave func(), err error) {
	leave, err = p.cfg.Followers.Join(principal, key, maxPerKey)
	switch {
	case errors.Is(err, followers.ErrPrincipalFull):
		return nil, runs.ErrPrincipalFollowers
	case err != nil:
		return nil, runs.ErrTooManyFollowers
	}
	return leave, nil
}
