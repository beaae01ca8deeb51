package coordinator

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/baton-dev/baton/agui"
	"github.com/baton-dev/baton/store"
)

// takeoverPoint names the store call inside which takeoverInside takes the runs over.
type takeoverPoint int

const (
	// atApprovalStart: just before the first approved call's start is recorded (the
	// SaveSuspension carrying it).
	atApprovalStart takeoverPoint = iota + 1
	// atSettle: inside the first settle of a resume, before it reaches the store.
	atSettle
)

// takeoverInside is a store on which another replica ("replica-other") takes every running
// run over inside one store call, before that call reaches the store: the run checked its
// ownership, then lost the run, as one paused past its lease does.
type takeoverInside struct {
	store.Store
	at takeoverPoint
	// took counts the calls (at atApprovalStart: the approved calls' starts) seen at the
	// point; the takeover happens at the first.
	took atomic.Int32
	// after is the store's answer to the call the takeover happened inside.
	after atomic.Pointer[error]
}

func (s *takeoverInside) SaveSuspension(ctx context.Context, sus *store.Suspension) error {
	first := false
	if s.at == atApprovalStart {
		for _, in := range sus.Interrupts {
			if h := decodeHandle(in).Approval; h != nil && h.State == approvalStarted && s.took.Add(1) == 1 {
				first = true
			}
		}
	}
	if !first {
		return s.Store.SaveSuspension(ctx, sus)
	}
	return s.takeOverThen(ctx, func() error { return s.Store.SaveSuspension(ctx, sus) })
}

func (s *takeoverInside) CloseSuspension(ctx context.Context, threadID, runID string, epoch int64, ids []string) error {
	if s.at != atSettle || s.took.Add(1) != 1 {
		return s.Store.CloseSuspension(ctx, threadID, runID, epoch, ids)
	}
	return s.takeOverThen(ctx, func() error { return s.Store.CloseSuspension(ctx, threadID, runID, epoch, ids) })
}

// takeOverThen has replica-other take every running run over, then makes call and keeps its
// answer.
func (s *takeoverInside) takeOverThen(ctx context.Context, call func() error) error {
	if _, err := s.Store.TakeOverRuns(ctx, "replica-other", time.Minute, 10, true); err != nil {
		return err
	}
	err := call()
	s.after.Store(&err)
	return err
}

// fencedCall asserts that the takeover happened inside exactly one call (what says which)
// and that the store refused that call to the stale owner.
func (s *takeoverInside) fencedCall(t *testing.T, what string) {
	t.Helper()
	require.EqualValues(t, 1, s.took.Load(), what)
	saved := s.after.Load()
	require.NotNil(t, saved)
	require.ErrorIs(t, *saved, store.ErrFenced, "the stale owner's call is refused")
}

// staleOwnerStops starts the resume on e, whose store takes the run over inside one of its
// calls, and awaits the run (not its stream: the stale owner's live stream ends without a
// terminal event, its client reconnecting to the new owner). The stale owner ends nothing:
// none of its events finishes or fails the run, and in st the run is still running, owned
// by replica-other.
func staleOwnerStops(t *testing.T, e *Engine, st store.Store, resume *agui.RunAgentInput) {
	t.Helper()
	r, err := e.StartRun(context.Background(), resume, "")
	require.NoError(t, err)
	select {
	case <-r.Done():
	case <-time.After(20 * time.Second):
		t.Fatal("the stale owner's run did not stop")
	}
	evs, _ := r.Stream().Next()
	for _, ev := range evs {
		_, finished := ev.(*agui.RunFinished)
		_, failed := ev.(*agui.RunError)
		assert.False(t, finished || failed, "the stale owner ends nothing: %T", ev)
	}
	rec, err := st.GetRun(context.Background(), resume.ThreadID, resume.RunID)
	require.NoError(t, err)
	assert.Equal(t, "replica-other", rec.Replica)
	assert.Equal(t, store.RunRunning, rec.State, "the run is its new owner's to end")
}
