package cancel

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

var errBusy = errors.New("agent busy")

// flaky fails the first n calls per id, then succeeds; it records the most calls in flight.
type flaky struct {
	n int

	mu       sync.Mutex
	calls    map[string]int
	inFlight atomic.Int32
	peak     atomic.Int32
	hold     time.Duration
}

func (f *flaky) cancel(ctx context.Context, id string) error {
	cur := f.inFlight.Add(1)
	defer f.inFlight.Add(-1)
	for {
		p := f.peak.Load()
		if cur <= p || f.peak.CompareAndSwap(p, cur) {
			break
		}
	}
	if f.hold > 0 {
		select {
		case <-time.After(f.hold):
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls[id]++
	if f.calls[id] <= f.n {
		return fmt.Errorf("canceling %s: %w", id, errBusy)
	}
	return nil
}

// reportsCollector gathers OnReport calls.
type reportsCollector struct {
	mu   sync.Mutex
	reps []Report
}

func (c *reportsCollector) add(r Report) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.reps = append(c.reps, r)
}

func (c *reportsCollector) results() map[string]int {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := map[string]int{}
	for _, r := range c.reps {
		out[r.Result]++
	}
	return out
}

func fastConfirmer(horizon time.Duration, perAgent int, permanent func(error) bool) *Confirmer {
	return NewConfirmer(ConfirmerConfig{Horizon: horizon, PerAgent: perAgent, Attempt: time.Second,
		Backoff: time.Millisecond, MaxBackoff: 5 * time.Millisecond, Permanent: permanent})
}

// A cancel whose first attempts fail is retried in the background until it succeeds; the
// scope reports it once, as confirmed, and Cancel returns without waiting for that.
func TestScopeFollowsFailedCancelUntilConfirmed(t *testing.T) {
	c := fastConfirmer(time.Minute, 4, nil)
	defer c.Close()
	f := &flaky{n: 3, calls: map[string]int{}}
	var col reportsCollector
	s := NewScope(Options{Timeout: time.Second, OnReport: col.add, Confirmer: c})
	s.Track(KindA2ATask, "research").Arm("t1", f.cancel)

	first := s.Cancel(errors.New("client gone"))
	require.Len(t, first, 1)
	assert.Equal(t, ResultPending, first[0].Result, "the first attempt failed: Cancel returns with the cancellation pending")
	assert.ErrorIs(t, first[0].Err, errBusy)

	require.NoError(t, c.Wait(context.Background()))
	assert.Equal(t, map[string]int{ResultConfirmed: 1}, col.results(), "reported once, with its final result")
	rep := s.Reports()
	require.Len(t, rep, 1)
	assert.Equal(t, ResultConfirmed, rep[0].Result)
	assert.NoError(t, rep[0].Err)
	assert.Equal(t, 4, f.calls["t1"])
}

// A cancel that is never confirmed is abandoned at the horizon, reported once as such.
func TestConfirmerAbandonsAtHorizon(t *testing.T) {
	c := fastConfirmer(50*time.Millisecond, 4, nil)
	defer c.Close()
	f := &flaky{n: 1 << 30, calls: map[string]int{}}
	var col reportsCollector
	s := NewScope(Options{Timeout: time.Second, OnReport: col.add, Confirmer: c})
	s.Track(KindA2ATask, "research").Arm("t1", f.cancel)
	s.Cancel(errors.New("client gone"))
	require.NoError(t, c.Wait(context.Background()))
	assert.Equal(t, map[string]int{ResultAbandoned: 1}, col.results())
	assert.Greater(t, f.calls["t1"], 1, "retried before giving up")
}

// Already terminal and permanent failures are final at once: no retry.
func TestConfirmerFinalResults(t *testing.T) {
	errAuth := errors.New("refused")
	c := fastConfirmer(time.Minute, 4, func(err error) bool { return errors.Is(err, errAuth) })
	defer c.Close()
	var col reportsCollector
	s := NewScope(Options{Timeout: time.Second, OnReport: col.add, Confirmer: c})
	var calls atomic.Int32
	s.Track(KindA2ATask, "a").Arm("done", func(context.Context, string) error {
		calls.Add(1)
		return fmt.Errorf("task over: %w", ErrAlreadyTerminal)
	})
	s.Track(KindA2ATask, "b").Arm("auth", func(context.Context, string) error {
		calls.Add(1)
		return fmt.Errorf("no: %w", errAuth)
	})
	s.Track(KindA2ATask, "c").Arm("moved", func(context.Context, string) error {
		calls.Add(1)
		return fmt.Errorf("not ours: %w", ErrMoved)
	})
	s.Track(KindMCPCall, "tool").Arm("", func(context.Context, string) error { calls.Add(1); return nil })
	s.Track(KindMCPCall, "moved-tool").Arm("", func(context.Context, string) error {
		calls.Add(1)
		return fmt.Errorf("not ours: %w", ErrMoved)
	})
	s.Cancel(errors.New("stop"))
	require.NoError(t, c.Wait(context.Background()))
	assert.Equal(t, map[string]int{ResultAlreadyTerminal: 1, ResultFailed: 1, ResultCancelled: 1, ResultMoved: 2}, col.results())
	assert.Equal(t, int32(5), calls.Load(), "one call each: a moved piece is not retried")
	for _, r := range s.Reports() {
		if r.Result == ResultMoved {
			assert.NoError(t, r.Err, "a moved piece is no failure")
		}
	}
}

// Many cancellations at once reach one agent at most PerAgent at a time, and all confirm.
func TestConfirmerPacesPerAgent(t *testing.T) {
	const n, per = 200, 8
	c := fastConfirmer(time.Minute, per, nil)
	defer c.Close()
	f := &flaky{n: 1, calls: map[string]int{}, hold: time.Millisecond}
	var col reportsCollector
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			s := NewScope(Options{Timeout: 10 * time.Second, OnReport: col.add, Confirmer: c})
			s.Track(KindA2ATask, "research").Arm(fmt.Sprintf("t%d", i), f.cancel)
			s.Cancel(errors.New("mass disconnect"))
		}()
	}
	wg.Wait()
	require.NoError(t, c.Wait(context.Background()))
	assert.Equal(t, map[string]int{ResultConfirmed: n}, col.results())
	assert.LessOrEqual(t, f.peak.Load(), int32(per), "calls in flight at the agent")
}

// Close abandons what is still followed and ends its goroutines.
func TestConfirmerCloseAbandons(t *testing.T) {
	c := NewConfirmer(ConfirmerConfig{Horizon: time.Hour, Backoff: time.Hour, MaxBackoff: time.Hour})
	var col reportsCollector
	s := NewScope(Options{Timeout: time.Second, OnReport: col.add, Confirmer: c})
	s.Track(KindA2ATask, "research").Arm("t1", func(context.Context, string) error { return errBusy })
	s.Cancel(errors.New("stop"))
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	assert.ErrorIs(t, c.Wait(ctx), context.Canceled, "still following")
	c.Close()
	assert.Equal(t, map[string]int{ResultAbandoned: 1}, col.results())
}

// A wait the agent asks for (Retry-After) is honoured: asked for more than the horizon, the
// follow-up makes no second call and abandons at the horizon.
func TestConfirmerHonoursRetryAfter(t *testing.T) {
	c := NewConfirmer(ConfirmerConfig{Horizon: 50 * time.Millisecond, Backoff: time.Millisecond, MaxBackoff: time.Millisecond,
		RetryAfter: func(err error) time.Duration {
			if errors.Is(err, errBusy) {
				return time.Hour
			}
			return 0
		}})
	defer c.Close()
	f := &flaky{n: 1 << 30, calls: map[string]int{}}
	var col reportsCollector
	s := NewScope(Options{Timeout: time.Second, OnReport: col.add, Confirmer: c})
	s.Track(KindA2ATask, "research").Arm("t1", f.cancel)
	s.Cancel(errors.New("client gone"))
	require.NoError(t, c.Wait(context.Background()))
	assert.Equal(t, map[string]int{ResultAbandoned: 1}, col.results())
	assert.Equal(t, 1, f.calls["t1"], "no call before the wait the agent asked for")
}

// records is an OnFollow/OnSettle pair that keeps the pending set, as a store would, and
// the owner each cancellation was recorded with.
type records struct {
	mu      sync.Mutex
	pending map[string]time.Time
	owners  map[string]string
	settled int
}

func newRecords() *records {
	return &records{pending: map[string]time.Time{}, owners: map[string]string{}}
}

func (r *records) follow(name, id, owner string, since time.Time) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.pending[name+"/"+id] = since
	r.owners[name+"/"+id] = owner
}

func (r *records) owner(key string) string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.owners[key]
}

func (r *records) settle(name, id string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	delete(r.pending, name+"/"+id)
	r.settled++
}

func (r *records) snapshot() (map[string]time.Time, int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := map[string]time.Time{}
	for k, v := range r.pending {
		out[k] = v
	}
	return out, r.settled
}

// Cancel outside a scope (a parked task) confirms at once when it can, follows otherwise,
// and records a followed cancellation until it is settled.
func TestConfirmerCancelOutsideScope(t *testing.T) {
	rec := newRecords()
	c := NewConfirmer(ConfirmerConfig{Horizon: time.Minute, Attempt: time.Second, Backoff: time.Millisecond, MaxBackoff: 5 * time.Millisecond,
		OnFollow: rec.follow, OnSettle: rec.settle})
	defer c.Close()

	var col reportsCollector
	ok := c.Cancel(context.Background(), "research", "t-ok", "p-alice", func(context.Context, string) error { return nil }, col.add)
	assert.Equal(t, ResultConfirmed, ok.Result)
	pending, settled := rec.snapshot()
	assert.Empty(t, pending, "a confirmed cancel is never recorded")
	assert.Zero(t, settled)

	f := &flaky{n: 3, calls: map[string]int{}}
	first := c.Cancel(context.Background(), "research", "t-slow", "p-alice", f.cancel, col.add)
	assert.Equal(t, ResultPending, first.Result)
	assert.Equal(t, "p-alice", first.Owner)
	require.NoError(t, c.Wait(context.Background()))
	assert.Equal(t, "p-alice", rec.owner("research/t-slow"), "recorded with its owner")
	assert.Equal(t, map[string]int{ResultConfirmed: 2}, col.results(), "done gets each final result once")
	pending, settled = rec.snapshot()
	assert.Empty(t, pending)
	assert.Equal(t, 1, settled, "recorded while followed, then forgotten")

	// A nil Confirmer makes one attempt and reports it.
	var nilC *Confirmer
	rep := nilC.Cancel(context.Background(), "research", "t-nil", "", func(context.Context, string) error { return errBusy }, nil)
	assert.Equal(t, ResultFailed, rep.Result)
	assert.ErrorIs(t, rep.Err, errBusy)
}

// A cancellation abandoned because the Confirmer closes stays recorded (the next start
// continues it); Resume continues it with its original start, so the horizon is not
// extended, and settles it.
func TestConfirmerResumeAfterClose(t *testing.T) {
	rec := newRecords()
	c := NewConfirmer(ConfirmerConfig{Horizon: time.Hour, Backoff: time.Hour, MaxBackoff: time.Hour, OnFollow: rec.follow, OnSettle: rec.settle})
	first := c.Cancel(context.Background(), "research", "t1", "p-alice", func(context.Context, string) error { return errBusy }, nil)
	require.Equal(t, ResultPending, first.Result)
	p, _ := rec.snapshot()
	require.Len(t, p, 1, "recorded before Cancel returns")
	c.Close()
	pending, settled := rec.snapshot()
	require.Len(t, pending, 1, "still recorded after the close")
	assert.Zero(t, settled)
	since := pending["research/t1"]
	require.Equal(t, "p-alice", rec.owner("research/t1"))

	// The next process: the agent now cancels.
	c2 := NewConfirmer(ConfirmerConfig{Horizon: time.Hour, Backoff: time.Millisecond, MaxBackoff: time.Millisecond, OnFollow: rec.follow, OnSettle: rec.settle})
	defer c2.Close()
	var col reportsCollector
	c2.Resume("research", "t1", "p-alice", func(context.Context, string) error { return nil }, since, col.add)
	require.NoError(t, c2.Wait(context.Background()))
	assert.Equal(t, map[string]int{ResultConfirmed: 1}, col.results())
	assert.Equal(t, "p-alice", rec.owner("research/t1"), "re-recorded with the same owner")
	pending, _ = rec.snapshot()
	assert.Empty(t, pending)

	// A cancel whose horizon passed while the process was down is abandoned at once.
	var late reportsCollector
	var calls atomic.Int32
	c2.Resume("research", "t2", "", func(context.Context, string) error { calls.Add(1); return nil }, time.Now().Add(-2*time.Hour), late.add)
	require.NoError(t, c2.Wait(context.Background()))
	assert.Equal(t, map[string]int{ResultAbandoned: 1}, late.results())
	assert.Zero(t, calls.Load())
}

// A run's task armed with its owner is recorded with that owner when it is followed, and
// the final report carries it; a piece armed without one has the empty owner.
func TestConfirmerRecordsOwner(t *testing.T) {
	rec := newRecords()
	c := NewConfirmer(ConfirmerConfig{Horizon: time.Minute, Attempt: time.Second, Backoff: time.Millisecond, MaxBackoff: 5 * time.Millisecond,
		OnFollow: rec.follow, OnSettle: rec.settle})
	defer c.Close()
	f := &flaky{n: 2, calls: map[string]int{}}
	var col reportsCollector
	s := NewScope(Options{Timeout: time.Second, OnReport: col.add, Confirmer: c})
	s.Track(KindA2ATask, "research").ArmFor("p-alice", "t1", f.cancel)
	s.Track(KindA2ATask, "research").Arm("t2", f.cancel)
	for _, r := range s.Cancel(errors.New("client gone")) {
		assert.Equal(t, ResultPending, r.Result)
	}
	require.NoError(t, c.Wait(context.Background()))
	assert.Equal(t, map[string]int{ResultConfirmed: 2}, col.results())
	assert.Equal(t, "p-alice", rec.owner("research/t1"))
	assert.Equal(t, "", rec.owner("research/t2"))
	_, settled := rec.snapshot()
	assert.Equal(t, 2, settled)
	col.mu.Lock()
	defer col.mu.Unlock()
	for _, r := range col.reps {
		want := map[string]string{"t1": "p-alice", "t2": ""}[r.ID]
		assert.Equal(t, want, r.Owner, "final report of %s", r.ID)
	}
}

// A followed cancellation's final result is reported before its record is forgotten: a
// reader of the records and the reports (another replica) never finds it in neither.
func TestConfirmerReportsBeforeForgetting(t *testing.T) {
	rec := newRecords()
	c := NewConfirmer(ConfirmerConfig{Horizon: time.Minute, Attempt: time.Second, Backoff: time.Millisecond, MaxBackoff: 5 * time.Millisecond,
		OnFollow: rec.follow, OnSettle: rec.settle})
	defer c.Close()
	var recorded atomic.Bool
	f := &flaky{n: 2, calls: map[string]int{}}
	first := c.Cancel(context.Background(), "research", "t1", "", f.cancel, func(Report) {
		pending, _ := rec.snapshot()
		_, ok := pending["research/t1"]
		recorded.Store(ok)
	})
	require.Equal(t, ResultPending, first.Result)
	require.NoError(t, c.Wait(context.Background()))
	assert.True(t, recorded.Load(), "still recorded when its final result was reported")
	pending, settled := rec.snapshot()
	assert.Empty(t, pending)
	assert.Equal(t, 1, settled)
}

// A stopping run's scope returns from Cancel only once every cancel it hands to the
// Confirmer is recorded: the run's end, written after that, never precedes the record that
// tells another replica the cancel is still being followed.
func TestScopeCancelRecordsBeforeReturning(t *testing.T) {
	rec := newRecords()
	c := NewConfirmer(ConfirmerConfig{Horizon: time.Hour, Backoff: time.Hour, MaxBackoff: time.Hour, OnFollow: rec.follow, OnSettle: rec.settle})
	defer c.Close()
	s := NewScope(Options{Timeout: time.Second, Confirmer: c})
	for _, id := range []string{"t1", "t2"} {
		s.Track(KindA2ATask, "research").Arm(id, func(context.Context, string) error { return errBusy })
	}
	reports := s.Cancel(errors.New("stop requested"))
	require.Len(t, reports, 2)
	for _, r := range reports {
		assert.Equal(t, ResultPending, r.Result)
	}
	pending, _ := rec.snapshot()
	assert.Len(t, pending, 2, "both followed cancels recorded when Cancel returns")
}
