package durable

import (
	"context"
	"log/slog"
	"time"

	"github.com/baton-dev/baton/store"
)

// StepStore is what a Journal writes: the store's step journal (design/journal.md).
type StepStore interface {
	RecordStep(ctx context.Context, s *store.Step) error
	EndStep(ctx context.Context, threadID string, seq int64, end store.StepEnd) error
	PendingSteps(ctx context.Context, threadID, runID string) ([]store.Step, error)
	MarkInDoubt(ctx context.Context, threadID, runID string, epoch int64, seqs []int64, detail string) (int, error)
}

// Journal records a replica's steps in the store's step journal: every step with a side
// effect as an intent before it is taken and its outcome after; steps without a before and
// after (a refusal, a takeover, an approval decision, a run's start and end) once, with
// their outcome. Each write carries the run's epoch (RunRef.Epoch) and is refused with
// store.ErrFenced once another replica owns the run; epoch 0 writes unconditionally (a step
// of no owner: the engine's own, after a run lapsed).
type Journal struct {
	st      StepStore
	replica string
	log     *slog.Logger
}

// RunRef names the run a step belongs to and the epoch under which this replica owns it.
type RunRef struct {
	ThreadID, RunID string
	Epoch           int64
}

// StepIntent is a step about to be taken.
type StepIntent struct {
	// Kind is one of the store.Step* kinds; Target what it acts on (the model, a tool, an
	// agent); Ref identifies it within its run (a tool call id, an A2A task id).
	Kind, Target, Ref string
	// Attempt counts the tries of the same step, from 1.
	Attempt int
	Detail  string
}

// JournalTimeout bounds one journal write: an intent is written before its step is taken,
// so a slow store delays the step by at most this.
const JournalTimeout = 5 * time.Second

// NewJournal returns the journal of replica, writing to st.
func NewJournal(st StepStore, replica string, log *slog.Logger) *Journal {
	return &Journal{st: st, replica: replica, log: log}
}

// Intent records that a step of run is about to be taken, before it is taken. The error is
// the store's (wrapping store.ErrFenced when another replica owns the run): a caller whose
// step must not be taken unrecorded does not take it.
func (j *Journal) Intent(run RunRef, in StepIntent) (Step, error) {
	s := &store.Step{ThreadID: run.ThreadID, RunID: run.RunID, Kind: in.Kind, Target: in.Target, Ref: in.Ref,
		Attempt: in.Attempt, Replica: j.replica, Epoch: run.Epoch, Detail: in.Detail}
	// A journal write must happen even when the run is being cancelled (the cancel is
	// often what ends the step): only the write's own timeout bounds it.
	ctx, cancel := context.WithTimeout(context.Background(), JournalTimeout)
	defer cancel()
	if err := j.st.RecordStep(ctx, s); err != nil {
		j.log.Warn("journal: record intent", "kind", in.Kind, "target", in.Target, "thread_id", run.ThreadID, "run_id", run.RunID, "err", err)
		return Step{}, err
	}
	return Step{j: j, threadID: run.ThreadID, seq: s.Seq, epoch: run.Epoch}, nil
}

// Record records a step of run that has no before and after, with its outcome (StepOK when
// empty). A failure is logged: such a step is an audit record, never a precondition.
func (j *Journal) Record(run RunRef, kind, target, ref string, end store.StepEnd) {
	s := j.Entry(run, kind, target, ref, end)
	// As for Intent: the step's result is recorded even when its run is being cancelled.
	ctx, cancel := context.WithTimeout(context.Background(), JournalTimeout)
	defer cancel()
	if err := j.st.RecordStep(ctx, s); err != nil {
		j.log.Warn("journal: record step", "kind", kind, "target", target, "thread_id", run.ThreadID, "run_id", run.RunID, "err", err)
	}
}

// Entry is the record of a step of run that has no before and after (Record), for a
// caller that writes it with another write of the run (store.Runs.EndRunStep).
func (j *Journal) Entry(run RunRef, kind, target, ref string, end store.StepEnd) *store.Step {
	s := &store.Step{ThreadID: run.ThreadID, RunID: run.RunID, Kind: kind, Target: target, Ref: ref,
		Outcome: end.Outcome, Tag: end.Tag, FailureKind: end.FailureKind, InDoubt: end.InDoubt, Detail: end.Detail,
		Replica: j.replica, Epoch: run.Epoch}
	if s.Outcome == "" {
		s.Outcome = store.StepOK
	}
	return s
}

// MarkInDoubtAfterTakeover reports the steps of a run taken over that its previous owner
// began and never finished: their outcome is unknown. It marks them under run.Epoch, the
// epoch the takeover gave this replica: an error wrapping store.ErrFenced means another
// replica took the run over since, and this one must leave the run to it.
func (j *Journal) MarkInDoubtAfterTakeover(ctx context.Context, run RunRef) error {
	pending, err := j.st.PendingSteps(ctx, run.ThreadID, run.RunID)
	if err != nil {
		j.log.Warn("journal: pending steps of a run taken over", "thread_id", run.ThreadID, "run_id", run.RunID, "err", err)
		return err
	}
	seqs := make([]int64, 0, len(pending))
	for _, s := range pending {
		seqs = append(seqs, s.Seq)
	}
	if _, err := j.st.MarkInDoubt(ctx, run.ThreadID, run.RunID, run.Epoch, seqs,
		"the replica that began this step stopped before recording its outcome; it may or may not have happened"); err != nil {
		j.log.Warn("journal: mark steps in doubt", "thread_id", run.ThreadID, "run_id", run.RunID, "err", err)
		return err
	}
	return nil
}
