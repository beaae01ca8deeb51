package cancel

import (
	"context"
	"errors"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/baton-dev/baton/internal/testutil"
)

func TestMain(m *testing.M) { testutil.VerifyTestMain(m) }

type recorder struct {
	mu  sync.Mutex
	ids []string
}

func (r *recorder) fn(err error) Func {
	return func(_ context.Context, id string) error {
		r.mu.Lock()
		defer r.mu.Unlock()
		r.ids = append(r.ids, id)
		return err
	}
}

func (r *recorder) got() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.ids...)
}

func TestScopeCancel(t *testing.T) {
	boom := errors.New("boom")
	tests := []struct {
		name       string
		setup      func(s *Scope, rec *recorder) (after func())
		wantIDs    []string
		wantResult []string
	}{
		{
			name: "armed task is cancelled",
			setup: func(s *Scope, rec *recorder) func() {
				s.Track(KindA2ATask, "research").Arm("t1", rec.fn(nil))
				return nil
			},
			wantIDs: []string{"t1"}, wantResult: []string{ResultCancelled},
		},
		{
			name: "cancel held until the id arrives",
			setup: func(s *Scope, rec *recorder) func() {
				it := s.Track(KindA2ATask, "research")
				return func() { it.Arm("late", rec.fn(nil)) }
			},
			wantIDs: []string{"late"}, wantResult: []string{ResultCancelled},
		},
		{
			name: "id never arrives",
			setup: func(s *Scope, rec *recorder) func() {
				s.Track(KindA2ATask, "research")
				return nil
			},
			wantIDs: nil, wantResult: []string{ResultNoID},
		},
		{
			name: "released piece is not cancelled",
			setup: func(s *Scope, rec *recorder) func() {
				it := s.Track(KindA2ATask, "research")
				it.Arm("done", rec.fn(nil))
				it.Release()
				return nil
			},
			wantIDs: nil, wantResult: nil,
		},
		{
			name: "downstream error is reported",
			setup: func(s *Scope, rec *recorder) func() {
				s.Track(KindMCPCall, "demo__count").Arm("", rec.fn(boom))
				return nil
			},
			wantIDs: []string{""}, wantResult: []string{ResultFailed},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var reported []Report
			var mu sync.Mutex
			s := NewScope(Options{Timeout: 300 * time.Millisecond, OnReport: func(r Report) { mu.Lock(); reported = append(reported, r); mu.Unlock() }})
			rec := &recorder{}
			after := tt.setup(s, rec)
			if after != nil {
				time.AfterFunc(20*time.Millisecond, after)
			}
			reports := s.Cancel(context.Canceled)
			assert.Equal(t, tt.wantIDs, rec.got())
			var results []string
			for _, r := range reports {
				results = append(results, r.Result)
			}
			assert.Equal(t, tt.wantResult, results)
			assert.Len(t, reported, len(tt.wantResult))
			assert.Equal(t, context.Canceled, s.Cause())
		})
	}
}

func TestScopeCancelsInParallel(t *testing.T) {
	s := NewScope(Options{Timeout: 5 * time.Second})
	var started sync.WaitGroup
	started.Add(3)
	all := make(chan struct{})
	go func() { started.Wait(); close(all) }()
	for _, id := range []string{"a", "b", "c"} {
		s.Track(KindA2ATask, "x").Arm(id, func(ctx context.Context, _ string) error {
			started.Done()
			select { // each cancel waits until all three are running: only parallel cancels finish
			case <-all:
				return nil
			case <-ctx.Done():
				return ctx.Err()
			}
		})
	}
	for _, r := range s.Cancel(nil) {
		assert.Equal(t, ResultCancelled, r.Result)
	}
}

func TestTrackAfterCancel(t *testing.T) {
	s := NewScope(Options{Timeout: time.Second})
	require.Empty(t, s.Cancel(errors.New("stop")))
	rec := &recorder{}
	it := s.Track(KindA2ATask, "late-agent")
	it.Arm("t9", rec.fn(nil))
	<-it.Done()
	assert.Equal(t, []string{"t9"}, rec.got())
	assert.Len(t, s.Cancel(nil), 1, "Cancel is idempotent and includes late pieces")
}

func TestCancelNowAndRelease(t *testing.T) {
	s := NewScope(Options{Timeout: time.Second})
	rec := &recorder{}
	it := s.Track(KindA2ATask, "a")
	it.Arm("t1", rec.fn(nil))
	r := it.CancelNow()
	assert.Equal(t, ResultCancelled, r.Result)
	assert.Equal(t, "t1", r.ID)
	it.Release()
	<-it.Done()
	assert.Empty(t, s.Cancel(nil), "a piece cancelled on its own is not cancelled again")
	assert.Equal(t, []string{"t1"}, rec.got())
	assert.Zero(t, s.Len())
}

// A piece tracked while the scope's cancellation is being waited for (a sub-task whose id
// arrives as the run stops) is cancelled too, and races nothing: with a sync.WaitGroup
// counting the cancellations, Track's Add from zero met Cancel's Wait as it returned (a
// data race, and "WaitGroup is reused before previous Wait has returned").
func TestTrackRacingCancel(t *testing.T) {
	for range 2000 {
		s := NewScope(Options{Timeout: time.Second})
		var cancelled atomic.Int32
		fn := func(context.Context, string) error { cancelled.Add(1); return nil }
		// One piece in flight, whose cancel ends as the late one is tracked.
		s.Track(KindA2ATask, "agent").Arm("first", fn)
		done := make(chan struct{})
		go func() {
			defer close(done)
			for cancelled.Load() == 0 {
				runtime.Gosched()
			}
			s.Track(KindA2ATask, "agent").Arm("late", fn)
		}()
		s.Cancel(errors.New("stopped"))
		<-done
		s.Cancel(errors.New("stopped"))
		require.Eventually(t, func() bool { return cancelled.Load() == 2 }, 5*time.Second, time.Millisecond,
			"the late piece is cancelled once")
	}
}
