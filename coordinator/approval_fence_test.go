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

// takeoverBeforeApproval is a store on which another replica takes every running run over
// just before the first approved call's start is recorded: the resumed run's owner is
// stale from then on, as one paused past its lease is.
type takeoverBeforeApproval struct {
	store.Store
	took atomic.Int32
	// after is the store's answer to that record, the first save after the takeover.
	after atomic.Pointer[error]
}

func (s *takeoverBeforeApproval) SaveSuspension(ctx context.Context, sus *store.Suspension) error {
	took := false
	for _, in := range sus.Interrupts {
		if h := decodeHandle(in).Approval; h != nil && h.State == approvalStarted && s.took.Add(1) == 1 {
			if _, err := s.Store.TakeOverRuns(ctx, "replica-other", time.Minute, 10, true); err != nil {
				return err
			}
			took = true
		}
	}
	err := s.Store.SaveSuspension(ctx, sus)
	if took {
		s.after.Store(&err)
	}
	return err
}

// TestApprovalFencedAfterTakeover: a resumed run that another replica took over before it
// recorded its approved call's start has that record refused, sends nothing, and stops
// here without ending the run (its new owner does).
func TestApprovalFencedAfterTakeover(t *testing.T) {
	ctx := context.Background()
	st, err := store.Open(ctx, "memory:")
	require.NoError(t, err)
	tools := approvalTools()
	fst := &takeoverBeforeApproval{Store: st}
	e := approvalEngine(t, &fakeModel{turn: callThenReport("demo__delete_release", `{"release":"v1"}`)}, tools, fst, nil)

	in := interruptsOf(t, startAndCollect(t, e, input("fa")))[0]
	// The stale owner's live stream ends without a terminal event (its client reconnects
	// to the new owner): the run is awaited, not its stream.
	r, err := e.Start(resumeInput("fa", "r2", resolved(in.ID, `{"approved":true}`)), "")
	require.NoError(t, err)
	select {
	case <-r.Done():
	case <-time.After(20 * time.Second):
		t.Fatal("the stale owner's run did not stop")
	}
	evs, _ := r.Next()
	require.EqualValues(t, 1, fst.took.Load(), "the approved call's start was to be recorded")

	saved := fst.after.Load()
	require.NotNil(t, saved)
	require.ErrorIs(t, *saved, store.ErrFenced, "the stale owner's approval record is refused")
	assert.Empty(t, tools.recorded(), "the stale owner sends no approved call")
	for _, ev := range evs {
		_, finished := ev.(*agui.RunFinished)
		_, failed := ev.(*agui.RunError)
		assert.False(t, finished || failed, "the stale owner ends nothing: %T", ev)
	}
	rec, err := st.GetRun(ctx, "fa", "r2")
	require.NoError(t, err)
	assert.Equal(t, "replica-other", rec.Replica)
	assert.Equal(t, store.RunRunning, rec.State, "the run is its new owner's to end")
	// The new owner resumes from the suspension: the stale owner must not settle it.
	susp, err := st.LoadSuspension(ctx, "fa")
	require.NoError(t, err, "the suspension the new owner resumes from is kept")
	require.NotNil(t, susp)
	assert.Len(t, susp.Interrupts, 1)
}
