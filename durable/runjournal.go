package durable

import (
	"context"
	"errors"
	"time"

	"github.com/baton-dev/baton/store"
)

// RunJournal is one run's part of a replica's Journal: its steps are recorded under the
// epoch with which its event log owns the run (0 before the store made this replica its
// owner: unfenced), and a refusal as fenced (another replica owns the run now) is reported
// to the run (Moved), whose loop stops it here. What a step is and when it is taken are
// the run loop's; the record, its epoch and its retries are the journal's.
type RunJournal struct {
	j               *Journal
	threadID, runID string
	log             *EventLog
	moved           func(why string)
}

// ForRun returns the journal of the run (threadID, runID), whose event log l holds its
// epoch; moved is called when the store refuses one of its steps as fenced.
func (j *Journal) ForRun(threadID, runID string, l *EventLog, moved func(why string)) *RunJournal {
	return &RunJournal{j: j, threadID: threadID, runID: runID, log: l, moved: moved}
}

// Ref names the run in the journal, with the epoch its steps are recorded under. The store
// refuses a step whose epoch is not the run's current one.
func (rj *RunJournal) Ref() RunRef {
	return RunRef{ThreadID: rj.threadID, RunID: rj.runID, Epoch: rj.log.Epoch()}
}

// Intent records that the run is about to take a step, before it is taken. The error is
// the store's: a caller whose step must not be taken unrecorded (a call that could not be
// re-issued safely) does not take it. A fenced refusal is reported to the run (moved).
func (rj *RunJournal) Intent(in StepIntent) (Step, error) {
	s, err := rj.j.Intent(rj.Ref(), in)
	if errors.Is(err, store.ErrFenced) {
		rj.moved("the store refused a journal step of the run")
	}
	return s, err
}

// Record records a step of the run that has no before and after, with its outcome.
func (rj *RunJournal) Record(kind, target, ref string, end store.StepEnd) {
	rj.j.Record(rj.Ref(), kind, target, ref, end)
}

// DurableIntent records the intent of a step that must not be taken unrecorded (a call a
// replica taking the run over could not safely re-issue), asking the store again until it
// takes it: a store that is away for a moment delays the step, it does not drop it. Between
// two attempts mayAct waits until the run may still act here (its lease). It fails when
// ctx ends, when the store refused the intent as fenced (the run moved: Intent reported
// it), or with mayAct's error: the step is then not taken.
func (rj *RunJournal) DurableIntent(ctx context.Context, in StepIntent, mayAct func(context.Context) error) (Step, error) {
	pause := StoreRetry
	for {
		s, err := rj.Intent(in)
		if err == nil {
			return s, nil
		}
		if errors.Is(err, store.ErrFenced) {
			return s, err
		}
		t := time.NewTimer(pause)
		select {
		case <-ctx.Done():
			t.Stop()
			return s, ctx.Err()
		case <-t.C:
		}
		pause = min(2*pause, MaxStoreRetryPause)
		if err := mayAct(ctx); err != nil {
			return s, err
		}
	}
}

// Before records the intent of a step before it is taken. A step that may be taken again
// safely (mustRecord false: an idempotent or read-only call) goes ahead even unrecorded,
// and Before never fails for it; one that must not be taken unrecorded waits for its
// intent to be recorded (DurableIntent, with mayAct between attempts), and is not taken
// when Before fails.
func (rj *RunJournal) Before(ctx context.Context, in StepIntent, mustRecord bool, mayAct func(context.Context) error) (Step, error) {
	if !mustRecord {
		s, _ := rj.Intent(in)
		return s, nil
	}
	return rj.DurableIntent(ctx, in, mayAct)
}
