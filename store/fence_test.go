package store

import (
	"context"
	"encoding/json"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestFencedWrites: once another replica took a run over, every write of the old owner
// (events, work document, suspension, end) is refused with ErrFenced and changes nothing;
// the new owner's writes, under the new epoch, land.
func TestFencedWrites(t *testing.T) {
	ctx := context.Background()
	ev := func(seq int64) []Event {
		return []Event{{Seq: seq, Data: json.RawMessage(`{"type":"CUSTOM"}`)}}
	}
	forEachBackend(t, func(t *testing.T, s Store) {
		old, err := s.BeginRun(ctx, "t1", "r1", "rep-a", -time.Second)
		require.NoError(t, err)
		require.Equal(t, int64(1), old)
		require.NoError(t, s.AppendEvents(ctx, "t1", "r1", old, ev(1)))

		cur := takeOverOne(t, s, "rep-b", time.Minute).Epoch
		require.Equal(t, old+1, cur, "a takeover moves the epoch on")

		// The stale owner: nothing it writes lands.
		require.ErrorIs(t, s.AppendEvents(ctx, "t1", "r1", old, ev(2)), ErrFenced)
		require.ErrorIs(t, s.SaveRunWork(ctx, "t1", "r1", old, json.RawMessage(`{"stale":true}`)), ErrFenced)
		sus := sampleSuspension("t1")
		sus.RunID, sus.Epoch = "r1", old
		require.ErrorIs(t, s.SaveSuspension(ctx, sus), ErrFenced)
		require.ErrorIs(t, s.EndRun(ctx, "t1", "r1", old, "completed"), ErrFenced)
		renewed, err := s.HeartbeatRuns(ctx, "rep-a", time.Minute)
		require.NoError(t, err)
		assert.Empty(t, renewed, "the stale owner's heartbeat renews nothing")

		rec, err := s.GetRun(ctx, "t1", "r1")
		require.NoError(t, err)
		assert.Equal(t, RunRunning, rec.State, "the stale owner did not end the run")
		assert.NotContains(t, string(rec.Work), "stale")
		_, err = s.LoadSuspension(ctx, "t1")
		require.ErrorIs(t, err, ErrNotFound)

		// The new owner goes on under its epoch, with the log's next number.
		require.NoError(t, s.AppendEvents(ctx, "t1", "r1", cur, ev(2)))
		sus.Epoch = cur
		require.NoError(t, s.SaveSuspension(ctx, sus))
		require.NoError(t, s.EndRun(ctx, "t1", "r1", cur, "completed"))
		evs, err := s.Events(ctx, "t1", "r1", 0, 0)
		require.NoError(t, err)
		require.Len(t, evs, 2)
		assert.Equal(t, []int64{1, 2}, []int64{evs[0].Seq, evs[1].Seq})

		// An ended run is taken over by nobody: its end holds.
		none, err := s.TakeOverRuns(ctx, "rep-c", time.Minute, 10, true)
		require.NoError(t, err)
		assert.Empty(t, none)
	})
}

// TestFencedWriteRacingTakeover: the old owner's guarded write is executed but not
// committed when another replica tries to take the run over. The takeover must not
// commit before that write does (a plain EXISTS guard would let it, and the stale row
// would land after the takeover): on PostgreSQL the guard share-locks the run's row, so
// the takeover's SKIP LOCKED passes the run by; on SQLite the writer's transaction holds
// the database. Once the write has committed the takeover goes through, and the old
// owner's next write is refused.
func TestFencedWriteRacingTakeover(t *testing.T) {
	ctx := context.Background()
	forEachShared(t, func(t *testing.T, hs [2]Store) {
		a, b := hs[0].(*sqlStore), hs[1]
		epoch, err := a.BeginRun(ctx, "t1", "r1", "rep-a", -time.Second)
		require.NoError(t, err)

		takeOverDuringGuard(t, a, b, "guarded write", func(ctx context.Context) error {
			return a.AppendEvents(ctx, "t1", "r1", epoch, []Event{{Seq: 1, Data: json.RawMessage(`{}`)}})
		})
		evs, err := b.Events(ctx, "t1", "r1", 0, 0)
		require.NoError(t, err)
		assert.Len(t, evs, 1, "the owner's write committed before the takeover")
		require.ErrorIs(t, a.AppendEvents(ctx, "t1", "r1", epoch, []Event{{Seq: 2, Data: json.RawMessage(`{}`)}}), ErrFenced)
	})
}

// TestFencedJournal: once another replica took a run over, the old owner can neither record
// a step of the run nor the outcome of one it began (ErrFenced, nothing changes); the new
// owner, under the new epoch, can. A step recorded without an epoch is not fenced.
func TestFencedJournal(t *testing.T) {
	ctx := context.Background()
	forEachBackend(t, func(t *testing.T, s Store) {
		old, err := s.BeginRun(ctx, "tj", "r1", "rep-a", -time.Second)
		require.NoError(t, err)
		begun := &Step{ThreadID: "tj", RunID: "r1", Kind: StepToolCall, Target: "pay__charge", Ref: "c1", Replica: "rep-a", Epoch: old}
		require.NoError(t, s.RecordStep(ctx, begun))

		cur := takeOverOne(t, s, "rep-b", time.Minute).Epoch

		stale := &Step{ThreadID: "tj", RunID: "r1", Kind: StepToolCall, Target: "pay__charge", Ref: "c2", Replica: "rep-a", Epoch: old}
		require.ErrorIs(t, s.RecordStep(ctx, stale), ErrFenced)
		require.ErrorIs(t, s.EndStep(ctx, "tj", begun.Seq, StepEnd{Outcome: StepOK, Epoch: old}), ErrFenced)
		none := &Step{ThreadID: "tj", RunID: "nope", Kind: StepToolCall, Replica: "rep-a", Epoch: 1}
		require.ErrorIs(t, s.RecordStep(ctx, none), ErrFenced, "a run that does not exist has no owner to write for")
		steps, err := s.Steps(ctx, "tj", 0, 0)
		require.NoError(t, err)
		require.Len(t, steps, 1, "the stale owner's step was not recorded")
		assert.Equal(t, StepPending, steps[0].Outcome, "the stale owner's outcome was not recorded")

		// The new owner records under its epoch; an unfenced step is recorded too.
		require.NoError(t, s.EndStep(ctx, "tj", begun.Seq, StepEnd{Outcome: StepInDoubt, Epoch: cur}))
		require.NoError(t, s.RecordStep(ctx, &Step{ThreadID: "tj", RunID: "r1", Kind: StepTakeover, Outcome: StepOK, Replica: "rep-b", Epoch: cur}))
		require.NoError(t, s.RecordStep(ctx, &Step{ThreadID: "tj", RunID: "r1", Kind: StepCancel, Outcome: StepOK, Replica: "rep-b"}))
		steps, err = s.Steps(ctx, "tj", 0, 0)
		require.NoError(t, err)
		require.Len(t, steps, 3)
		assert.Equal(t, StepInDoubt, steps[0].Outcome)
	})
}

// TestFencedMarkInDoubt: a replica that took a run over marks its previous owner's pending
// steps in doubt under its epoch; once a third replica took the run over from it, that
// stale replica's mark is refused with ErrFenced and marks nothing, and the current
// owner's mark lands. Epoch 0 marks unconditionally.
func TestFencedMarkInDoubt(t *testing.T) {
	ctx := context.Background()
	forEachBackend(t, func(t *testing.T, s Store) {
		_, err := s.BeginRun(ctx, "tm", "r1", "rep-a", -time.Second)
		require.NoError(t, err)
		one := &Step{ThreadID: "tm", RunID: "r1", Kind: StepToolCall, Target: "pay__charge", Ref: "c1", Replica: "rep-a"}
		two := &Step{ThreadID: "tm", RunID: "r1", Kind: StepToolCall, Target: "pay__charge", Ref: "c2", Replica: "rep-a"}
		require.NoError(t, s.RecordStep(ctx, one))
		require.NoError(t, s.RecordStep(ctx, two))

		// rep-b takes the run over, and then (paused past its lease) rep-c does.
		stale := takeOverOne(t, s, "rep-b", -time.Second).Epoch
		cur := takeOverOne(t, s, "rep-c", time.Minute).Epoch
		require.Greater(t, cur, stale)

		n, err := s.MarkInDoubt(ctx, "tm", "r1", stale, []int64{one.Seq, two.Seq}, "stale owner")
		require.ErrorIs(t, err, ErrFenced)
		assert.Zero(t, n)
		_, err = s.MarkInDoubt(ctx, "tm", "nope", 1, []int64{one.Seq}, "no such run")
		require.ErrorIs(t, err, ErrFenced, "a run that does not exist has no owner to write for")
		pending, err := s.PendingSteps(ctx, "tm", "r1")
		require.NoError(t, err)
		require.Len(t, pending, 2, "the stale owner marked nothing")

		n, err = s.MarkInDoubt(ctx, "tm", "r1", cur, []int64{one.Seq}, "owner stopped")
		require.NoError(t, err)
		assert.Equal(t, 1, n)
		n, err = s.MarkInDoubt(ctx, "tm", "r1", 0, []int64{two.Seq}, "unfenced")
		require.NoError(t, err)
		assert.Equal(t, 1, n)
		steps, err := s.Steps(ctx, "tm", 0, 0)
		require.NoError(t, err)
		require.Len(t, steps, 2)
		for _, st := range steps {
			assert.Equal(t, StepInDoubt, st.Outcome)
			assert.True(t, st.InDoubt)
		}
	})
}

// TestFencedSuspension: a resumed run records its approvals in the suspension it answers,
// which another run (the one that suspended) wrote: the save is fenced by the resumed
// run's epoch (WriterRunID), not the suspended run's. Once another replica took the
// resumed run over, the stale owner's save is refused with ErrFenced and changes nothing;
// the new owner's lands.
func TestFencedSuspension(t *testing.T) {
	ctx := context.Background()
	forEachBackend(t, func(t *testing.T, s Store) {
		sus := suspendedRun(t, s, "ts")

		// The run that answers it, taken over while its approved call is recorded.
		old, cur := answeringRunTakenOver(t, s, "ts")

		stale := *sus
		stale.State = json.RawMessage(`{"stale":true}`)
		stale.WriterRunID, stale.Epoch = "r1", old
		require.ErrorIs(t, s.SaveSuspension(ctx, &stale), ErrFenced)
		got, err := s.LoadSuspension(ctx, "ts")
		require.NoError(t, err)
		assert.NotContains(t, string(got.State), "stale", "the stale owner's save changed nothing")
		assert.Equal(t, "r0", got.RunID)

		fresh := *sus
		fresh.State = json.RawMessage(`{"fresh":true}`)
		fresh.WriterRunID, fresh.Epoch = "r1", cur
		require.NoError(t, s.SaveSuspension(ctx, &fresh))
		got, err = s.LoadSuspension(ctx, "ts")
		require.NoError(t, err)
		assert.Contains(t, string(got.State), "fresh")
		assert.Equal(t, "r0", got.RunID, "the suspension stays the suspended run's")
	})
}

// TestFencedSettle: the stale owner of a resumed run, taken over before it settles the
// resume, has its settle refused; the suspension its new owner resumes from is kept and its
// ids stay unanswered. The new owner's settle goes through.
func TestFencedSettle(t *testing.T) {
	ctx := context.Background()
	forEachBackend(t, func(t *testing.T, s Store) {
		id := suspendedRun(t, s, "tz").Interrupts[0].ID

		// The run that answers it, taken over before it settles the resume.
		old, cur := answeringRunTakenOver(t, s, "tz")
		require.NotEqual(t, old, cur)

		err := s.CloseSuspension(ctx, "tz", "r1", old, []string{id})
		require.ErrorIs(t, err, ErrFenced)
		assert.Contains(t, err.Error(), `"tz"`, "the refusal names the thread")
		_, err = s.LoadSuspension(ctx, "tz")
		require.NoError(t, err, "the stale settle keeps the suspension")
		done, err := s.IsResolved(ctx, "tz", id)
		require.NoError(t, err)
		assert.False(t, done, "the stale settle marks nothing resolved")

		// A run that does not exist settles nothing either.
		require.ErrorIs(t, s.CloseSuspension(ctx, "tz", "nope", cur, []string{id}), ErrFenced)
		_, err = s.LoadSuspension(ctx, "tz")
		require.NoError(t, err)

		require.NoError(t, s.CloseSuspension(ctx, "tz", "r1", cur, []string{id}))
		_, err = s.LoadSuspension(ctx, "tz")
		require.ErrorIs(t, err, ErrNotFound, "the owner's settle deletes the suspension")
		done, err = s.IsResolved(ctx, "tz", id)
		require.NoError(t, err)
		assert.True(t, done, "the owner's settle marks the ids resolved")
	})
}

// TestFencedSettleRacingTakeover: a takeover that starts while the owner's settle is open,
// past its guard, cannot commit before the settle does: the settle goes through whole (the
// suspension deleted, its ids resolved) and the takeover after it; the old owner's next
// settle is refused.
func TestFencedSettleRacingTakeover(t *testing.T) {
	ctx := context.Background()
	forEachShared(t, func(t *testing.T, hs [2]Store) {
		a, b := hs[0].(*sqlStore), hs[1]
		epoch, err := a.BeginRun(ctx, "t1", "r1", "rep-a", -time.Second)
		require.NoError(t, err)
		sus := sampleSuspension("t1", time.Now().Add(time.Hour))
		require.NoError(t, a.SaveSuspension(ctx, sus))
		id := sus.Interrupts[0].ID

		takeOverDuringGuard(t, a, b, "settle", func(ctx context.Context) error {
			return a.CloseSuspension(ctx, "t1", "r1", epoch, []string{id})
		})
		_, err = b.LoadSuspension(ctx, "t1")
		require.ErrorIs(t, err, ErrNotFound, "the settle committed whole")
		done, err := b.IsResolved(ctx, "t1", id)
		require.NoError(t, err)
		assert.True(t, done)

		require.NoError(t, b.SaveSuspension(ctx, sus))
		require.ErrorIs(t, a.CloseSuspension(ctx, "t1", "r1", epoch, []string{"other"}), ErrFenced)
		_, err = b.LoadSuspension(ctx, "t1")
		require.NoError(t, err, "the old owner's settle after the takeover deletes nothing")
	})
}

// takeOverOne has replica take over the one lapsed run there is, with the given lease, and
// returns it.
func takeOverOne(t *testing.T, s Store, replica string, lease time.Duration) RunRecord {
	t.Helper()
	taken, err := s.TakeOverRuns(context.Background(), replica, lease, 10, false)
	require.NoError(t, err)
	require.Len(t, taken, 1)
	return taken[0]
}

// suspendedRun records the run r0 of thread on rep-a that asked a question: its suspension
// saved (one interrupt, expiring in an hour) and the run ended as interrupted.
func suspendedRun(t *testing.T, s Store, thread string) *Suspension {
	t.Helper()
	ctx := context.Background()
	first, err := s.BeginRun(ctx, thread, "r0", "rep-a", time.Minute)
	require.NoError(t, err)
	sus := sampleSuspension(thread, time.Now().Add(time.Hour))
	sus.RunID, sus.Epoch = "r0", first
	require.NoError(t, s.SaveSuspension(ctx, sus))
	require.NoError(t, s.EndRun(ctx, thread, "r0", first, "interrupted"))
	return sus
}

// answeringRunTakenOver begins the run r1 of thread on rep-a with a lapsed lease and has rep-b
// take it over; it returns the stale owner's epoch and the new owner's.
func answeringRunTakenOver(t *testing.T, s Store, thread string) (old, cur int64) {
	t.Helper()
	old, err := s.BeginRun(context.Background(), thread, "r1", "rep-a", -time.Second)
	require.NoError(t, err)
	taken := takeOverOne(t, s, "rep-b", time.Minute)
	require.Equal(t, "r1", taken.RunID)
	return old, taken.Epoch
}

// takeOverDuringGuard holds write, run by the run's owner on a, just past its fencing guard
// (executed, not committed) and meanwhile has rep-b take the run over on b. A takeover that
// returns while write is open must not have taken the run; write must commit, and the
// takeover go through after it. what names the write in failure messages.
func takeOverDuringGuard(t *testing.T, a *sqlStore, b Store, what string, write func(context.Context) error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	inside, release := make(chan struct{}), make(chan struct{})
	// A failed assertion below must not leave write parked in the hook.
	releaseOnce := sync.OnceFunc(func() { close(release) })
	defer releaseOnce()
	a.afterGuard = func() {
		close(inside)
		<-release
	}
	wrote := make(chan error, 1)
	go func() { wrote <- write(ctx) }()
	<-inside
	a.afterGuard = nil

	type claim struct {
		runs []RunRecord
		err  error
	}
	claimed := make(chan claim, 1)
	go func() {
		runs, err := b.TakeOverRuns(ctx, "rep-b", time.Minute, 10, false)
		claimed <- claim{runs, err}
	}()
	var first *claim
	select {
	case c := <-claimed:
		first = &c
		require.NoError(t, c.err)
		require.Empty(t, c.runs, "the run was taken over while its owner's "+what+" was open")
	case <-time.After(300 * time.Millisecond):
	}
	releaseOnce()
	require.NoError(t, <-wrote, "the "+what+" under the current epoch commits")
	if first == nil {
		c := <-claimed
		require.NoError(t, c.err)
		require.Len(t, c.runs, 1, "the waiting takeover goes through after the "+what)
	} else {
		takeOverOne(t, b, "rep-b", time.Minute)
	}
}
