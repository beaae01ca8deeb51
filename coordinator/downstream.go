package coordinator

import (
	"context"
	"encoding/json"
	"log/slog"
	"strings"
	"time"

	"github.com/baton-dev/baton/cancel"
	"github.com/baton-dev/baton/store"
	"github.com/baton-dev/baton/subagent"
)

// What a replica that does not run a task reads of its run's downstream cancels, so that
// its CancelTask answer names those not confirmed as the running replica's does: the
// owner journals every cancel that failed or was abandoned (a "cancel" step with outcome
// error), and keeps the cancels still being retried among the store's pending cancels,
// which the run's work record ties to the run.

// cancelPoll is how often the pending cancels of a run relayed elsewhere are read again.
const cancelPoll = 100 * time.Millisecond

// runWork is the part of a run's work record that names its A2A tasks.
type runWork struct {
	A2A []struct {
		Agent  string `json:"agent"`
		TaskID string `json:"taskId"`
		State  string `json:"state"`
	} `json:"a2a"`
}

// noAgent is how a downstream cancel of an agent this process is not configured with is
// named: nothing here retries it, and a process started without the agent drops its
// pending record (design/cancel-confirm.md), so its outcome can never be known here.
const noAgent = " (cannot be confirmed: the agent is no longer configured)"

// downstream reads, for a run that this process does not relay, what became of its
// downstream cancels: the executor's CancelTask on another replica than the run's, and
// the task store's end of a stopped run whose execution is gone (Runs.Unconfirmed).
type downstream struct {
	st store.Store
	// configured reports whether an A2A sub-agent is configured here; nil: every one is.
	configured func(name string) bool
	log        *slog.Logger
}

// unconfirmed waits, until deadline (not at all when it has passed), for the cancels of a run that ended on
// another replica to be settled, and returns the status message naming those that were
// not confirmed ("" when all were, or when the store cannot tell). A cancel of an agent
// that is not configured here is not waited for: it is named at once as one that cannot
// be confirmed, as is a task of such an agent that the run left neither terminal, pending
// nor journaled (its pending record was dropped by a restart without the agent).
func (d downstream) unconfirmed(ctx context.Context, threadID, runID string, deadline time.Time) []string {
	work := d.workOf(ctx, threadID, runID)
	pending, gone := d.pendingOf(ctx, work)
	if len(pending) > 0 && time.Now().Before(deadline) {
		tick := time.NewTicker(cancelPoll)
		defer tick.Stop()
		wait := time.NewTimer(time.Until(deadline))
		defer wait.Stop()
	loop:
		for len(pending) > 0 {
			select {
			case <-tick.C:
				var more []store.PendingCancel
				pending, more = d.pendingOf(ctx, work)
				gone = mergeCancels(gone, more)
			case <-wait.C:
				break loop
			case <-ctx.Done():
				break loop
			}
		}
	}
	failed, journaled := d.failedCancels(ctx, threadID, runID)
	retrying := ""
	if deadline.IsZero() {
		retrying = " (not confirmed yet: still being retried)"
	}
	for _, p := range pending {
		failed = append(failed, cancel.Report{Kind: cancel.KindA2ATask, Name: p.Agent, ID: p.TaskID}.Describe()+retrying)
	}
	named := map[string]bool{}
	for k := range journaled {
		named[k] = true
	}
	for _, p := range pending {
		named[p.Agent+" "+p.TaskID] = true
	}
	for _, p := range gone {
		named[p.Agent+" "+p.TaskID] = true
		failed = append(failed, cancel.Report{Kind: cancel.KindA2ATask, Name: p.Agent, ID: p.TaskID}.Describe()+noAgent)
	}
	if work != nil {
		for _, t := range work.A2A {
			if d.isConfigured(t.Agent) || named[t.Agent+" "+t.TaskID] || subagent.State(t.State).Terminal() {
				continue
			}
			named[t.Agent+" "+t.TaskID] = true
			failed = append(failed, cancel.Report{Kind: cancel.KindA2ATask, Name: t.Agent, ID: t.TaskID}.Describe()+noAgent)
		}
	}
	return failed
}

// configured reports whether agent is one of this process's A2A sub-agents.
func (d downstream) isConfigured(agent string) bool {
	return d.configured == nil || d.configured(agent)
}

// mergeCancels adds to gone the cancels of more it does not have yet.
func mergeCancels(gone, more []store.PendingCancel) []store.PendingCancel {
	for _, p := range more {
		dup := false
		for _, g := range gone {
			dup = dup || (g.Agent == p.Agent && g.TaskID == p.TaskID)
		}
		if !dup {
			gone = append(gone, p)
		}
	}
	return gone
}

// workOf reads the run's work record (nil when there is none, or it names no A2A task).
func (d downstream) workOf(ctx context.Context, threadID, runID string) *runWork {
	rec, err := d.st.GetRun(ctx, threadID, runID)
	if err != nil || len(rec.Work) == 0 {
		return nil
	}
	var w runWork
	if json.Unmarshal(rec.Work, &w) != nil || len(w.A2A) == 0 {
		return nil
	}
	return &w
}

// pendingOf returns the store's pending cancels of the run's A2A tasks: those of agents
// configured here, which their retries may still confirm, and those of agents that are
// not (gone), which nothing here retries.
func (d downstream) pendingOf(ctx context.Context, w *runWork) (pending, gone []store.PendingCancel) {
	if w == nil {
		return nil, nil
	}
	all, err := d.st.PendingCancels(ctx, store.MaxPendingCancelsRead)
	if err != nil {
		d.log.Debug("a2a cancel: pending cancels", "err", err)
		return nil, nil
	}
	for _, p := range all {
		for _, t := range w.A2A {
			if p.Agent == t.Agent && p.TaskID == t.TaskID {
				if d.isConfigured(p.Agent) {
					pending = append(pending, p)
				} else {
					gone = append(gone, p)
				}
				break
			}
		}
	}
	return pending, gone
}

// failedCancels names the run's cancels that the journal records as failed or abandoned;
// keys holds their "<agent> <task id>".
func (d downstream) failedCancels(ctx context.Context, threadID, runID string) (out []string, keys map[string]bool) {
	keys = map[string]bool{}
	for after := int64(0); ; {
		steps, err := d.st.Steps(ctx, threadID, after, store.MaxStepsRead)
		if err != nil {
			d.log.Debug("a2a cancel: journal", "thread_id", threadID, "run_id", runID, "err", err)
			return out, keys
		}
		for _, s := range steps {
			after = s.Seq
			if s.RunID != runID || s.Kind != store.StepCancel || s.Outcome != store.StepError {
				continue
			}
			// Detail is "<kind> <result>" (coordinator's cancelStep).
			kind, result, _ := strings.Cut(s.Detail, " ")
			out = append(out, cancel.Report{Kind: cancel.Kind(kind), Name: s.Target, ID: s.Ref}.Describe()+" ("+result+")")
			keys[s.Target+" "+s.Ref] = true
		}
		if len(steps) < store.MaxStepsRead {
			return out, keys
		}
	}
}
