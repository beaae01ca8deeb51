package coordinator

import (
	"context"
	"encoding/json"
	"errors"
	"time"

	"github.com/baton-dev/baton/bridge"
	"github.com/baton-dev/baton/llm"
	"github.com/baton-dev/baton/store"
)

// stepRecorder is what the engine needs of the step journal (design/journal.md): every
// step with a side effect is recorded as an intent before it is taken and completed with
// its outcome after; steps without a before and after (a refusal, a takeover, an approval
// decision, a run's start and end) are recorded once, with their outcome.
type stepRecorder interface {
	RecordStep(ctx context.Context, s *store.Step) error
	EndStep(ctx context.Context, threadID string, seq int64, end store.StepEnd) error
	PendingSteps(ctx context.Context, threadID, runID string) ([]store.Step, error)
	MarkInDoubt(ctx context.Context, threadID, runID string, epoch int64, seqs []int64, detail string) (int, error)
}

// journal is the engine's step recorder: the store's journal.
func (e *Engine) journal() stepRecorder { return e.cfg.Store }

// journalTimeout bounds one journal write: an intent is written before its step is taken,
// so a slow store delays the step by at most this.
const journalTimeout = 5 * time.Second

// stepRef is a recorded intent; seq 0 when it could not be recorded.
type stepRef struct {
	e        *Engine
	threadID string
	seq      int64
	epoch    int64
}

// journalEpoch is the run's ownership epoch that its steps are recorded under (0 before the
// store made this replica its owner: unfenced). The store refuses a step whose epoch is
// not the run's current one; that refusal stops the run here (moved).
func (r *Run) journalEpoch() int64 { return r.elog.Epoch() }

// intent records that the run is about to take a step, before it is taken. The error is
// the store's: a caller whose step must not be taken unrecorded (a call that could not
// be re-issued safely) does not take it. A fenced refusal stops the run here.
func (r *Run) intent(kind, target, ref string, attempt int, detail string) (stepRef, error) {
	s, err := r.e.intent(r.ThreadID, r.RunID, r.journalEpoch(), kind, target, ref, attempt, detail)
	if errors.Is(err, store.ErrFenced) {
		r.moved("the store refused a journal step of the run")
	}
	return s, err
}

// intent records a step of run (threadID, runID) about to be taken.
func (e *Engine) intent(threadID, runID string, epoch int64, kind, target, ref string, attempt int, detail string) (stepRef, error) {
	s := &store.Step{ThreadID: threadID, RunID: runID, Kind: kind, Target: target, Ref: ref, Attempt: attempt,
		Replica: e.cfg.Replica, Epoch: epoch, Detail: detail}
	ctx, cancel := context.WithTimeout(context.Background(), journalTimeout)
	defer cancel()
	if err := e.journal().RecordStep(ctx, s); err != nil {
		e.log.Warn("journal: record intent", "kind", kind, "target", target, "thread_id", threadID, "run_id", runID, "err", err)
		return stepRef{e: e, threadID: threadID}, err
	}
	return stepRef{e: e, threadID: threadID, seq: s.Seq, epoch: epoch}, nil
}

// end records the step's outcome.
func (s stepRef) end(end store.StepEnd) {
	if s.seq == 0 {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), journalTimeout)
	defer cancel()
	end.Epoch = s.epoch
	err := s.e.journal().EndStep(ctx, s.threadID, s.seq, end)
	if err != nil && !errors.Is(err, store.ErrNotFound) {
		s.e.log.Warn("journal: record outcome", "thread_id", s.threadID, "seq", s.seq, "err", err)
	}
}

// cancelEnd is the journal's outcome of a cancel.
func cancelEnd(err error) store.StepEnd {
	if err != nil {
		return store.StepEnd{Outcome: store.StepError, Detail: "not confirmed yet: " + errString(err)}
	}
	return store.StepEnd{Outcome: store.StepOK}
}

// step records a step of the run that has no before and after, with its outcome.
func (r *Run) step(kind, target, ref string, end store.StepEnd) {
	r.e.step(r.ThreadID, r.RunID, r.journalEpoch(), kind, target, ref, end)
}

// step records a step of run (threadID, runID) that has no before and after, with its
// outcome (the engine's own steps: a takeover, the cancel of a lapsed run's task).
func (e *Engine) step(threadID, runID string, epoch int64, kind, target, ref string, end store.StepEnd) {
	s := &store.Step{ThreadID: threadID, RunID: runID, Kind: kind, Target: target, Ref: ref,
		Outcome: end.Outcome, Tag: end.Tag, FailureKind: end.FailureKind, InDoubt: end.InDoubt, Detail: end.Detail,
		Replica: e.cfg.Replica, Epoch: epoch}
	if s.Outcome == "" {
		s.Outcome = store.StepOK
	}
	ctx, cancel := context.WithTimeout(context.Background(), journalTimeout)
	defer cancel()
	if err := e.journal().RecordStep(ctx, s); err != nil {
		e.log.Warn("journal: record step", "kind", kind, "target", target, "thread_id", threadID, "run_id", runID, "err", err)
	}
}

// toolStep is the journal's kind and target of a backend call, and whether it may be sent
// although its intent could not be recorded (a call a replica taking the run over may
// re-issue: an idempotent or read-only MCP tool). Kind "" means the call has no side
// effect to record (ask_user, an unknown tool).
func toolStep(t *toolset, c llm.ToolCall) (kind, target string, safe bool) {
	if a, ok := t.agents[c.Name]; ok {
		var args struct {
			TaskID any `json:"task_id"`
		}
		_ = json.Unmarshal([]byte(c.Arguments), &args)
		if args.TaskID != nil && args.TaskID != "" {
			return store.StepA2AContinue, a.Name, false
		}
		return store.StepA2ASend, a.Name, false
	}
	if mt, ok := t.mcp[c.Name]; ok {
		return store.StepToolCall, c.Name, mt.Idempotent
	}
	return "", "", true
}

// journaled runs a backend call between its intent and its outcome in the journal. A call
// that could not be re-issued safely is not sent when its intent cannot be recorded: a
// replica taking the run over reads a call without an intent as never sent.
func (r *Run) journaled(ctx context.Context, t *toolset, c llm.ToolCall, detail string, run func(context.Context) toolOutcome) toolOutcome {
	kind, target, safe := toolStep(t, c)
	if kind == "" {
		return run(ctx)
	}
	var s stepRef
	var err error
	if safe {
		// A call that may be re-issued goes out even unrecorded.
		s, _ = r.intent(kind, target, c.ID, 1, detail)
	} else {
		s, err = r.durableIntent(ctx, kind, target, c.ID, detail)
	}
	if err != nil {
		return taggedOutcome(bridge.TagError, bridge.Error("The call was not sent: the coordinator could not record it first (its store is unavailable). Try again later."))
	}
	out := run(ctx)
	s.end(stepEnd(ctx, out))
	return out
}

// durableIntent records the intent of a step that must not be taken unrecorded (a call a
// replica taking the run over could not safely re-issue), asking the store again until it
// takes it: a store that is away for a moment delays the call, it does not drop it. It
// fails when ctx ends, or when the store refused the intent as fenced or the lease was
// lost (the run moved): the step is then not taken.
func (r *Run) durableIntent(ctx context.Context, kind, target, ref, detail string) (stepRef, error) {
	pause := storeRetry
	for {
		s, err := r.intent(kind, target, ref, 1, detail)
		if err == nil {
			return s, nil
		}
		if errors.Is(err, store.ErrFenced) {
			return s, err // the run moved (intent stopped it)
		}
		t := time.NewTimer(pause)
		select {
		case <-ctx.Done():
			t.Stop()
			return s, ctx.Err()
		case <-t.C:
		}
		pause = min(2*pause, maxStoreRetryPause)
		if err := r.mayAct(ctx); err != nil {
			return s, err
		}
	}
}

// stepEnd is the journal's outcome of a call's result.
func stepEnd(ctx context.Context, out toolOutcome) store.StepEnd {
	end := store.StepEnd{Outcome: store.StepOK, Tag: out.Tag, FailureKind: out.Code}
	switch {
	case len(out.interrupts) > 0:
		end.Outcome = "interrupted"
	case ctx.Err() != nil:
		end.Outcome = "cancelled"
	case out.Tag == bridge.TagError || out.Tag == bridge.TagRetry:
		end.Outcome = store.StepError
	}
	return end
}

// markInDoubtAfterTakeover reports, in the journal, the steps of a run taken over that
// its previous owner began and never finished: their outcome is unknown. It marks them
// under the epoch the takeover gave this replica: an error wrapping store.ErrFenced means
// another replica took the run over since, and this one must leave the run to it.
func (e *Engine) markInDoubtAfterTakeover(ctx context.Context, rec store.RunRecord) error {
	pending, err := e.journal().PendingSteps(ctx, rec.ThreadID, rec.RunID)
	if err != nil {
		e.log.Warn("journal: pending steps of a run taken over", "thread_id", rec.ThreadID, "run_id", rec.RunID, "err", err)
		return err
	}
	seqs := make([]int64, 0, len(pending))
	for _, s := range pending {
		seqs = append(seqs, s.Seq)
	}
	if _, err := e.journal().MarkInDoubt(ctx, rec.ThreadID, rec.RunID, rec.Epoch, seqs,
		"the replica that began this step stopped before recording its outcome; it may or may not have happened"); err != nil {
		e.log.Warn("journal: mark steps in doubt", "thread_id", rec.ThreadID, "run_id", rec.RunID, "err", err)
		return err
	}
	return nil
}
