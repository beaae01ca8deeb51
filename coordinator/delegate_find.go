package coordinator

import (
	"context"
	"crypto/rand"
	"errors"
	"log/slog"
	"strings"
	"time"

	"github.com/baton-dev/baton/bridge"
	"github.com/baton-dev/baton/durable"
	"github.com/baton-dev/baton/llm"
	"github.com/baton-dev/baton/store"
	"github.com/baton-dev/baton/subagent"
)

// A new A2A task is sent with a message id and a context id that Baton chooses (A2A lets the
// client choose both; a2a-go, @a2a-js/sdk and ADK keep a client's contextId for the new
// task), recorded in the send's journal intent before the message goes out. A replica that
// takes the run over from one that died before the agent named its task can then find the
// task (ListTasks filtered by that context: it holds this one message's task) and follow it
// or cancel it, instead of leaving it running with nobody following it (design/fencing.md).

// sentIDs identifies a new task's first message.
type sentIDs struct {
	messageID, contextID string
	// agent is the agent it was sent to (as read back from the journal).
	agent string
}

// newSentIDs chooses the ids of a new task's first message: 128 random bits each, so that
// the context is this message's alone.
func newSentIDs() sentIDs {
	return sentIDs{messageID: "baton-msg-" + rand.Text(), contextID: "baton-ctx-" + rand.Text()}
}

// Field names of the ids in a send's journal detail.
const (
	detailMessageID = "messageId="
	detailContextID = "contextId="
)

// detail is how the ids are written in the journal intent's detail.
func (s sentIDs) detail() string {
	return detailMessageID + s.messageID + " " + detailContextID + s.contextID
}

// sentIDsIn reads the ids back from a journal detail (what MarkInDoubt adds after it is
// ignored); ok is false when it holds none.
func sentIDsIn(detail string) (s sentIDs, ok bool) {
	for _, f := range strings.Fields(detail) {
		f = strings.TrimRight(f, ";,")
		if v, found := strings.CutPrefix(f, detailMessageID); found {
			s.messageID = v
		} else if v, found := strings.CutPrefix(f, detailContextID); found {
			s.contextID = v
		}
	}
	return s, s.contextID != ""
}

// withDetail joins a step's own detail and what identifies its message.
func withDetail(detail, ids string) string {
	if detail == "" {
		return ids
	}
	return detail + "; " + ids
}

type sentIDsKey struct{}

// withSentIDs hands the ids recorded in a send's intent down to the send (delegate), which
// runs inside the journaled call.
func withSentIDs(ctx context.Context, s sentIDs) context.Context {
	return context.WithValue(ctx, sentIDsKey{}, s)
}

// sentIDsFrom is the ids withSentIDs put in ctx.
func sentIDsFrom(ctx context.Context) (sentIDs, bool) {
	s, ok := ctx.Value(sentIDsKey{}).(sentIDs)
	return s, ok
}

// taskFinder is a Delegate that can find the task a message started by the ids its sender
// chose (subagent.Agent.FindTask).
type taskFinder interface {
	FindTask(ctx context.Context, contextID, messageID string) (*subagent.Result, error)
}

// Bounds of the search for a task whose id the previous owner never learned: the message
// may still be on its way, or the agent may not have made its task yet (it makes it with
// its first event), so an empty answer is asked again for a while.
const (
	findWait  = 5 * time.Second
	findPause = 250 * time.Millisecond
)

// recoverSend settles, after a takeover, a new-task send whose intent is in the journal
// but whose task the previous owner never learned: the task is found by the ids recorded
// with the intent and followed by id as a continued task is (exchange with follow, which
// cancels it when the run is stopped), so the call gets its real result. Without ids, or at
// an agent that does not list tasks, or when no task turns up, the call is in doubt.
func recoverSend(ctx context.Context, r *Run, t *toolset, a *Agent, c llm.ToolCall) toolOutcome {
	inDoubt := taggedOutcome(bridge.TagError, inDoubtText(c.Name))
	f, ok := a.Client.(taskFinder)
	if !ok {
		return inDoubt
	}
	ids, ok := sentAs(ctx, r, c.ID)
	if !ok {
		return inDoubt
	}
	got := findSent(ctx, r, a, f, ids)
	if got == nil {
		r.log.Warn("takeover: the task of a send in doubt was not found; it stays in doubt", "agent", a.Name, "tool_call_id", c.ID, "context_id", ids.contextID)
		return inDoubt
	}
	if ctx.Err() != nil {
		// The run was stopped (or its client left) while the task was looked for.
		return cancelFound(ctx, r, a, got.TaskID)
	}
	r.log.Info("takeover: found the task of a send in doubt; following it", "agent", a.Name, "tool_call_id", c.ID, "task_id", got.TaskID, "state", got.State)
	req := subagent.Request{TaskID: got.TaskID, ContextID: got.ContextID}
	return exchange(ctx, r, t, a, c.ID, "", req, true)
}

// cancelFound cancels a task found after the run ended here: a stopped run's task is
// cancelled, with the same confirmation and retries as the run's own cancels, unless the
// run was handed to another replica (which finds the task in turn) or this replica no
// longer owns it.
func cancelFound(ctx context.Context, r *Run, a *Agent, taskID string) toolOutcome {
	if errors.Is(context.Cause(ctx), ErrHandoff) {
		return toolOutcome{}
	}
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), r.e.cfg.CancelTimeout)
	defer cancel()
	if err := r.own.MayAct(cctx); err != nil {
		r.log.Info("takeover: the task of a send in doubt is not cancelled from here: the run moved", "agent", a.Name, "task_id", taskID, "err", err)
		return toolOutcome{}
	}
	r.log.Info("takeover: the run ended while the task of a send in doubt was looked for; cancelling it", "agent", a.Name, "task_id", taskID)
	st, _ := r.dur.intent(store.StepCancel, a.Name, taskID, 1, "the run ended while its task was looked for")
	err := r.e.cancels.cancelTask(cctx, r.owner, a, taskID, r.log, "stopped run: the task of its send in doubt cancelled")
	st.End(cancelEnd(err))
	return toolOutcome{}
}

// sentAs reads from the journal the ids the previous owner recorded for the send of call
// callID of this run.
func sentAs(ctx context.Context, r *Run, callID string) (sentIDs, bool) {
	ids, ok := sentByRun(ctx, r.e.cfg.Store, r.log, r.ThreadID, r.RunID)[callID]
	return ids, ok
}

// sentByRun reads from st's journal the ids recorded for the new-task sends of a run, by
// tool call id, with the agent each was sent to.
func sentByRun(ctx context.Context, st store.Store, log *slog.Logger, threadID, runID string) map[string]sentIDs {
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	out := map[string]sentIDs{}
	var after int64
	for {
		steps, err := st.Steps(rctx, threadID, after, store.MaxStepsRead)
		if err != nil {
			log.Warn("takeover: reading the journal for sends in doubt", "thread_id", threadID, "run_id", runID, "err", err)
			return out
		}
		for _, s := range steps {
			if s.RunID == runID && s.Kind == store.StepA2ASend && s.Ref != "" {
				if ids, has := sentIDsIn(s.Detail); has {
					ids.agent = s.Target
					out[s.Ref] = ids
				}
			}
			after = s.Seq
		}
		if len(steps) < store.MaxStepsRead {
			return out
		}
	}
}

// cancelUnnamed cancels, for a run that will not go on, the task of one of its new-task
// sends that its work does not list (the agent never named it to the previous owner):
// found by the ids its intent recorded, as a run that goes on would follow it.
func cancelUnnamed(c *taskCancels, j *durable.Journal, log *slog.Logger, rec store.RunRecord, owner string, a *Agent, ids sentIDs) {
	f, ok := a.Client.(taskFinder)
	if !ok {
		return
	}
	// The run this task belonged to has lapsed: no context of its lives on, and the look
	// and the cancel each get their own time.
	fctx, cancel := context.WithTimeout(context.Background(), findWait)
	defer cancel()
	got, err := f.FindTask(ownerCtx(fctx, c.signIn, owner, a), ids.contextID, ids.messageID)
	if err != nil || got == nil || got.TaskID == "" || got.State.Terminal() {
		return
	}
	cctx, cancelC := context.WithTimeout(context.Background(), c.timeout)
	defer cancelC()
	st, _ := j.Intent(durable.RunRef{ThreadID: rec.ThreadID, RunID: rec.RunID},
		durable.StepIntent{Kind: store.StepCancel, Target: a.Name, Ref: got.TaskID, Attempt: 1, Detail: "lapsed run: the task of its send in doubt is cancelled"})
	err = c.cancelTask(cctx, owner, a, got.TaskID, log, "lapsed run: the task of its send in doubt cancelled")
	st.End(cancelEnd(err))
}

// findSent looks for the task that the message ids started, asking again while the agent
// lists nothing, within findWait. It goes on when ctx (the run) ends meanwhile: a task
// found then is cancelled by exchange, and one that is not stays in doubt. nil: not found.
func findSent(ctx context.Context, r *Run, a *Agent, f taskFinder, ids sentIDs) *subagent.Result {
	fctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), findWait)
	defer cancel()
	for {
		got, err := f.FindTask(agentCtx(fctx, r, a), ids.contextID, ids.messageID)
		if err == nil && got != nil && got.TaskID != "" {
			return got
		}
		if err != nil && !errors.Is(err, subagent.ErrTaskNotFound) {
			// The agent does not list tasks (A2A 0.3, or refused): asking again does not help.
			r.log.Warn("takeover: the agent could not list the tasks of a send in doubt", "agent", a.Name, "err", err)
			return nil
		}
		t := time.NewTimer(findPause)
		select {
		case <-fctx.Done():
			t.Stop()
			return nil
		case <-t.C:
		}
	}
}
