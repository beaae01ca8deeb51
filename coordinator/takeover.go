package coordinator

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/baton-dev/baton/a2a"
	"github.com/baton-dev/baton/agui"
	"github.com/baton-dev/baton/durable"
	"github.com/baton-dev/baton/failure"
	"github.com/baton-dev/baton/llm"
	"github.com/baton-dev/baton/store"
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

// takeOverLapsed takes over the runs of other replicas whose lease lapsed (all of them
// with anyLease, at the start of a single process) and continues them here.
//
// A dead replica leaves all its runs lapsing at about the same time: batches are claimed
// one after another while they come back full (up to takeoverRounds per tick; the next
// tick goes on), and the runs of a batch are resumed several at a time, so that the runs
// past the first few do not wait for the next tick or for the others' store reads.
func (e *Engine) takeOverLapsed(anyLease bool) {
	began := time.Now()
	for round := range takeoverRounds {
		e.mu.Lock()
		closing := e.closing
		e.mu.Unlock()
		if closing {
			return
		}
		ctx, cancel := context.WithTimeout(context.Background(), storeWriteTimeout)
		if round == 0 {
			e.retryTakeovers(ctx)
		}
		if !anyLease && !e.leases.MayClaim(e.cfg.Lease) {
			// Not a lease of unbroken contact with the store yet: a lapsed lease may be one
			// that its live owner could not renew during an outage (fencing.go).
			cancel()
			return
		}
		sent := time.Now()
		runs, err := e.cfg.Store.TakeOverRuns(ctx, e.cfg.Replica, e.cfg.Lease, reapBatch, anyLease)
		if err != nil {
			cancel()
			e.log.Warn("store: take over lapsed runs", "err", err)
			return
		}
		// Each run was claimed under its own epoch, and its resumption touches only its
		// own rows and its thread's entry (under e.mu): no order among them is needed.
		inParallel(len(runs), takeoverWorkers, func(i int) { e.takeOver(ctx, runs[i], sent) })
		cancel()
		// The heartbeat waits for this look (same goroutine): no further batch once the
		// look has taken half a heartbeat, so this replica's own leases are renewed in time
		// (at the start of a single process, anyLease, there are none yet).
		if len(runs) < reapBatch || (!anyLease && e.cfg.Heartbeat > 0 && time.Since(began) >= e.cfg.Heartbeat/2) {
			return
		}
	}
}

// takeoverRounds bounds the batches of lapsed runs claimed per tick; takeoverWorkers, the
// runs of a batch resumed at once (each reads its log and writes journal steps).
const (
	takeoverRounds  = 8
	takeoverWorkers = 8
)

// inParallel calls f(0) to f(n-1), at most limit at a time, and returns when all returned.
func inParallel(n, limit int, f func(i int)) {
	sem := make(chan struct{}, limit)
	var wg sync.WaitGroup
	for i := range n {
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			f(i)
		})
	}
	wg.Wait()
}

// retryTakeovers tries again the runs this replica took over but could not start (its
// store failed): they are this replica's, so no other replica takes them while its
// heartbeat renews their leases.
func (e *Engine) retryTakeovers(ctx context.Context) {
	e.mu.Lock()
	pending := e.adopting
	e.adopting = nil
	e.mu.Unlock()
	for _, rec := range pending {
		cur, err := e.cfg.Store.GetRun(ctx, rec.ThreadID, rec.RunID)
		if err != nil {
			if !errors.Is(err, store.ErrNotFound) {
				e.mu.Lock()
				if e.adopting == nil {
					e.adopting = map[string]store.RunRecord{}
				}
				e.adopting[runKey(rec.ThreadID, rec.RunID)] = rec
				e.mu.Unlock()
			}
			continue
		}
		if cur.Replica == e.cfg.Replica && cur.State == store.RunRunning {
			// Its lease counts from the last heartbeat that renewed it.
			e.takeOver(ctx, *cur, e.leases.Last())
		}
	}
}

// takeOver continues rec, a run this replica has just become the owner of; a run that
// cannot continue is ended with RUN_ERROR and its remote tasks are cancelled. claimed is
// when the claim that renewed its lease was sent.
func (e *Engine) takeOver(ctx context.Context, rec store.RunRecord, claimed time.Time) {
	log := e.log.With("thread_id", rec.ThreadID, "run_id", rec.RunID, "takeover", true)
	var work durable.Work
	if len(rec.Work) > 0 {
		if err := json.Unmarshal(rec.Work, &work); err != nil {
			log.Warn("takeover: unreadable work document")
			e.endTakenOver(ctx, rec, work, "its saved state is unreadable")
			return
		}
	}
	evs, err := durable.ReadLog(ctx, e.cfg.Store, rec.ThreadID, rec.RunID)
	if err != nil {
		// Not continued now, not ended either: this replica owns the run and renews its
		// lease, so it tries again at its next heartbeat (retryTakeovers).
		log.Warn("takeover: read the event log; trying again at the next heartbeat", "err", err)
		e.adoptLater(rec)
		return
	}
	if terminal := durable.TerminalState(evs); terminal != "" {
		// The run had ended; only its record was not updated.
		if err := e.cfg.Store.EndRun(ctx, rec.ThreadID, rec.RunID, rec.Epoch, terminal); err != nil {
			log.Warn("store: end a finished run taken over", "err", err)
		}
		return
	}
	to, why := e.decodeTakeover(work)
	if why != "" {
		log.Warn("takeover: the run cannot continue", "why", why)
		e.endTakenOver(ctx, rec, work, why)
		return
	}
	var in agui.RunAgentInput
	if err := json.Unmarshal(to.cp.Input, &in); err != nil || in.ThreadID != rec.ThreadID || in.RunID != rec.RunID {
		e.endTakenOver(ctx, rec, work, "its saved input is unreadable")
		return
	}
	r := e.restoredRun(&in, to, work, evs, log)
	e.own(r, rec.Epoch, claimed)
	e.startTakenOver(ctx, rec, work, r, to, log)
}

// adoptLater keeps a run whose log could not be read for the next heartbeat
// (retryTakeovers): this replica owns it and renews its lease meanwhile.
func (e *Engine) adoptLater(rec store.RunRecord) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.adopting == nil {
		e.adopting = map[string]store.RunRecord{}
	}
	e.adopting[runKey(rec.ThreadID, rec.RunID)] = rec
}

// restoredRun is the Run of a run taken over, its stream state as the dead replica left
// it: numbering, what is open, and the messages its part of the run adds to the thread.
func (e *Engine) restoredRun(in *agui.RunAgentInput, to *takenOver, work durable.Work, evs []store.Event, log *slog.Logger) *Run {
	r := newRun(e, in)
	r.owner = to.cp.Owner
	r.resumed = to
	// Not even RUN_STARTED was stored: the run starts its stream here.
	r.resumed.fresh = len(evs) == 0
	to.started, to.resulted = map[string]bool{}, map[string]bool{}
	// Nobody streams this run live: its events go to the log, where reconnecting clients
	// follow it (on this replica they are woken at each append).
	r.watch.n, r.watch.liveGone = 0, true
	r.q.abandon()
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
func (e *Engine) startTakenOver(ctx context.Context, rec store.RunRecord, work durable.Work, r *Run, to *takenOver, log *slog.Logger) {
	e.mu.Lock()
	if e.closing {
		// Left to the lease (or to the hand-off's release): another replica continues it.
		e.mu.Unlock()
		r.cancel(nil)
		return
	}
	if cur := e.active[rec.ThreadID]; cur != nil {
		e.mu.Unlock()
		r.cancel(nil)
		log.Warn("takeover: the thread has another run on this replica")
		e.endTakenOver(ctx, rec, work, "its thread is busy here")
		return
	}
	th := e.threads[rec.ThreadID]
	if th == nil {
		th = &thread{owner: to.cp.Owner, tasks: make(map[string]taskRef)}
		e.threads[rec.ThreadID] = th
	}
	for _, t := range work.A2A {
		if _, known := th.tasks[t.TaskID]; !known && len(th.tasks) < maxTasksPerThread {
			th.tasks[t.TaskID] = taskRef{agent: t.Agent, contextID: t.ContextID, state: a2a.State(t.State)}
		}
	}
	r.startTrace(context.Background())
	e.active[rec.ThreadID] = r
	e.mu.Unlock()
	log.Info("run taken over; continuing it here", "from_seq", r.elog.Seq(), "turn_calls", len(work.Results))
	// The previous owner's unfinished steps first, then the takeover itself.
	if err := e.journal.MarkInDoubtAfterTakeover(ctx, recRef(rec)); errors.Is(err, store.ErrFenced) {
		// Taken over again since: the run stops here as soon as it starts, cancelling
		// nothing.
		r.moved("the store refused to mark its steps in doubt")
	}
	r.step(store.StepTakeover, e.cfg.Replica, "", store.StepEnd{Outcome: store.StepOK, Detail: "run taken over from its checkpoint; continued here"})
	e.wg.Add(1)
	e.running.Add(1)
	go func() {
		defer e.wg.Done()
		defer e.running.Add(-1)
		defer r.elog.RunEnded() // before wg.Done: the log's writer joins e.wg first
		r.execute()
	}()
}

// decodeTakeover reads the checkpoint; why is not empty when the run cannot continue.
func (e *Engine) decodeTakeover(work durable.Work) (to *takenOver, why string) {
	if len(work.Checkpoint) == 0 {
		return nil, "it has no checkpoint"
	}
	to = &takenOver{work: work}
	if err := json.Unmarshal(work.Checkpoint, &to.cp); err != nil || to.cp.V != checkpointVersion || len(to.cp.Input) == 0 || string(to.cp.Input) == "null" {
		return nil, "its checkpoint is unreadable"
	}
	if len(to.cp.Conv) > 0 {
		if err := json.Unmarshal(to.cp.Conv, &to.conv); err != nil || to.conv == nil {
			return nil, "its checkpoint is unreadable"
		}
		if len(to.cp.State) > 0 {
			if err := json.Unmarshal(to.cp.State, &to.fs); err != nil {
				return nil, "its checkpoint is unreadable"
			}
		}
	}
	for _, t := range work.A2A {
		if !a2a.State(t.State).Terminal() && e.agents[t.Agent] == nil {
			return nil, fmt.Sprintf("its sub-agent %q is not configured here", t.Agent)
		}
	}
	if to.fs.Active >= hardStopAfter(e.cfg.Limits.MaxRunTime) {
		return nil, "its time limit has passed"
	}
	return to, ""
}

// endTakenOver ends a run taken over that cannot continue: its remote tasks are cancelled,
// its log ends with RUN_ERROR{RUN_LOST} and its record with the error outcome (not RunLost,
// which would hand it out for cleanup once more).
func (e *Engine) endTakenOver(ctx context.Context, rec store.RunRecord, work durable.Work, why string) {
	if err := e.journal.MarkInDoubtAfterTakeover(ctx, recRef(rec)); errors.Is(err, store.ErrFenced) {
		// Another replica took the run over since: its work is that replica's to follow,
		// not to be cancelled from here.
		e.log.Warn("takeover: the run has a newer owner; leaving it", "thread_id", rec.ThreadID, "run_id", rec.RunID)
		return
	}
	e.journal.Record(durable.RunRef{ThreadID: rec.ThreadID, RunID: rec.RunID}, store.StepTakeover, e.cfg.Replica, "", store.StepEnd{Outcome: store.StepError, Detail: "run taken over but not continued: " + why})
	e.cancelWork(rec, work)
	e.endLostLog(ctx, rec.ThreadID, rec.RunID, rec.Epoch, "The run was interrupted and could not be continued: "+why+".")
	if err := e.cfg.Store.EndRun(ctx, rec.ThreadID, rec.RunID, rec.Epoch, string(OutcomeError)); err != nil {
		e.log.Warn("store: end a run that could not be taken over", "thread_id", rec.ThreadID, "run_id", rec.RunID, "err", err)
	}
}

// cancelWork cancels, in parallel, the run's A2A tasks its work document lists as not
// terminal, and records them as canceled so that nobody cancels them again.
func (e *Engine) cancelWork(rec store.RunRecord, work durable.Work) {
	log := e.log.With("thread_id", rec.ThreadID, "run_id", rec.RunID)
	owner := workOwner(work)
	cctx, cancel := context.WithTimeout(context.Background(), e.cfg.CancelTimeout)
	defer cancel()
	var wg sync.WaitGroup
	changed := false
	for i := range work.A2A {
		t := &work.A2A[i]
		a := e.agents[t.Agent]
		if a == nil || a2a.State(t.State).Terminal() {
			continue
		}
		t.State, changed = string(a2a.StateCanceled), true
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
