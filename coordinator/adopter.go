package coordinator

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"

	"github.com/baton-dev/baton/agui"
	"github.com/baton-dev/baton/durable"
	"github.com/baton-dev/baton/store"
	"github.com/baton-dev/baton/subagent"
)

// adoption is one run that the engine's takeover (durable.Takeover) claimed from a replica
// whose lease lapsed, being continued here (Engine.Adopt): how to continue a run from its
// checkpoint is the run loop's, the claim, its batches and its retries are durable's.
type adoption struct {
	e *Engine
	// rec is the run's record under the epoch of the claim, work its work document as
	// read from the record (empty when it had none; what could be read when unreadable).
	rec  store.RunRecord
	work durable.Work
	log  *slog.Logger
}

// adopt continues the claimed run c here, from the checkpoint its work document holds and
// the stream state its log (which has not ended) leaves; for a run that cannot continue it
// returns a *durable.NotContinued (the takeover ends it with RUN_ERROR and cancels its
// remote tasks).
func (a *adoption) adopt(ctx context.Context, c durable.Claim) error {
	e, rec, log := a.e, a.rec, a.log
	if len(rec.Work) > 0 {
		if err := json.Unmarshal(rec.Work, &a.work); err != nil {
			log.Warn("takeover: unreadable work document")
			return a.notContinued("its saved state is unreadable")
		}
	}
	work := a.work
	to, why := a.decodeTakeover(ctx, work)
	if why != "" {
		log.Warn("takeover: the run cannot continue", "why", why)
		return a.notContinued(why)
	}
	var in agui.RunAgentInput
	if err := json.Unmarshal(to.cp.Input, &in); err != nil || in.ThreadID != rec.ThreadID || in.RunID != rec.RunID {
		return a.notContinued("its saved input is unreadable")
	}
	in.Depth, in.Budget = to.cp.Depth, to.cp.Budget // not part of the input's JSON
	if to.cp.Prepended && to.conv == nil {
		if err := e.records.RestoreHistory(ctx, &in); err != nil {
			log.Warn("takeover: the thread's history could not be read", "err", err)
			return a.notContinued("its thread's history could not be read")
		}
	}
	r := a.restoredRun(&in, to, c.Log)
	r.dur.own(rec.Epoch, c.Sent)
	return a.startTakenOver(ctx, r, to)
}

// restoredRun is the Run of a run taken over, its stream state as the dead replica left
// it: numbering, what is open, and the messages its part of the run adds to the thread.
func (a *adoption) restoredRun(in *agui.RunAgentInput, to *takenOver, evs []store.Event) *Run {
	e, work, log := a.e, a.work, a.log
	r := newRun(e, in)
	r.owner = to.cp.Owner
	r.dur.resumed = to
	r.dur.stored = to.stored
	// Not even RUN_STARTED was stored: the run starts its stream here.
	r.dur.resumed.fresh = len(evs) == 0
	to.started, to.resulted = map[string]bool{}, map[string]bool{}
	// Nobody streams this run live: its events go to the log, where reconnecting clients
	// follow it (on this replica they are woken at each append).
	r.stream.attached.n, r.stream.attached.liveGone = 0, true
	r.stream.q.abandon()
	// The stream's state as the dead replica left it: numbering, what is open, and the
	// messages its part of the run adds to the thread (stored when the run ends).
	restored := make([]agui.Event, 0, len(evs))
	for _, ev := range evs {
		if ae := storedEvent(ev.Data); ae != nil {
			if err := r.seq.Restore(ae); err != nil {
				log.Debug("takeover: stored event not restored", "seq", ev.Seq, "err", err)
			}
			restored = append(restored, ae)
			switch v := ae.(type) {
			case *agui.ToolCallStart:
				to.started[v.ToolCallID] = true
			case *agui.ToolCallResult:
				to.resulted[v.ToolCallID] = true
				to.loggedResult(v.ToolCallID, v.Content)
			}
		}
	}
	// The numbering goes on densely from the log: a live stream shows only events the log
	// has (eventQueue.gated), and the previous owner can store nothing more once the claim
	// moved the epoch on, so no client holds an id past the log's last.
	r.elog.Restore(work, restored, durable.LastSeq(evs))
	r.begun.Store(true)
	return r
}

// startTakenOver registers a restored run as the thread's active run and executes it,
// unless this replica is closing (the lease or the hand-off passes it on) or the thread is
// busy here.
func (a *adoption) startTakenOver(ctx context.Context, r *Run, to *takenOver) error {
	e, rec, work, log := a.e, a.rec, a.work, a.log
	e.mu.Lock()
	if e.closing {
		// Left to the lease (or to the hand-off's release): another replica continues it.
		e.mu.Unlock()
		r.cancel(nil)
		return nil
	}
	if cur := e.active[rec.ThreadID]; cur != nil {
		e.mu.Unlock()
		r.cancel(nil)
		log.Warn("takeover: the thread has another run on this replica")
		return a.notContinued("its thread is busy here")
	}
	th := e.threads[rec.ThreadID]
	if th == nil {
		th = &thread{owner: to.cp.Owner}
		e.threads[rec.ThreadID] = th
		e.tasks.open(rec.ThreadID)
	}
	for _, t := range work.A2A {
		e.tasks.add(rec.ThreadID, t.TaskID, taskRef{agent: t.Agent, contextID: t.ContextID, state: subagent.State(t.State)})
	}
	// A run taken over has no request here: its trace starts without a parent.
	r.startTrace(context.Background())
	e.active[rec.ThreadID] = r
	e.mu.Unlock()
	log.Info("run taken over; continuing it here", "from_seq", r.elog.Seq(), "turn_calls", len(work.Results))
	// The previous owner's unfinished steps first, then the takeover itself.
	if err := e.journal.MarkInDoubtAfterTakeover(ctx, recRef(rec)); errors.Is(err, store.ErrFenced) {
		// Taken over again since: the run stops here as soon as it starts, cancelling
		// nothing.
		r.dur.Moved("the store refused to mark its steps in doubt")
	}
	r.dur.step(store.StepTakeover, e.cfg.Replica, "", store.StepEnd{Outcome: store.StepOK, Detail: "run taken over from its checkpoint; continued here"})
	e.wg.Add(1)
	e.running.Add(1)
	go func() {
		defer e.wg.Done()
		defer e.running.Add(-1)
		defer r.elog.RunEnded() // before wg.Done: the log's writer joins e.wg first
		r.execute()
	}()
	return nil
}

// decodeTakeover reads the checkpoint (and the thread's messages it names); why is not
// empty when the run cannot continue.
func (a *adoption) decodeTakeover(ctx context.Context, work durable.Work) (to *takenOver, why string) {
	e := a.e
	if len(work.Checkpoint) == 0 {
		return nil, "it has no checkpoint"
	}
	cp, err := durable.DecodeCheckpoint(work.Checkpoint)
	if err != nil {
		return nil, "its checkpoint is unreadable"
	}
	to = &takenOver{cp: cp, work: work}
	if len(to.cp.Conv) > 0 {
		// The messages the checkpoint names are read from the thread (convrefs.go).
		conv, err := decodeConv(ctx, to.cp.Conv, &to.stored, func(ctx context.Context, ids []string) (map[string]agui.Message, error) {
			return e.records.StoredMessages(ctx, a.rec.ThreadID, ids)
		})
		switch {
		case errors.Is(err, durable.ErrCheckpoint), errors.Is(err, errConvRef):
			return nil, "its checkpoint is unreadable"
		case err != nil:
			return nil, "its thread's history could not be read"
		}
		to.conv = conv
		if len(to.cp.State) > 0 {
			if err := json.Unmarshal(to.cp.State, &to.fs); err != nil {
				return nil, "its checkpoint is unreadable"
			}
		}
	}
	for _, t := range work.A2A {
		if !subagent.State(t.State).Terminal() && e.agents[t.Agent] == nil {
			return nil, fmt.Sprintf("its sub-agent %q is not configured here", t.Agent)
		}
	}
	if to.fs.Active >= hardStopAfter(e.cfg.Limits.MaxRunTime) {
		return nil, "its time limit has passed"
	}
	return to, ""
}

// notContinued is the takeover's answer for a run that cannot continue here (why): the
// takeover ends it (durable.Takeover: its steps in doubt, its remote tasks cancelled
// through Engine.CancelWork, its log ended with RUN_ERROR{RUN_LOST}, its record with the
// error outcome).
func (a *adoption) notContinued(why string) error {
	return &durable.NotContinued{Why: why, Work: a.work}
}
