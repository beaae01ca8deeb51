package cancel

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"time"

	"github.com/baton-dev/baton/internal/retry"
)

// ErrAlreadyTerminal, returned (wrapped) by a Func, says that the piece was over before the
// cancel reached it: nothing was cancelled and nothing needs to be. It is not a failure.
var ErrAlreadyTerminal = errors.New("cancel: the piece was already over")

// Final results of an A2A task's cancellation when a [Confirmer] follows it (the values of
// baton_cancellations_total for such tasks): counted once, as the cancellation finally is.
const (
	ResultConfirmed       = "confirmed"        // the agent said the task is canceled
	ResultAlreadyTerminal = "already_terminal" // the task had ended on its own
	ResultAbandoned       = "abandoned"        // not confirmed within the horizon
	// ResultPending is the report of a first attempt that failed and is being retried in
	// the background; it is not a final result (not counted).
	ResultPending = "pending"
)

// ConfirmerConfig configures a [Confirmer].
type ConfirmerConfig struct {
	// Horizon bounds how long one cancellation is retried; default 2 min.
	Horizon time.Duration
	// PerAgent bounds the cancel calls in flight per agent, so that a mass disconnect does
	// not flood one agent; default 32.
	PerAgent int
	// Attempt bounds one attempt (a Func call); default 5 s.
	Attempt time.Duration
	// Backoff is the first wait between attempts; it doubles up to MaxBackoff. Defaults
	// 500 ms and 15 s.
	Backoff, MaxBackoff time.Duration
	// Permanent reports errors that repeating cannot change (authentication, unknown
	// task): such a cancellation ends as failed at once. Default: none.
	Permanent func(error) bool
	// RetryAfter returns the wait the agent asked for with a failed attempt's error
	// (Retry-After); the next attempt waits at least that long. Default: none.
	RetryAfter func(error) time.Duration
	// Logger receives the warning for an abandoned cancellation; default slog.Default().
	Logger *slog.Logger
	// OnFollow is called when a cancellation starts being followed, before the call that
	// hands it over (Cancel, Resume, a scope's Cancel) returns, with its owner
	// (Report.Owner); OnSettle when it has its final result,
	// once that result is reported (done, a scope's OnReport): the engine records pending
	// cancels in its store so that a restart continues them ([Confirmer.Resume]) as their
	// owner. Either may be nil.
	OnFollow func(name, id, owner string, since time.Time)
	OnSettle func(name, id string)
}

// Confirmer paces cancel calls per agent and follows, in the background, every A2A
// cancellation whose first attempt failed until the agent confirms it or the horizon
// passes. Its zero value is not usable; use NewConfirmer. A nil *Confirmer paces nothing
// and follows nothing.
type Confirmer struct {
	cfg  ConfirmerConfig
	life context.Context
	stop context.CancelFunc

	mu    sync.Mutex
	gates map[string]chan struct{}
	wg    sync.WaitGroup
}

// NewConfirmer returns a Confirmer; call Close to end it.
func NewConfirmer(cfg ConfirmerConfig) *Confirmer {
	if cfg.Horizon <= 0 {
		cfg.Horizon = 2 * time.Minute
	}
	if cfg.PerAgent <= 0 {
		cfg.PerAgent = 32
	}
	if cfg.Attempt <= 0 {
		cfg.Attempt = 5 * time.Second
	}
	if cfg.Backoff <= 0 {
		cfg.Backoff = 500 * time.Millisecond
	}
	if cfg.MaxBackoff <= 0 {
		cfg.MaxBackoff = 15 * time.Second
	}
	if cfg.Permanent == nil {
		cfg.Permanent = func(error) bool { return false }
	}
	if cfg.RetryAfter == nil {
		cfg.RetryAfter = func(error) time.Duration { return 0 }
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	// life bounds the confirmer's background retries and ends with Stop, not with the
	// context of the run whose cancel it confirms.
	life, stop := context.WithCancel(context.Background())
	return &Confirmer{cfg: cfg, life: life, stop: stop, gates: make(map[string]chan struct{})}
}

func (c *Confirmer) gate(agent string) chan struct{} {
	c.mu.Lock()
	defer c.mu.Unlock()
	g, ok := c.gates[agent]
	if !ok {
		g = make(chan struct{}, c.cfg.PerAgent)
		c.gates[agent] = g
	}
	return g
}

// call runs fn once, after waiting for a free slot of the agent's gate.
func (c *Confirmer) call(ctx context.Context, agent, id string, fn Func) error {
	if c == nil {
		return fn(ctx, id)
	}
	g := c.gate(agent)
	select {
	case g <- struct{}{}:
	case <-ctx.Done():
		return ctx.Err()
	}
	defer func() { <-g }()
	return fn(ctx, id)
}

// classify turns the error of one attempt into a result: a final one, or ResultPending
// when trying again may help.
func (c *Confirmer) classify(err error) string {
	switch {
	case err == nil:
		return ResultConfirmed
	case errors.Is(err, ErrAlreadyTerminal):
		return ResultAlreadyTerminal
	case errors.Is(err, ErrMoved):
		return ResultMoved
	case c.cfg.Permanent(err):
		return ResultFailed
	default:
		return ResultPending
	}
}

// follow retries a pending cancellation on a goroutine of its own and calls done once with
// the final report. first is the report of the failed first attempt.
func (c *Confirmer) follow(first Report, fn Func, start time.Time, done func(Report)) {
	// Recorded before follow returns, so before the run that is stopping ends (its stop
	// waits for the first attempts): another replica that sees the run ended then finds
	// the cancel pending, not missing, which would read as confirmed.
	if c.cfg.OnFollow != nil {
		c.cfg.OnFollow(first.Name, first.ID, first.Owner, start)
	}
	c.wg.Add(1)
	go func() {
		defer c.wg.Done()
		final := c.retry(first, fn, start)
		// A cancellation abandoned because the Confirmer is closing (the process stops)
		// stays recorded: the next start continues it.
		closing := final.Result == ResultAbandoned && c.life.Err() != nil
		// The final report first (the engine journals a cancel that was not confirmed),
		// then the record goes: another replica that reads the run's cancels from the store
		// never finds one neither pending nor journaled, which would read as confirmed.
		done(final)
		if c.cfg.OnSettle != nil && !closing {
			c.cfg.OnSettle(final.Name, final.ID)
		}
	}()
}

// Cancel cancels one A2A task outside a run's scope (a parked task whose interrupt expired
// or was cancelled, a task of a lapsed run): one attempt now, through the agent's gate and
// bounded by the attempt timeout, then, when it failed with an error that repeating may
// change, the same follow-up as a run's cancellations. owner is whose task it is (see
// Report.Owner). done (may be nil) gets the final report once; Cancel returns the first
// one (ResultPending when it is being followed).
func (c *Confirmer) Cancel(ctx context.Context, name, id, owner string, fn Func, done func(Report)) Report {
	start := time.Now()
	r := Report{Kind: KindA2ATask, Name: name, ID: id, Owner: owner}
	attempt := 5 * time.Second
	if c != nil {
		attempt = c.cfg.Attempt
	}
	actx, cancel := context.WithTimeout(context.WithoutCancel(ctx), attempt)
	err := c.call(actx, name, id, fn)
	cancel()
	r.Latency = time.Since(start)
	if c == nil {
		r.Result, r.Err = ResultCancelled, err
		switch {
		case errors.Is(err, ErrAlreadyTerminal):
			r.Result, r.Err = ResultAlreadyTerminal, nil
		case errors.Is(err, ErrMoved):
			r.Result, r.Err = ResultMoved, nil
		case err != nil:
			r.Result = ResultFailed
		}
		if done != nil {
			done(r)
		}
		return r
	}
	switch res := c.classify(err); res {
	case ResultPending:
		r.Result, r.Err = res, err
		if done == nil {
			done = func(Report) {}
		}
		c.follow(r, fn, start, done)
	default:
		r.Result = res
		if res == ResultFailed {
			r.Err = err
		}
		if done != nil {
			done(r)
		}
	}
	return r
}

// Resume follows a cancellation that an earlier process left pending (recorded through
// OnFollow, with its owner): since is when it was decided, so the horizon is not extended
// by the restart.
func (c *Confirmer) Resume(name, id, owner string, fn Func, since time.Time, done func(Report)) {
	if c == nil {
		return
	}
	c.follow(Report{Kind: KindA2ATask, Name: name, ID: id, Owner: owner, Result: ResultPending}, fn, since, done)
}

func (c *Confirmer) retry(r Report, fn Func, start time.Time) Report {
	ctx, cancel := context.WithDeadline(c.life, start.Add(c.cfg.Horizon))
	defer cancel()
	for attempt := 1; ; attempt++ {
		wait := max(retry.Backoff(c.cfg.Backoff, c.cfg.MaxBackoff, attempt), c.cfg.RetryAfter(r.Err))
		if !retry.Sleep(ctx, wait) {
			break
		}
		actx, acancel := context.WithTimeout(ctx, c.cfg.Attempt)
		err := c.call(actx, r.Name, r.ID, fn)
		acancel()
		switch res := c.classify(err); res {
		case ResultPending:
			r.Err = err
			continue
		default:
			r.Result, r.Latency = res, time.Since(start)
			r.Err = nil
			if res == ResultFailed {
				r.Err = err
			}
			return r
		}
	}
	r.Result, r.Latency = ResultAbandoned, time.Since(start)
	c.cfg.Logger.Warn("downstream cancellation abandoned: not confirmed within the horizon",
		"name", r.Name, "task_id", r.ID, "horizon", c.cfg.Horizon, "err", errText(r.Err))
	return r
}

func errText(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

// Wait waits until every followed cancellation has ended, or ctx is done.
func (c *Confirmer) Wait(ctx context.Context) error {
	if c == nil {
		return nil
	}
	idle := make(chan struct{})
	go func() { c.wg.Wait(); close(idle) }()
	select {
	case <-idle:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Close abandons the cancellations still followed (each is reported as abandoned) and
// waits for their goroutines to end.
func (c *Confirmer) Close() {
	if c == nil {
		return
	}
	c.stop()
	c.wg.Wait()
}
