package a2aserver

import (
	"context"
	"encoding/json"
	"strings"
	"time"

	"github.com/baton-dev/baton/cancel"
	"github.com/baton-dev/baton/store"
)

// What a replica that does not run a task reads of its run's downstream cancels, so that
// its CancelTask answer names those not confirmed as the running replica's does: the
// owner journals every cancel that failed or was abandoned (a "cancel" step with outcome
// error), and keeps the cancels still being retried among the store's pending cancels,
// which the run's work record ties to the run.

// cancelJournal reads the journal's steps (store.Store).
type cancelJournal interface {
	Steps(ctx context.Context, threadID string, after int64, limit int) ([]store.Step, error)
}

// cancelsPending reads the cancels not confirmed yet (store.Store).
type cancelsPending interface {
	PendingCancels(ctx context.Context, limit int) ([]store.PendingCancel, error)
}

// runWork is the part of a run's work record that names its A2A tasks.
type runWork struct {
	A2A []struct {
		Agent  string `json:"agent"`
		TaskID string `json:"taskId"`
	} `json:"a2a"`
}

// unconfirmedElsewhere waits, until deadline, for the cancels of a run that ended on
// another replica to be settled, and returns the status message naming those that were
// not confirmed ("" when all were, or when the store cannot tell).
func (x *executor) unconfirmedElsewhere(ctx context.Context, threadID, runID string, deadline time.Time) string {
	pending := x.pendingOf(ctx, threadID, runID)
	if len(pending) > 0 {
		tick := time.NewTicker(followPoll)
		defer tick.Stop()
		wait := time.NewTimer(time.Until(deadline))
		defer wait.Stop()
	loop:
		for len(pending) > 0 {
			select {
			case <-tick.C:
				pending = x.pendingOf(ctx, threadID, runID)
			case <-wait.C:
				break loop
			case <-ctx.Done():
				break loop
			}
		}
	}
	failed := x.failedCancels(ctx, threadID, runID)
	for _, p := range pending {
		failed = append(failed, describeCancel(cancel.Report{Kind: cancel.KindA2ATask, Name: p.Agent, ID: p.TaskID}))
	}
	if len(failed) == 0 {
		return ""
	}
	return "Canceled; these downstream cancellations were not confirmed: " + strings.Join(failed, "; ") + "."
}

// pendingOf returns the store's pending cancels of the run's A2A tasks.
func (x *executor) pendingOf(ctx context.Context, threadID, runID string) []store.PendingCancel {
	pc, ok := x.runs.(cancelsPending)
	if !ok {
		return nil
	}
	rec, err := x.runs.GetRun(ctx, threadID, runID)
	if err != nil || len(rec.Work) == 0 {
		return nil
	}
	var w runWork
	if json.Unmarshal(rec.Work, &w) != nil || len(w.A2A) == 0 {
		return nil
	}
	all, err := pc.PendingCancels(ctx, store.MaxPendingCancelsRead)
	if err != nil {
		x.log.Debug("a2a cancel: pending cancels", "thread_id", threadID, "run_id", runID, "err", err)
		return nil
	}
	var out []store.PendingCancel
	for _, p := range all {
		for _, t := range w.A2A {
			if p.Agent == t.Agent && p.TaskID == t.TaskID {
				out = append(out, p)
				break
			}
		}
	}
	return out
}

// failedCancels names the run's cancels that the journal records as failed or abandoned.
func (x *executor) failedCancels(ctx context.Context, threadID, runID string) []string {
	j, ok := x.runs.(cancelJournal)
	if !ok {
		return nil
	}
	var out []string
	for after := int64(0); ; {
		steps, err := j.Steps(ctx, threadID, after, store.MaxStepsRead)
		if err != nil {
			x.log.Debug("a2a cancel: journal", "thread_id", threadID, "run_id", runID, "err", err)
			return out
		}
		for _, s := range steps {
			after = s.Seq
			if s.RunID != runID || s.Kind != store.StepCancel || s.Outcome != store.StepError {
				continue
			}
			// Detail is "<kind> <result>" (coordinator's cancelStep).
			kind, result, _ := strings.Cut(s.Detail, " ")
			out = append(out, describeCancel(cancel.Report{Kind: cancel.Kind(kind), Name: s.Target, ID: s.Ref})+" ("+result+")")
		}
		if len(steps) < store.MaxStepsRead {
			return out
		}
	}
}
