package coordinator

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/baton-dev/baton/store"
)

// TestApprovalFencedAfterTakeover: a resumed run that another replica took over before it
// recorded its approved call's start has that record refused, sends nothing, and stops
// here without ending the run (its new owner does).
func TestApprovalFencedAfterTakeover(t *testing.T) {
	ctx := context.Background()
	st, err := store.Open(ctx, "memory:")
	require.NoError(t, err)
	tools := approvalTools()
	fst := &takeoverInside{Store: st, at: atApprovalStart}
	e := approvalEngine(t, &fakeModel{turn: callThenReport("demo__delete_release", `{"release":"v1"}`)}, tools, fst, nil)

	in := interruptsOf(t, startAndCollect(t, e, input("fa")))[0]
	staleOwnerStops(t, e, st, resumeInput("fa", "r2", resolved(in.ID, `{"approved":true}`)))
	fst.fencedCall(t, "the approved call's start was to be recorded")
	assert.Empty(t, tools.recorded(), "the stale owner sends no approved call")
	// The new owner resumes from the suspension: the stale owner must not settle it.
	susp, err := st.LoadSuspension(ctx, "fa")
	require.NoError(t, err, "the suspension the new owner resumes from is kept")
	require.NotNil(t, susp)
	assert.Len(t, susp.Interrupts, 1)
}
