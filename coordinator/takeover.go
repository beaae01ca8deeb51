package coordinator

import (
	"context"
	"encoding/json"
	"slices"
	"sync"

	"github.com/baton-dev/baton/durable"
	"github.com/baton-dev/baton/failure"
	"github.com/baton-dev/baton/llm"
	"github.com/baton-dev/baton/store"
	"github.com/baton-dev/baton/subagent"
)

// Takeover: a replica continues the runs of a replica that died (or handed them off), from
// the checkpoint each run keeps in its work document (design/takeover.md).
//
// Design note: the checkpoint is the run's conversation after its last completed model
// turn (with the turn's tool calls, when it made some), the failure state at that point,
// the run's input (without its messages once the conversation holds them) and its owner;
// the results of the turn's tool calls are added as they end. It is written by the run's
// event-log writer with the rest of the work document, so the run never waits for it and
// no token is ever written on its own. A replica that takes the run over reads the log to
// continue its numbering and to know what the stream has open, closes what it cannot
// continue, and settles the turn's calls without a result by kind (resumeDecision): an A2A
// task is followed by id and never sent again, an idempotent or read-only MCP call is sent
// again, any other call that may have run is reported to the model as such; then the loop
// goes on with the next model turn. A model turn cut mid-stream is simply asked again.
// takenOver is what a run taken over starts from (Run.resumed).
type takenOver struct {
	cp   checkpoint
	conv []llm.Message // nil: the run starts over from its input
	fs   failure.State
	work durable.Work
	// fresh: not even RUN_STARTED reached the log; the stream starts here.
	fresh bool
	// started and resulted: the tool calls whose TOOL_CALL_START and TOOL_CALL_RESULT
	// reached the log. The work document is stored ahead of the events, so a result the
	// checkpoint holds may be missing from the log; the new owner streams it (missingResults).
	started, resulted map[string]bool
}

// cancelWork cancels, in parallel, the run's A2A tasks its work document lists as not
// terminal, and records them as canceled so that nobody cancels them again, and the tasks
// of its sends that the agent never named (cancelUnnamed).
func (e *Engine) cancelWork(rec store.RunRecord, work durable.Work) {
	log := e.log.With("thread_id", rec.ThreadID, "run_id", rec.RunID)
	owner := workOwner(work)
	// The run's previous owner is gone with its contexts; the takeover's look must not
	// bound the cancels either (they are slow agents' calls): they get their own time.
	cctx, cancel := context.WithTimeout(context.Background(), e.cfg.CancelTimeout)
	defer cancel()
	var wg sync.WaitGroup
	changed := false
	for i := range work.A2A {
		t := &work.A2A[i]
		a := e.agents[t.Agent]
		if a == nil || subagent.State(t.State).Terminal() {
			continue
		}
		t.State, changed = string(subagent.StateCanceled), true
		wg.Go(func() {
			// Confirmed like a run's cancels: retried in the background until the
			// agent confirms (cancels.go).
			st, _ := e.journal.Intent(durable.RunRef{ThreadID: rec.ThreadID, RunID: rec.RunID},
				durable.StepIntent{Kind: store.StepCancel, Target: a.Name, Ref: t.TaskID, Attempt: 1, Detail: "lapsed run: its task is cancelled"})
			err := e.cancelTask(cctx, owner, a, t.TaskID, log, "lapsed run: task cancelled")
			st.End(cancelEnd(err))
			if err != nil {
				log.Warn("lapsed run: the cancel of its task failed", "agent", t.Agent, "task_id", t.TaskID, "err", errString(err))
			}
		})
	}
	// The tasks of its new-task sends that its work does not list: the agent never named
	// them to the previous owner; found by the ids their intents recorded.
	for callID, ids := range sentByRun(cctx, e.cfg.Store, log, rec.ThreadID, rec.RunID) {
		a := e.agents[ids.agent]
		if a == nil || slices.ContainsFunc(work.A2A, func(t durable.Task) bool { return t.ToolCallID == callID }) {
			continue
		}
		wg.Go(func() { e.cancelUnnamed(log, rec, owner, a, ids) })
	}
	wg.Wait()
	if changed {
		if doc, err := json.Marshal(&work); err == nil {
			if err := e.cfg.Store.SaveRunWork(cctx, rec.ThreadID, rec.RunID, rec.Epoch, doc); err != nil {
				log.Warn("store: save the cancelled work", "err", err)
			}
		}
	}
}

// recRef is the journal's reference to a run record, under the record's epoch.
func recRef(rec store.RunRecord) durable.RunRef {
	return durable.RunRef{ThreadID: rec.ThreadID, RunID: rec.RunID, Epoch: rec.Epoch}
}
