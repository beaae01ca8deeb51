package durable

import (
	"context"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/baton-dev/baton/agui"
	"github.com/baton-dev/baton/fence"
	"github.com/baton-dev/baton/store"
)

// TestTakeoverFencesTheFirstOwner decides a takeover without a run loop: replica a owns a
// run and stores two events; its lease lapses; replica b claims the run with a higher epoch
// and continues its log. From then on a's heartbeat does not renew the run, the store says
// a does not hold it, a's next event is refused with store.ErrFenced (a is told once, and
// nothing of it reaches the log), a's end of the run is refused too, and its lease, once
// lost, lets it start nothing. b's events follow a's densely (3, 4), and its own writes go
// through.
func TestTakeoverFencesTheFirstOwner(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st, err := store.Open(ctx, "memory:")
	require.NoError(t, err)
	t.Cleanup(func() { _ = st.Close() })
	discard := slog.New(slog.DiscardHandler)
	var wg sync.WaitGroup
	defer wg.Wait()

	// Replica a claims the run with a lease of a millisecond: it lapses at once.
	const lease = time.Millisecond
	sentA := time.Now()
	epochA, err := st.BeginRun(ctx, "t", "r", "replica-a", lease)
	require.NoError(t, err)
	ownerA := NewOwner(RunRef{ThreadID: "t", RunID: "r", Epoch: epochA}, "replica-a",
		fence.New(sentA, time.Minute, time.Second, func() {}))
	fenced := make(chan error, 2)
	logA := NewEventLog(st, "t", "r", discard, &wg, nil)
	logA.Own(epochA, nil, func(err error) { fenced <- err })
	logA.Add(&agui.RunStarted{ThreadID: "t", RunID: "r"})
	logA.Add(&agui.TextMessageStart{MessageID: "m1", Role: agui.RoleAssistant})
	require.NoError(t, logA.Flush(ctx))

	// Replica b takes it over once the lease lapsed (the store's clock decides).
	var recs []store.RunRecord
	require.Eventually(t, func() bool {
		recs, err = st.TakeOverRuns(ctx, "replica-b", time.Minute, 10, false)
		require.NoError(t, err)
		return len(recs) == 1
	}, 5*time.Second, 5*time.Millisecond)
	epochB := recs[0].Epoch
	require.Greater(t, epochB, epochA, "a takeover moves the epoch on")
	ownerB := NewOwner(RunRef{ThreadID: "t", RunID: "r", Epoch: epochB}, "replica-b", nil)

	// a's next heartbeat does not renew the run, and the store says b holds it.
	sent := time.Now()
	renewed, err := st.HeartbeatRuns(ctx, "replica-a", time.Minute)
	require.NoError(t, err)
	assert.Equal(t, NotRenewed, ownerA.Apply(NewRenewal(sent, renewed)))
	holds, err := ownerA.Holds(ctx, st)
	require.NoError(t, err)
	assert.False(t, holds, "a does not hold the run")
	holds, err = ownerB.Holds(ctx, st)
	require.NoError(t, err)
	assert.True(t, holds, "b holds the run")

	// a's writes are refused with the sentinel: a is told once, and its log is frozen.
	logA.Add(&agui.TextMessageContent{MessageID: "m1", Delta: "stale"})
	select {
	case err := <-fenced:
		require.ErrorIs(t, err, store.ErrFenced)
	case <-time.After(10 * time.Second):
		t.Fatal("the old owner's write was not refused")
	}
	logA.Add(&agui.TextMessageContent{MessageID: "m1", Delta: "still stale"})
	logA.RunEnded()
	<-logA.Done()
	assert.Empty(t, fenced, "the old owner is told once")
	require.ErrorIs(t, st.EndRun(ctx, "t", "r", epochA, "completed"), store.ErrFenced)
	ownerA.Lose()
	require.ErrorIs(t, ownerA.MayAct(ctx), ErrMoved)

	// b continues the log densely from what it finds in the store.
	stored, err := st.Events(ctx, "t", "r", 0, 100)
	require.NoError(t, err)
	require.Len(t, stored, 2, "nothing of a's after the takeover")
	var restored []agui.Event
	for _, ev := range stored {
		ae, err := agui.DecodeEvent(ev.Data)
		require.NoError(t, err)
		restored = append(restored, ae)
	}
	logB := NewEventLog(st, "t", "r", discard, &wg, nil)
	logB.Restore(Work{}, restored, stored[len(stored)-1].Seq)
	logB.Own(epochB, nil, func(err error) { t.Errorf("the new owner was fenced: %v", err) })
	logB.Add(&agui.TextMessageContent{MessageID: "m1", Delta: "fresh"})
	logB.Add(&agui.RunFinished{ThreadID: "t", RunID: "r"})
	logB.WaitEnded()
	logB.RunEnded()
	require.NoError(t, ownerB.MayAct(ctx))
	require.NoError(t, st.EndRun(ctx, "t", "r", epochB, "completed"))

	stored, err = st.Events(ctx, "t", "r", 0, 100)
	require.NoError(t, err)
	var seqs []int64
	for _, ev := range stored {
		seqs = append(seqs, ev.Seq)
		assert.NotContains(t, string(ev.Data), "stale")
	}
	assert.Equal(t, []int64{1, 2, 3, 4}, seqs, "dense ids across the takeover")
}
