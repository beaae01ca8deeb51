// Package cancel keeps, per run, everything the run has in flight downstream (A2A tasks, MCP
// calls, the LLM request) and knows how to cancel each piece.
//
// Design note: a run is cancelled when its client disconnects, on a producer stop, at its
// time limit or at shutdown. By then the request context is dead, so cancellation runs on a
// context of its own with its own deadline (Options.Timeout, 5 s by default), and every
// piece is cancelled in parallel. An A2A task whose id is not known yet cannot be cancelled;
// its cancellation is held and sent the moment the id arrives (Item.Arm), or given up at the
// deadline. Each piece ends with a Report, which the run's record and logs keep.
package cancel

import (
	"context"
	"errors"
	"slices"
	"sync"
	"time"
)

// Kind names what a tracked piece is.
type Kind string

// The kinds of downstream work a run tracks.
const (
	KindA2ATask Kind = "a2a_task"
	KindMCPCall Kind = "mcp_call"
	KindLLM     Kind = "llm_request"
)

// Results of cancelling one piece.
const (
	ResultCancelled = "cancelled"
	ResultNoID      = "no_task_id" // the id never arrived before the deadline
	ResultFailed    = "failed"
	// ResultMoved: the piece belongs to another replica now (the run moved there, and
	// that replica follows it); nothing was sent. See ErrMoved.
	ResultMoved = "moved"
)

// ErrMoved, returned (wrapped) by a Func, says that the piece is not this process's to
// cancel any more: the run it belongs to was taken over by another replica, which follows
// it. Nothing was sent, and nothing is retried: it is a final result, not a failure.
var ErrMoved = errors.New("cancel: the piece belongs to another replica now")

// Func cancels one piece identified by id; it must honour ctx.
type Func func(ctx context.Context, id string) error

// Report says how the cancellation of one piece went.
type Report struct {
	Kind Kind
	Name string // agent, tool or model
	ID   string // task id, when there is one
	// Owner is whose piece it is (an opaque principal id, "" when none was given); a
	// Confirmer hands it to OnFollow, so that a recorded cancel keeps it.
	Owner   string
	Result  string
	Err     error
	Latency time.Duration // from the start of Cancel to the downstream acknowledgement
}

// Options configures a Scope.
type Options struct {
	// Timeout bounds the whole downstream cancellation; default 5 s.
	Timeout time.Duration
	// OnReport, when set, is called for every finished cancellation (metrics, logs): once
	// per piece, with its final result (a followed A2A cancellation reports when the
	// Confirmer is done with it, not at its first attempt).
	OnReport func(Report)
	// Confirmer, when set, paces A2A cancel calls per agent and follows the ones whose
	// first attempt fails until they are confirmed or abandoned (see [Confirmer]). The
	// run does not wait for that: Cancel returns after the first attempt.
	Confirmer *Confirmer
}

// Scope tracks one run's downstream work. The zero value is not usable; use NewScope.
type Scope struct {
	opts Options

	mu sync.Mutex
	// items are the pieces in flight: a few at a time, so a slice (an open run retains
	// less than with a map).
	items     []*Item
	cancelled bool
	cause     error
	start     time.Time
	reports   []Report
	// firing counts the cancellations in flight; idle is closed when it drops to zero. (A
	// sync.WaitGroup would race: a piece tracked after the cancel adds to the count while
	// Cancel may already be waiting at zero.)
	firing int
	idle   chan struct{}
}

// NewScope returns an empty scope.
func NewScope(opts Options) *Scope {
	if opts.Timeout <= 0 {
		opts.Timeout = 5 * time.Second
	}
	return &Scope{opts: opts}
}

// Item is one tracked piece of downstream work.
type Item struct {
	s    *Scope
	kind Kind
	name string

	mu       sync.Mutex
	id       string
	owner    string
	fn       Func
	armed    signal // by Arm
	settled  signal // once cancelled, given up or released
	finished bool
	firing   bool
}

// Track registers a piece. fn may be nil until Arm provides it (an A2A task before its id).
func (s *Scope) Track(kind Kind, name string) *Item {
	it := &Item{s: s, kind: kind, name: name}
	s.mu.Lock()
	s.items = append(s.items, it)
	cancelled := s.cancelled
	if cancelled {
		s.addFiring(1)
	}
	s.mu.Unlock()
	if cancelled {
		// Registered after the run was cancelled: cancel it as soon as it is armed.
		s.fireCounted(it)
	}
	return it
}

// Arm records the id and the cancel function; a held cancellation fires now.
func (it *Item) Arm(id string, fn Func) { it.ArmFor("", id, fn) }

// ArmFor is Arm for a piece that belongs to owner (its reports carry it).
func (it *Item) ArmFor(owner, id string, fn Func) {
	it.mu.Lock()
	if it.fn != nil || it.finished {
		it.mu.Unlock()
		return
	}
	it.owner, it.id, it.fn = owner, id, fn
	it.armed.fire()
	it.mu.Unlock()
}

// Release marks the piece finished normally: nothing is left to cancel.
func (it *Item) Release() {
	it.mu.Lock()
	if it.finished {
		it.mu.Unlock()
		return
	}
	it.finished = true
	if !it.firing {
		it.settled.fire()
	}
	it.mu.Unlock()
	it.s.mu.Lock()
	if i := slices.Index(it.s.items, it); i >= 0 {
		it.s.items = slices.Delete(it.s.items, i, i+1)
	}
	if len(it.s.items) == 0 {
		it.s.items = nil
	}
	it.s.mu.Unlock()
}

// Done is closed once the piece has been cancelled (or given up on) or released. A
// delegation waits for it before it drops its request, so that a held cancel can still
// learn the task id from that request.
func (it *Item) Done() <-chan struct{} {
	it.mu.Lock()
	defer it.mu.Unlock()
	return it.settled.wait()
}

// CancelNow cancels this one piece (e.g. its own timeout) and waits for the result.
func (it *Item) CancelNow() Report {
	if !it.claim() {
		<-it.Done()
		return Report{Kind: it.kind, Name: it.name, Result: resultSettled}
	}
	// A cancellation is sent because the caller's context is ending: it gets its own.
	ctx, cancel := context.WithTimeout(context.Background(), it.s.opts.Timeout)
	defer cancel()
	start := time.Now()
	r := it.cancel(ctx, start)
	// A pending report goes back to the caller (it knows the cancel is not confirmed yet);
	// the final one goes to OnReport.
	it.followIfPending(r, start, func(final Report) {
		if it.s.opts.OnReport != nil {
			it.s.opts.OnReport(final)
		}
	})
	return r
}

// resultSettled marks a piece that was already released or cancelled; it is not reported.
const resultSettled = "already settled"

// claim marks the piece as being cancelled; false if it is already settled or in progress.
func (it *Item) claim() bool {
	it.mu.Lock()
	defer it.mu.Unlock()
	if it.finished || it.firing {
		return false
	}
	it.firing = true
	return true
}

// cancel runs a claimed cancellation.
func (it *Item) cancel(ctx context.Context, start time.Time) Report {
	defer func() {
		it.mu.Lock()
		it.settled.fire()
		it.mu.Unlock()
	}()

	r := Report{Kind: it.kind, Name: it.name}
	it.mu.Lock()
	armed := it.armed.wait()
	it.mu.Unlock()
	select {
	case <-armed:
	case <-ctx.Done():
		r.Result = ResultNoID
		r.Err = errors.New("the task id did not arrive before the cancel deadline")
		r.Latency = time.Since(start)
		return r
	}
	it.mu.Lock()
	id, fn := it.id, it.fn
	r.Owner = it.owner
	it.mu.Unlock()
	r.ID = id
	if it.kind == KindA2ATask && it.s.opts.Confirmer != nil {
		c := it.s.opts.Confirmer
		err := c.call(ctx, it.name, id, fn)
		r.Latency = time.Since(start)
		r.Result = c.classify(err)
		if r.Result == ResultFailed || r.Result == ResultPending {
			r.Err = err
		}
		return r
	}
	err := fn(ctx, r.ID)
	r.Latency = time.Since(start)
	switch {
	case err == nil, errors.Is(err, ErrAlreadyTerminal):
		r.Result = ResultCancelled
	case errors.Is(err, ErrMoved):
		r.Result = ResultMoved
	default:
		r.Result, r.Err = ResultFailed, err
	}
	return r
}

// followIfPending hands a pending A2A cancellation to the Confirmer, which calls done with
// its final report; it reports whether it did.
func (it *Item) followIfPending(r Report, start time.Time, done func(Report)) bool {
	if r.Result != ResultPending {
		return false
	}
	it.mu.Lock()
	fn := it.fn
	it.mu.Unlock()
	it.s.opts.Confirmer.follow(r, fn, start, done)
	return true
}

// Begin starts cancelling every tracked piece, in parallel, and returns at once. Every
// piece in flight at this moment is claimed before Begin returns, so a piece that finishes
// on its own right afterwards (its context was cancelled too) is still reported.
// Pieces tracked later are cancelled as well. Only the first call has an effect.
func (s *Scope) Begin(cause error) {
	s.mu.Lock()
	if s.cancelled {
		s.mu.Unlock()
		return
	}
	s.cancelled, s.cause, s.start = true, cause, time.Now()
	items := slices.Clone(s.items)
	// Counted before the lock is released: a concurrent Cancel, which sees the scope
	// cancelled only after this, must not wait while the count is still being raised.
	s.addFiring(len(items))
	s.mu.Unlock()
	for _, it := range items {
		s.fireCounted(it)
	}
}

// Cancel is Begin followed by waiting for every cancellation (bounded by the scope's
// timeout); it returns the reports. It is idempotent.
func (s *Scope) Cancel(cause error) []Report {
	s.Begin(cause)
	s.waitFiring()
	return s.Reports()
}

// addFiring counts n more cancellations in flight; s.mu is held.
func (s *Scope) addFiring(n int) {
	if n == 0 {
		return
	}
	if s.firing == 0 {
		s.idle = make(chan struct{})
	}
	s.firing += n
}

// doneFiring counts one cancellation in flight less.
func (s *Scope) doneFiring() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.firing--
	if s.firing == 0 {
		close(s.idle)
	}
}

// waitFiring waits until no cancellation is in flight.
func (s *Scope) waitFiring() {
	s.mu.Lock()
	if s.firing == 0 {
		s.mu.Unlock()
		return
	}
	idle := s.idle
	s.mu.Unlock()
	<-idle
}

// fireCounted cancels a piece already counted in firing.
func (s *Scope) fireCounted(it *Item) {
	if !it.claim() {
		s.doneFiring()
		return
	}
	go func() {
		defer s.doneFiring()
		// The scope is cancelled because the run's context is ending: each cancel gets its own.
		ctx, cancel := context.WithTimeout(context.Background(), s.opts.Timeout)
		defer cancel()
		s.mu.Lock()
		start := s.start
		s.mu.Unlock()
		r := it.cancel(ctx, start)
		s.mu.Lock()
		idx := len(s.reports)
		s.reports = append(s.reports, r)
		s.mu.Unlock()
		if it.followIfPending(r, start, func(final Report) {
			s.mu.Lock()
			s.reports[idx] = final
			s.mu.Unlock()
			if s.opts.OnReport != nil {
				s.opts.OnReport(final)
			}
		}) {
			return
		}
		if s.opts.OnReport != nil {
			s.opts.OnReport(r)
		}
	}()
}

// Cause returns why the scope was cancelled (nil if it was not).
func (s *Scope) Cause() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.cause
}

// Reports returns the cancellation reports so far.
func (s *Scope) Reports() []Report {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Report(nil), s.reports...)
}

// Len returns the number of pieces in flight.
func (s *Scope) Len() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.items)
}

// signal is a one-shot event whose channel is made only when someone waits for it: a
// piece armed and settled without a waiter (the usual case) never allocates one, and an
// open run retains none. Guarded by its Item's mu.
type signal struct {
	ch    chan struct{}
	fired bool
}

// closedChan is the channel of every signal that fired before anyone waited.
var closedChan = func() chan struct{} {
	c := make(chan struct{})
	close(c)
	return c
}()

// wait returns a channel closed once the signal fires.
func (s *signal) wait() <-chan struct{} {
	if s.ch == nil {
		if s.fired {
			return closedChan
		}
		s.ch = make(chan struct{})
	}
	return s.ch
}

// fire fires the signal; only the first call has an effect.
func (s *signal) fire() {
	if s.fired {
		return
	}
	s.fired = true
	if s.ch != nil {
		close(s.ch)
	}
}
