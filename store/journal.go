package store

import (
	"context"
	"time"
	"unicode/utf8"
)

// Step kinds of the journal (DESIGN §3, §9b).
const (
	StepModelCall   = "model_call"
	StepToolCall    = "tool_call"
	StepA2ASend     = "a2a_send"
	StepA2AContinue = "a2a_continue"
	StepCancel      = "cancel"
	StepApproval    = "approval"
	StepRefusal     = "refusal"
	StepTakeover    = "takeover"
	StepRunStart    = "run_start"
	StepRunEnd      = "run_end"
)

// Step outcomes. A step recorded as an intent is StepPending until its outcome is
// recorded; one that a takeover found pending is StepInDoubt.
const (
	StepPending = "pending"
	StepOK      = "ok"
	StepError   = "error"
	StepInDoubt = "in_doubt"
)

// MaxStepsRead bounds one Steps call (GET …/journal's limit).
const MaxStepsRead = 5000

// maxStepText bounds the target, ref, tag, failure kind and detail of a step: they are
// short by construction, but parts of them come from peers.
const maxStepText = 512

// Step is one entry of a thread's step journal: a step of a run with a side effect,
// recorded as an intent before it is taken and completed with its outcome after.
type Step struct {
	// Seq numbers the thread's steps from 1, in the order they were recorded.
	Seq      int64
	ThreadID string
	RunID    string
	// At is when the intent was recorded.
	At time.Time
	// Kind is one of the Step* kinds.
	Kind string
	// Target is what the step acts on: the model, the tool, the agent.
	Target string
	// Ref identifies the step within its run for a replica that takes the run over: the
	// tool call id, the A2A task id. Not shown on GET …/journal.
	Ref string
	// Attempt counts the tries of the same step (model retries), from 1.
	Attempt int
	// Outcome is StepPending, StepOK, StepError, StepInDoubt, or a kind's own word
	// (approved, denied, interrupted, cancelled, refused...).
	Outcome     string
	Tag         string
	FailureKind string
	InDoubt     bool
	// Replica is the process that recorded the step.
	Replica string
	// Epoch is the run's ownership epoch the step was recorded under. When it is not 0 the
	// store records the step only while the run has that epoch (ErrFenced otherwise), in
	// the same transaction: a replica that lost the run cannot write its journal. 0 records
	// unconditionally (a step of no owner: the engine's own, after a run lapsed).
	Epoch  int64
	Detail string
}

// StepEnd is the outcome of a step recorded as an intent.
type StepEnd struct {
	Outcome, Tag, FailureKind, Detail string
	InDoubt                           bool
	// Epoch, when not 0, fences the write as Step.Epoch does: the outcome is recorded only
	// while the step's run has this epoch (ErrFenced otherwise).
	Epoch int64
}

// Journal is the step journal of every thread (design/journal.md).
type Journal interface {
	// RecordStep appends s to its thread's journal and sets s.Seq and s.At. An intent has
	// Outcome StepPending (the default when empty); a step without a before and after
	// (a refusal, a takeover) is recorded with its outcome at once. With s.Epoch set, a
	// run whose epoch moved on (or that does not exist) refuses it: ErrFenced.
	RecordStep(ctx context.Context, s *Step) error
	// EndStep records the outcome of a pending step. A step that is no longer pending
	// (marked in doubt by a takeover) keeps what it has: ErrNotFound. With end.Epoch set,
	// a run whose epoch moved on refuses it: ErrFenced.
	EndStep(ctx context.Context, threadID string, seq int64, end StepEnd) error
	// Steps returns the thread's steps with Seq > after, oldest first, at most limit
	// (capped at MaxStepsRead).
	Steps(ctx context.Context, threadID string, after int64, limit int) ([]Step, error)
	// PendingSteps returns the run's steps still pending (an intent with no outcome), oldest
	// first, at most MaxStepsRead.
	PendingSteps(ctx context.Context, threadID, runID string) ([]Step, error)
	// MarkInDoubt records the outcome StepInDoubt (and InDoubt) on the run's pending steps
	// with the given seqs, with detail added to the intent's own (which may say what the
	// step was sent as: a replica that takes the run over reads it back), and returns how
	// many it marked. With epoch set
	// (the epoch its caller owns the run under), a run whose epoch moved on (or that does
	// not exist) refuses it: ErrFenced, nothing marked; 0 marks unconditionally.
	MarkInDoubt(ctx context.Context, threadID, runID string, epoch int64, seqs []int64, detail string) (int, error)
}

// inDoubtDetail is the detail of an intent marked in doubt with why: the intent's own
// first, then why.
func inDoubtDetail(intent, why string) string {
	switch {
	case why == "":
		return intent
	case intent == "":
		return clip(why)
	}
	return intent + "; " + why
}

// clip cuts s to maxStepText bytes on a rune boundary.
func clip(s string) string {
	if len(s) <= maxStepText {
		return s
	}
	cut := maxStepText
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut]
}

// normalize fills a step's defaults and bounds its texts.
func (s *Step) normalize(now time.Time) {
	if s.Outcome == "" {
		s.Outcome = StepPending
	}
	if s.Attempt <= 0 {
		s.Attempt = 1
	}
	s.At = now.UTC()
	s.Target, s.Ref, s.Tag, s.FailureKind, s.Detail = clip(s.Target), clip(s.Ref), clip(s.Tag), clip(s.FailureKind), clip(s.Detail)
	s.InDoubt = s.InDoubt || s.Outcome == StepInDoubt
}

func (e *StepEnd) normalize() {
	if e.Outcome == "" || e.Outcome == StepPending {
		e.Outcome = StepOK
	}
	e.Tag, e.FailureKind, e.Detail = clip(e.Tag), clip(e.FailureKind), clip(e.Detail)
	e.InDoubt = e.InDoubt || e.Outcome == StepInDoubt
}
