package durable

import (
	"context"
	"log/slog"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/baton-dev/baton/store"
)

// TestJournalFencedAfterTakeover: replica a records two steps of its run, ends one and is
// stopped before it ends the other; replica b takes the run over (a higher epoch). b's
// takeover reports a's unfinished step in doubt and leaves the finished one alone; from then
// on every journal write of a under its old epoch is refused with store.ErrFenced (a new
// intent, the outcome of its unfinished step, a mark of its own), and changes nothing.
func TestJournalFencedAfterTakeover(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st, err := store.Open(ctx, "memory:")
	require.NoError(t, err)
	t.Cleanup(func() { _ = st.Close() })
	log := slog.New(slog.DiscardHandler)
	a, b := NewJournal(st, "replica-a", log), NewJournal(st, "replica-b", log)

	epochA, err := st.BeginRun(ctx, "t", "r", "replica-a", time.Minute)
	require.NoError(t, err)
	runA := RunRef{ThreadID: "t", RunID: "r", Epoch: epochA}
	read, err := a.Intent(runA, StepIntent{Kind: store.StepToolCall, Target: "fs__read", Ref: "c-read", Attempt: 1})
	require.NoError(t, err)
	require.True(t, read.Recorded())
	read.End(store.StepEnd{Outcome: store.StepOK})
	charge, err := a.Intent(runA, StepIntent{Kind: store.StepToolCall, Target: "pay__charge", Ref: "c-charge", Attempt: 1})
	require.NoError(t, err)

	recs, err := st.TakeOverRuns(ctx, "replica-b", time.Minute, 10, true)
	require.NoError(t, err)
	require.Len(t, recs, 1)
	require.Greater(t, recs[0].Epoch, epochA, "a takeover moves the epoch on")
	runB := RunRef{ThreadID: "t", RunID: "r", Epoch: recs[0].Epoch}
	require.NoError(t, b.MarkInDoubtAfterTakeover(ctx, runB))

	_, err = a.Intent(runA, StepIntent{Kind: store.StepToolCall, Target: "pay__charge", Ref: "c-again", Attempt: 1})
	require.ErrorIs(t, err, store.ErrFenced, "the old owner cannot record a new step")
	charge.End(store.StepEnd{Outcome: store.StepOK}) // refused: logged, not recorded
	require.ErrorIs(t, a.MarkInDoubtAfterTakeover(ctx, runA), store.ErrFenced)

	steps, err := st.Steps(ctx, "t", 0, 0)
	require.NoError(t, err)
	byRef := map[string]store.Step{}
	for _, s := range steps {
		byRef[s.Ref] = s
	}
	require.Len(t, steps, 2, "nothing of the old owner's after the takeover: %+v", steps)
	assert.Equal(t, store.StepOK, byRef["c-read"].Outcome)
	assert.False(t, byRef["c-read"].InDoubt, "a finished step is not in doubt")
	assert.Equal(t, store.StepInDoubt, byRef["c-charge"].Outcome, "the old owner's late outcome is refused")
	assert.True(t, byRef["c-charge"].InDoubt)
	assert.Equal(t, "replica-a", byRef["c-charge"].Replica)
}

// A step whose intent could not be recorded records nothing when it ends, and a step with
// no before and after is recorded once with its outcome (StepOK when none is given), even
// under epoch 0 (a step of no owner).
func TestJournalRecord(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st, err := store.Open(ctx, "memory:")
	require.NoError(t, err)
	t.Cleanup(func() { _ = st.Close() })
	j := NewJournal(st, "replica-a", slog.New(slog.DiscardHandler))
	_, err = st.BeginRun(ctx, "t", "r", "replica-a", time.Minute)
	require.NoError(t, err)

	var none Step
	assert.False(t, none.Recorded())
	none.End(store.StepEnd{Outcome: store.StepError})
	j.Record(RunRef{ThreadID: "t", RunID: "r"}, store.StepTakeover, "replica-a", "", store.StepEnd{Detail: "taken over"})
	steps, err := st.Steps(ctx, "t", 0, 0)
	require.NoError(t, err)
	require.Len(t, steps, 1)
	assert.Equal(t, store.StepTakeover, steps[0].Kind)
	assert.Equal(t, store.StepOK, steps[0].Outcome)
	assert.Equal(t, "replica-a", steps[0].Replica)
}
