package store

import (
	"context"
	"encoding/json"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestSaveRunLog: events and the work document in one write, on every backend. Both land
// together; a stale epoch stores neither (ErrFenced); an event number already stored fails
// (with other data) fails the write and leaves the document as it was; without events it is SaveRunWork and
// without a document AppendEvents; a long batch (more than one INSERT's worth) lands whole.
func TestSaveRunLog(t *testing.T) {
	ctx := context.Background()
	forEachBackend(t, func(t *testing.T, s Store) {
		epoch, err := s.BeginRun(ctx, "t", "r", "a", time.Minute)
		require.NoError(t, err)
		ev := func(seq int64) Event {
			return Event{Seq: seq, Data: json.RawMessage(`{"type":"TEXT","n":` + strconv.FormatInt(seq, 10) + `}`)}
		}
		work := func(n int) json.RawMessage { return json.RawMessage(`{"checkpoint":{"v":` + strconv.Itoa(n) + `}}`) }
		stored := func() ([]Event, string) {
			t.Helper()
			evs, err := s.Events(ctx, "t", "r", 0, MaxEventsRead)
			require.NoError(t, err)
			run, err := s.GetRun(ctx, "t", "r")
			require.NoError(t, err)
			return evs, string(run.Work)
		}

		require.NoError(t, s.SaveRunLog(ctx, "t", "r", epoch, []Event{ev(1), ev(2)}, work(1)))
		evs, doc := stored()
		require.Len(t, evs, 2)
		assert.JSONEq(t, string(work(1)), doc)

		require.ErrorIs(t, s.SaveRunLog(ctx, "t", "r", epoch+1, []Event{ev(3)}, work(2)), ErrFenced)
		require.ErrorIs(t, s.SaveRunLog(ctx, "t", "other", epoch, []Event{ev(3)}, work(2)), ErrFenced)
		evs, doc = stored()
		assert.Len(t, evs, 2, "a fenced write stores no event")
		assert.JSONEq(t, string(work(1)), doc, "nor the document")

		other := Event{Seq: 2, Data: json.RawMessage(`{"type":"OTHER"}`)}
		require.Error(t, s.SaveRunLog(ctx, "t", "r", epoch, []Event{other}, work(3)), "seq 2 is stored already, with other data")
		evs, doc = stored()
		assert.Len(t, evs, 2)
		assert.JSONEq(t, string(work(1)), doc, "a failed write leaves the document as it was")

		require.Error(t, s.SaveRunLog(ctx, "t", "r", epoch, []Event{ev(3)}, json.RawMessage(`{not json`)))
		require.NoError(t, s.SaveRunLog(ctx, "t", "r", epoch, nil, work(4)))
		require.NoError(t, s.SaveRunLog(ctx, "t", "r", epoch, []Event{ev(3)}, nil))
		evs, doc = stored()
		assert.Len(t, evs, 3)
		assert.JSONEq(t, string(work(4)), doc)

		long := make([]Event, 0, 600)
		for i := range 600 {
			long = append(long, ev(int64(4+i)))
		}
		require.NoError(t, s.SaveRunLog(ctx, "t", "r", epoch, long, work(5)))
		evs, doc = stored()
		assert.Len(t, evs, 603)
		assert.Equal(t, int64(603), evs[len(evs)-1].Seq)
		assert.JSONEq(t, string(work(5)), doc)

		// A run begun again under the same id has a new epoch: its old owner is fenced.
		require.NoError(t, s.EndRun(ctx, "t", "r", epoch, "completed"))
		again, err := s.BeginRun(ctx, "t", "r", "b", time.Minute)
		require.NoError(t, err)
		require.ErrorIs(t, s.SaveRunLog(ctx, "t", "r", epoch, []Event{ev(1)}, work(6)), ErrFenced)
		require.NoError(t, s.SaveRunLog(ctx, "t", "r", again, []Event{ev(1)}, work(7)))
	})
}

// TestEndRunStep: a run's end and its last journal step in one write, on every backend:
// both land (the step under the run's epoch, numbered after the thread's steps); a stale
// epoch or a run that does not exist stores neither.
func TestEndRunStep(t *testing.T) {
	ctx := context.Background()
	forEachBackend(t, func(t *testing.T, s Store) {
		epoch, err := s.BeginRun(ctx, "t", "r", "a", time.Minute)
		require.NoError(t, err)
		intent := &Step{ThreadID: "t", RunID: "r", Kind: StepModelCall, Replica: "a", Epoch: epoch}
		require.NoError(t, s.RecordStep(ctx, intent))
		end := func() *Step {
			return &Step{ThreadID: "t", RunID: "r", Kind: StepRunEnd, Outcome: "completed", Replica: "a"}
		}

		require.ErrorIs(t, s.EndRunStep(ctx, "t", "r", epoch+1, "completed", end()), ErrFenced)
		require.ErrorIs(t, s.EndRunStep(ctx, "t", "nope", epoch, "completed", end()), ErrNotFound)
		require.Error(t, s.EndRunStep(ctx, "t", "r", epoch, RunRunning, end()), "not an end state")
		run, err := s.GetRun(ctx, "t", "r")
		require.NoError(t, err)
		assert.Equal(t, RunRunning, run.State, "a refused end changes nothing")
		steps, err := s.Steps(ctx, "t", 0, 10)
		require.NoError(t, err)
		require.Len(t, steps, 1, "nor records its step")

		step := end()
		require.NoError(t, s.EndRunStep(ctx, "t", "r", epoch, "completed", step))
		assert.Equal(t, intent.Seq+1, step.Seq)
		run, err = s.GetRun(ctx, "t", "r")
		require.NoError(t, err)
		assert.Equal(t, "completed", run.State)
		steps, err = s.Steps(ctx, "t", 0, 10)
		require.NoError(t, err)
		require.Len(t, steps, 2)
		last := steps[1]
		assert.Equal(t, StepRunEnd, last.Kind)
		assert.Equal(t, "completed", last.Outcome)
		assert.Equal(t, epoch, last.Epoch)
		assert.Equal(t, "a", last.Replica)
		_, err = s.ActiveRun(ctx, "t")
		require.ErrorIs(t, err, ErrNotFound, "the thread is free")
	})
}

// TestStartRunStep: a run's start records its run_start step in the same write, under the
// new epoch; a refused start (another owner's thread, a busy thread) records none.
func TestStartRunStep(t *testing.T) {
	ctx := context.Background()
	forEachBackend(t, func(t *testing.T, s Store) {
		start := func(run, owner string) (int64, *Step, error) {
			st := &Step{Kind: StepRunStart, Outcome: StepOK, Replica: "a"}
			epoch, err := s.StartRun(ctx, RunStart{ThreadID: "t", RunID: run, Owner: owner, Replica: "a", Lease: time.Minute,
				Messages: []Message{{ID: "u-" + run, Data: json.RawMessage(`{"id":"u","role":"user","content":"go"}`)}}, Step: st})
			return epoch, st, err
		}
		epoch, st, err := start("r1", "alice")
		require.NoError(t, err)
		assert.NotZero(t, st.Seq)
		_, _, err = start("r2", "mallory")
		require.ErrorIs(t, err, ErrThreadOwned)
		_, _, err = start("r2", "alice")
		require.ErrorIs(t, err, ErrThreadBusy)

		steps, err := s.Steps(ctx, "t", 0, 10)
		require.NoError(t, err)
		require.Len(t, steps, 1, "the refused starts recorded nothing")
		assert.Equal(t, StepRunStart, steps[0].Kind)
		assert.Equal(t, StepOK, steps[0].Outcome)
		assert.Equal(t, "r1", steps[0].RunID)
		assert.Equal(t, epoch, steps[0].Epoch)
		assert.Equal(t, st.Seq, steps[0].Seq)
	})
}
