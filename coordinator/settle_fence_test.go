package coordinator

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/baton-dev/baton/store"
)

// TestSettleFencedAfterTakeover: a resumed run taken over between its ownership check and
// the settle of its resume has the settle refused, keeps the suspension its new owner
// resumes from (with the approved call's outcome recorded, so it is not sent again), marks
// nothing resolved and stops here without ending the run.
func TestSettleFencedAfterTakeover(t *testing.T) {
	ctx := context.Background()
	st, err := store.Open(ctx, "memory:")
	require.NoError(t, err)
	tools := approvalTools()
	fst := &takeoverInside{Store: st, at: atSettle}
	e := approvalEngine(t, &fakeModel{turn: callThenReport("demo__delete_release", `{"release":"v1"}`)}, tools, fst, nil)

	in := interruptsOf(t, startAndCollect(t, e, input("fs")))[0]
	staleOwnerStops(t, e, st, resumeInput("fs", "r2", resolved(in.ID, `{"approved":true}`)))
	fst.fencedCall(t, "the resume was to be settled once")

	susp, err := st.LoadSuspension(ctx, "fs")
	require.NoError(t, err, "the suspension the new owner resumes from is kept")
	require.Len(t, susp.Interrupts, 1)
	h := decodeHandle(susp.Interrupts[0]).Approval
	require.NotNil(t, h)
	assert.Equal(t, approvalDone, h.State, "the approved call's outcome is recorded for the new owner")
	done, err := st.IsResolved(ctx, "fs", in.ID)
	require.NoError(t, err)
	assert.False(t, done, "the stale owner marks nothing resolved")
	assert.Len(t, tools.recorded(), 1, "the approved call was sent once, before the takeover")
}

// TestRecoveredApprovalsSettleFenced: a run recovering approvals whose outcomes were all
// recorded, taken over before it settles them, has the settle refused: the suspension its
// new owner recovers from is kept, nothing is marked resolved, nothing is sent, and the run
// stops here without ending.
func TestRecoveredApprovalsSettleFenced(t *testing.T) {
	ctx := context.Background()
	st, err := store.Open(ctx, "memory:")
	require.NoError(t, err)
	tools := approvalTools()
	model := &fakeModel{turn: callThenReport("demo__delete_release", `{"release":"v1"}`)}
	e := approvalEngine(t, model, tools, st, nil)
	interruptsOf(t, startAndCollect(t, e, input("fr")))
	// The outcome was recorded by a coordinator that stopped before it settled the resume.
	s, err := st.LoadSuspension(ctx, "fr")
	require.NoError(t, err)
	h := decodeHandle(s.Interrupts[0])
	h.Approval.State, h.Approval.Result = approvalDone, "[OK]\nit ran"
	s.Interrupts[0].Handle = mustJSON(h)
	require.NoError(t, st.SaveSuspension(ctx, s))

	model.mu.Lock()
	before := model.calls
	model.mu.Unlock()
	fst := &takeoverInside{Store: st, at: atSettle}
	e2 := approvalEngine(t, model, tools, fst, nil)
	staleOwnerStops(t, e2, st, resumeInput("fr", "r2", resolved(s.Interrupts[0].ID, `{"approved":true}`)))
	fst.fencedCall(t, "the recovered approvals were to be settled once")
	assert.Empty(t, tools.recorded(), "the recorded outcome is not sent again")
	model.mu.Lock()
	assert.Equal(t, before, model.calls, "the stale owner asks the model nothing")
	model.mu.Unlock()
	_, err = st.LoadSuspension(ctx, "fr")
	require.NoError(t, err, "the suspension the new owner recovers from is kept")
	done, err := st.IsResolved(ctx, "fr", s.Interrupts[0].ID)
	require.NoError(t, err)
	assert.False(t, done, "the stale owner marks nothing resolved")
}
