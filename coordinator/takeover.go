package coordinator

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/baton-dev/baton/a2a"
	"github.com/baton-dev/baton/agui"
	"github.com/baton-dev/baton/bridge"
	"github.com/baton-dev/baton/llm"
	"github.com/baton-dev/baton/prompts"
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

// checkpointVersion is the version of the checkpoint document; a replica refuses (and
// ends) a run whose checkpoint it does not know.
const checkpointVersion = 1

// checkpoint is what a replica needs to continue a run (runWork.Checkpoint).
type checkpoint struct {
	V     int    `json:"v"`
	Owner string `json:"owner,omitempty"`
	// Input is the run's input; its messages are left out once Conv holds the history.
	Input json.RawMessage `json:"input"`
	// Conv is the model history after the last completed turn; absent until the run's
	// setup is done (the run then starts over from its input).
	Conv json.RawMessage `json:"conv,omitempty"`
	// State is the failure state (counters, lessons, loop signatures, budget use, active
	// time) when the checkpoint was taken.
	State json.RawMessage `json:"state,omitempty"`
	// Seq is the event log's last number when the checkpoint was taken (informative: the
	// replica continues after the log's actual end).
	Seq int64 `json:"seq"`
}

// noteCheckpoint records a checkpoint of the run with conv (nil before setup), replacing
// the previous one and the results of its calls.
func (r *Run) noteCheckpoint(conv []llm.Message) {
	in := *r.in
	cp := checkpoint{V: checkpointVersion, Owner: r.owner}
	if conv != nil {
		in.Messages = nil
		cp.Conv = mustJSON(conv)
		fs := r.fs
		fs.Active += time.Since(r.start)
		cp.State = mustJSON(&fs)
	}
	b, err := json.Marshal(&in)
	if err != nil {
		r.log.Warn("checkpoint: input not encodable; the run cannot be taken over", "err", err)
		return
	}
	cp.Input = b
	r.elog.noteCheckpoint(mustJSON(&cp))
}

// noteResult records the result of one of the current turn's tool calls.
func (r *Run) noteResult(toolCallID string, o toolOutcome) {
	if len(o.interrupts) > 0 || toolCallID == "" {
		return
	}
	r.elog.noteResult(toolCallID, o.ToolResult)
}

func (l *runLog) noteCheckpoint(doc json.RawMessage) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.frozen {
		return
	}
	l.work.Checkpoint, l.work.Results = doc, nil
	l.workDirty = true
	l.kickLocked()
}

func (l *runLog) noteResult(toolCallID string, res ToolResult) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.frozen {
		return
	}
	if l.work.Results == nil {
		l.work.Results = map[string]ToolResult{}
	}
	if len(l.work.Results) < maxWorkItems {
		l.work.Results[toolCallID] = res
		l.workDirty = true
	}
	l.kickLocked()
}

func (l *runLog) kickLocked() { l.wake() }

// resumeAction is what a run taken over does with a call of its last turn.
type resumeAction int

const (
	// resumeResult: the call's result was recorded; it is used as it is.
	resumeResult resumeAction = iota
	// resumeFollow: an A2A task whose id was recorded: followed by id, never sent again.
	resumeFollow
	// resumeReissue: a call that may be made again: an idempotent or read-only MCP
	// tool, or one without effects outside the run (ask_user, a frontend tool, a call
	// that was refused or needs approval and so was never sent).
	resumeReissue
	// resumeInDoubt: a call that may or may not have run: the model is told so.
	resumeInDoubt
)

func (a resumeAction) String() string {
	return [...]string{"result", "follow", "reissue", "in_doubt"}[a]
}

// resumeDecision decides what a run taken over does with call c of its last turn, from
// what the work document recorded; needsApproval: the call needs the user's approval
// (approvals), so the turn only asked for it.
func resumeDecision(t *toolset, c llm.ToolCall, w *runWork, needsApproval bool) (resumeAction, *workTask) {
	if _, ok := w.Results[c.ID]; ok {
		return resumeResult, nil
	}
	if t.isFrontend(c.Name) || needsApproval {
		// Never sent by the turn: a frontend call is the application's, and a call that
		// needs approval only raised its question.
		return resumeReissue, nil
	}
	if _, ok := t.agents[c.Name]; ok {
		for i := range w.A2A {
			if task := &w.A2A[i]; task.ToolCallID == c.ID && task.Agent == c.Name {
				return resumeFollow, task
			}
		}
		// The agent had not named its task when the replica died (or the record was not
		// written yet): the message may have reached it.
		return resumeInDoubt, nil
	}
	if mt, ok := t.mcp[c.Name]; ok {
		if mt.Idempotent {
			return resumeReissue, nil
		}
		return resumeInDoubt, nil
	}
	// ask_user, an unknown tool, or a tool of a server that is gone: nothing was sent.
	return resumeReissue, nil
}

// inDoubtText is the result of a call that may or may not have run before the replica
// that made it died.
func inDoubtText(tool string) string {
	return bridge.Error(fmt.Sprintf("The coordinator running this conversation stopped while the call to %s was in progress, "+
		"so it may or may not have run. Do not assume either: check its effect (or ask the user) before calling it again.", tool))
}

// takeoverSeqGap is how far a run taken over skips ahead in its event numbering: the most
// events a replica holds before they are stored (maxPendingEvents).
const takeoverSeqGap = maxPendingEvents

// takenOver is what a run taken over starts from (Run.resumed).
type takenOver struct {
	cp   checkpoint
	conv []llm.Message // nil: the run starts over from its input
	fs   FailureState
	work runWork
	// fresh: not even RUN_STARTED reached the log; the stream starts here.
	fresh bool
}

// takeOverLapsed takes over the runs of other replicas whose lease lapsed (all of them
// with anyLease, at the start of a single process) and continues them here.
func (e *Engine) takeOverLapsed(anyLease bool) {
	e.mu.Lock()
	closing := e.closing
	e.mu.Unlock()
	if closing {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), storeWriteTimeout)
	defer cancel()
	e.retryTakeovers(ctx)
	runs, err := e.cfg.Store.TakeOverRuns(ctx, e.cfg.Replica, e.cfg.Lease, reapBatch, anyLease)
	if err != nil {
		e.log.Warn("store: take over lapsed runs", "err", err)
		return
	}
	for _, rec := range runs {
		e.takeOver(ctx, rec)
	}
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
			e.takeOver(ctx, *cur)
		}
	}
}

// takeOver continues rec, a run this replica has just become the owner of; a run that
// cannot continue is ended with RUN_ERROR and its remote tasks are cancelled.
func (e *Engine) takeOver(ctx context.Context, rec store.RunRecord) {
	log := e.log.With("thread_id", rec.ThreadID, "run_id", rec.RunID, "takeover", true)
	var work runWork
	if len(rec.Work) > 0 {
		if err := json.Unmarshal(rec.Work, &work); err != nil {
			log.Warn("takeover: unreadable work document")
			e.endTakenOver(ctx, rec, work, "its saved state is unreadable")
			return
		}
	}
	evs, err := e.readLog(ctx, rec.ThreadID, rec.RunID)
	if err != nil {
		// Not continued now, not ended either: this replica owns the run and renews its
		// lease, so it tries again at its next heartbeat (retryTakeovers).
		log.Warn("takeover: read the event log; trying again at the next heartbeat", "err", err)
		e.mu.Lock()
		if e.adopting == nil {
			e.adopting = map[string]store.RunRecord{}
		}
		e.adopting[runKey(rec.ThreadID, rec.RunID)] = rec
		e.mu.Unlock()
		return
	}
	if terminal := terminalOf(evs); terminal != "" {
		// The run had ended; only its record was not updated.
		if err := e.cfg.Store.EndRun(ctx, rec.ThreadID, rec.RunID, terminal); err != nil {
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
	r := newRun(e, &in)
	r.owner = to.cp.Owner
	r.resumed = to
	// Not even RUN_STARTED was stored: the run starts its stream here.
	r.resumed.fresh = len(evs) == 0
	r.elog.work = work
	// Nobody streams this run live: its events go to the log, where reconnecting clients
	// follow it (on this replica they are woken at each append).
	r.watch.n, r.watch.liveGone = 0, true
	r.q.abandon()
	// The stream's state as the dead replica left it: numbering, what is open, and the
	// messages its part of the run adds to the thread (stored when the run ends).
	for _, ev := range evs {
		if ae := storedEvent(ev.Data); ae != nil {
			if err := r.seq.Restore(ae); err != nil {
				log.Debug("takeover: stored event not restored", "seq", ev.Seq, "err", err)
			}
			r.elog.msgs.add(ae)
		}
	}
	// The numbering goes on after a gap: events the dead replica had streamed to a client
	// but not stored yet keep ids that no later event reuses, so that the client,
	// reconnecting with one of them, misses nothing that follows.
	r.elog.seq = lastSeq(evs) + takeoverSeqGap
	r.begun.Store(true)

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
	log.Info("run taken over; continuing it here", "from_seq", r.elog.seq, "turn_calls", len(work.Results))
	e.wg.Add(1)
	e.running.Add(1)
	go func() {
		defer e.wg.Done()
		defer e.running.Add(-1)
		defer r.elog.runEnded() // before wg.Done: the log's writer joins e.wg first
		r.execute()
	}()
}

// decodeTakeover reads the checkpoint; why is not empty when the run cannot continue.
func (e *Engine) decodeTakeover(work runWork) (to *takenOver, why string) {
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
func (e *Engine) endTakenOver(ctx context.Context, rec store.RunRecord, work runWork, why string) {
	e.cancelWork(rec, work)
	e.endLostLog(ctx, rec.ThreadID, rec.RunID, "The run was interrupted and could not be continued: "+why+".")
	if err := e.cfg.Store.EndRun(ctx, rec.ThreadID, rec.RunID, string(OutcomeError)); err != nil {
		e.log.Warn("store: end a run that could not be taken over", "thread_id", rec.ThreadID, "run_id", rec.RunID, "err", err)
	}
}

// cancelWork cancels, in parallel, the run's A2A tasks its work document lists as not
// terminal, and records them as canceled so that nobody cancels them again.
func (e *Engine) cancelWork(rec store.RunRecord, work runWork) {
	log := e.log.With("thread_id", rec.ThreadID, "run_id", rec.RunID)
	owner := work.owner()
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
			if err := e.cancelTask(cctx, owner, a, t.TaskID, log, "lapsed run: task cancelled"); err != nil {
				log.Warn("lapsed run: the cancel of its task failed", "agent", t.Agent, "task_id", t.TaskID, "err", errString(err))
			}
		})
	}
	wg.Wait()
	if changed {
		if doc, err := json.Marshal(&work); err == nil {
			if err := e.cfg.Store.SaveRunWork(cctx, rec.ThreadID, rec.RunID, doc); err != nil {
				log.Warn("store: save the cancelled work", "err", err)
			}
		}
	}
}

// readLog reads a run's whole event log.
func (e *Engine) readLog(ctx context.Context, threadID, runID string) ([]store.Event, error) {
	var out []store.Event
	var last int64
	for {
		evs, err := e.cfg.Store.Events(ctx, threadID, runID, last, store.MaxEventsRead)
		if err != nil {
			return nil, err
		}
		if len(evs) == 0 {
			return out, nil
		}
		out = append(out, evs...)
		last = evs[len(evs)-1].Seq
	}
}

// lastSeq is the number of the last of evs (0 for none).
func lastSeq(evs []store.Event) int64 {
	if n := len(evs); n > 0 {
		return evs[n-1].Seq
	}
	return 0
}

// terminalOf returns the store's end state of a run whose log ends with its terminal
// event, or "".
func terminalOf(evs []store.Event) string {
	if len(evs) == 0 {
		return ""
	}
	var head struct {
		Type    string `json:"type"`
		Outcome *struct {
			Type string `json:"type"`
		} `json:"outcome"`
	}
	if json.Unmarshal(evs[len(evs)-1].Data, &head) != nil {
		return ""
	}
	switch agui.EventType(head.Type) {
	case agui.EventRunFinished:
		if head.Outcome != nil && head.Outcome.Type == agui.OutcomeInterrupt {
			return string(OutcomeInterrupt)
		}
		if head.Outcome != nil && head.Outcome.Type == agui.OutcomeCancelled {
			return string(OutcomeCancelled)
		}
		return string(OutcomeCompleted)
	case agui.EventRunError:
		return string(OutcomeError)
	}
	return ""
}

// storedEvent rebuilds, from a stored event, what the sequencer needs to know of it (what
// it opens and closes) and what the thread's messages are built from (text, tool calls and
// results); nil for other events.
func storedEvent(data json.RawMessage) agui.Event {
	var v struct {
		Delta               string `json:"delta"`
		Content             string `json:"content"`
		ParentMessageID     string `json:"parentMessageId"`
		Type                string `json:"type"`
		ThreadID            string `json:"threadId"`
		RunID               string `json:"runId"`
		MessageID           string `json:"messageId"`
		Role                string `json:"role"`
		ToolCallID          string `json:"toolCallId"`
		ToolCallName        string `json:"toolCallName"`
		StepName            string `json:"stepName"`
		SubagentRunID       string `json:"subagentRunId"`
		ParentSubagentRunID string `json:"parentSubagentRunId"`
		Name                string `json:"name"`
	}
	if json.Unmarshal(data, &v) != nil {
		return nil
	}
	switch agui.EventType(v.Type) {
	case agui.EventRunStarted:
		return &agui.RunStarted{ThreadID: v.ThreadID, RunID: v.RunID}
	case agui.EventTextMessageStart:
		return &agui.TextMessageStart{MessageID: v.MessageID, Role: v.Role, SubagentRunID: v.SubagentRunID}
	case agui.EventTextMessageContent:
		return &agui.TextMessageContent{MessageID: v.MessageID, Delta: v.Delta, SubagentRunID: v.SubagentRunID}
	case agui.EventTextMessageEnd:
		return &agui.TextMessageEnd{MessageID: v.MessageID, SubagentRunID: v.SubagentRunID}
	case agui.EventToolCallStart:
		return &agui.ToolCallStart{ToolCallID: v.ToolCallID, ToolCallName: v.ToolCallName, ParentMessageID: v.ParentMessageID, SubagentRunID: v.SubagentRunID}
	case agui.EventToolCallArgs:
		return &agui.ToolCallArgs{ToolCallID: v.ToolCallID, Delta: v.Delta, SubagentRunID: v.SubagentRunID}
	case agui.EventToolCallResult:
		return &agui.ToolCallResult{MessageID: v.MessageID, ToolCallID: v.ToolCallID, Content: v.Content, Role: v.Role, SubagentRunID: v.SubagentRunID}
	case agui.EventToolCallEnd:
		return &agui.ToolCallEnd{ToolCallID: v.ToolCallID, SubagentRunID: v.SubagentRunID}
	case agui.EventStepStarted:
		return &agui.StepStarted{StepName: v.StepName, SubagentRunID: v.SubagentRunID}
	case agui.EventStepFinished:
		return &agui.StepFinished{StepName: v.StepName, SubagentRunID: v.SubagentRunID}
	case agui.EventSubagentStarted:
		return &agui.SubagentStarted{SubagentRunID: v.SubagentRunID, Name: v.Name, ParentSubagentRunID: v.ParentSubagentRunID}
	case agui.EventSubagentFinished:
		return &agui.SubagentFinished{SubagentRunID: v.SubagentRunID}
	case agui.EventSubagentError:
		return &agui.SubagentError{SubagentRunID: v.SubagentRunID}
	}
	return nil
}

// setupTakenOver is setup for a run taken over: the failure state, guard, loop detector
// and system prompt as the checkpoint left them, the stream's open items that cannot go on
// closed, and the calls of the last turn settled (settleTurn). done is true when the run
// has already ended.
func (r *Run) setupTakenOver(ctx context.Context, tools *toolset) (conv []llm.Message, system string, done bool, reason EndReason) {
	to := r.resumed
	following := map[string]bool{}
	if to.conv != nil {
		for _, c := range pendingCalls(to.conv) {
			if act, task := resumeDecision(tools, c, &to.work, r.e.cfg.Approvals.needsApproval(tools, c)); act == resumeFollow {
				following[task.SubagentRunID] = true
			}
		}
	}
	if err := r.seq.CloseOpen(func(id string) bool { return following[id] }); err != nil {
		r.log.Warn("takeover: closing the stream's open items", "err", err)
	}
	if to.conv == nil {
		// Cut before its first checkpoint: nothing but the model was called; the run
		// starts over from its input.
		return r.setup(ctx, tools)
	}
	r.fs = to.fs
	r.resetHardStop()
	r.guard = r.newGuard(tools)
	r.loops = r.fs.Loops(r.e.cfg.Loop)
	system, err := prompts.System(r.e.systemInput(r.in, tools))
	if err != nil {
		r.log.Error("system prompt", "err", err)
		r.seq.Fail("INTERNAL", "The coordinator could not prepare the request.")
		return nil, "", true, ended(OutcomeError, "system prompt")
	}
	conv = to.conv
	if calls := pendingCalls(conv); len(calls) > 0 {
		conv, done, reason = r.settleTurn(ctx, tools, conv, calls)
	}
	return conv, system, done, reason
}

// pendingCalls returns the tool calls of the last assistant message of conv when the
// conversation ends with that turn (its calls then have no result in conv yet).
func pendingCalls(conv []llm.Message) []llm.ToolCall {
	if n := len(conv); n > 0 && conv[n-1].Role == llm.RoleAssistant {
		return conv[n-1].ToolCalls
	}
	return nil
}

// settleTurn finishes the tool round of the turn the run was in when it was taken over:
// each call is settled by resumeDecision, then the round ends as any other (toolRound).
func (r *Run) settleTurn(ctx context.Context, tools *toolset, conv []llm.Message, calls []llm.ToolCall) ([]llm.Message, bool, EndReason) {
	work := &r.resumed.work
	var backend []llm.ToolCall
	var pending []string
	for _, c := range calls {
		if tools.isFrontend(c.Name) {
			pending = append(pending, c.ID)
			continue
		}
		backend = append(backend, c)
	}
	outcomes := make([]toolOutcome, len(backend))
	sent := make([]bool, len(backend))
	var again []int
	var predicted []Failure
	var wg sync.WaitGroup
	for i, c := range backend {
		act, task := resumeDecision(tools, c, work, r.e.cfg.Approvals.needsApproval(tools, c))
		r.log.Info("takeover: settling a call of the interrupted turn", "tool", c.Name, "tool_call_id", c.ID, "action", act.String())
		switch act {
		case resumeResult:
			outcomes[i] = toolOutcome{ToolResult: work.Results[c.ID]}
			sent[i] = true
		case resumeInDoubt:
			outcomes[i] = taggedOutcome(bridge.TagError, inDoubtText(c.Name))
			sent[i] = true
			r.emitResult(ctx, c.ID, outcomes[i])
		case resumeFollow:
			sent[i] = true
			a := tools.agents[c.Name]
			wg.Go(func() {
				req := a2a.Request{TaskID: task.TaskID, ContextID: task.ContextID}
				outcomes[i] = r.traceTool(ctx, tools, c, func(ctx context.Context) toolOutcome {
					return r.exchange(ctx, tools, a, c.ID, task.SubagentRunID, req, true)
				})
				r.emitResult(ctx, c.ID, outcomes[i])
			})
		case resumeReissue:
			again = append(again, i)
		}
	}
	if len(again) > 0 {
		sub := make([]llm.ToolCall, len(again))
		for j, i := range again {
			sub[j] = backend[i]
		}
		outs, snt, pred := r.dispatch(ctx, tools, sub)
		for j, i := range again {
			outcomes[i], sent[i] = outs[j], snt[j]
		}
		predicted = pred
	}
	wg.Wait()
	conv, done, reason := r.afterTools(ctx, conv, backend, outcomes, sent, predicted, pending)
	if done {
		return conv, true, reason
	}
	if len(pending) > 0 {
		r.seq.Finish(r.ThreadID, r.RunID, &agui.Outcome{Type: agui.OutcomeSuccess, PendingToolCallIDs: pending}, nil)
		return conv, true, ended(OutcomeCompleted, "frontend tools pending")
	}
	return conv, false, EndReason{}
}

// taskFollower is a Delegate that can follow a task it did not start in this process
// (a2a.Agent.Follow).
type taskFollower interface {
	Follow(ctx context.Context, taskID, contextID string, obs a2a.Observer) (*a2a.Result, error)
}

// followRemote follows task taskID of agent a to its end: by subscription when the client
// can, else by reading it every recoverPoll.
func (r *Run) followRemote(ctx context.Context, a *Agent, taskID, contextID string, obs a2a.Observer) (*a2a.Result, error) {
	if f, ok := a.Client.(taskFollower); ok {
		return f.Follow(ctx, taskID, contextID, obs)
	}
	if obs.Task != nil {
		obs.Task(taskID, contextID)
	}
	for {
		got, err := a.Client.GetTask(ctx, taskID)
		if err != nil {
			return nil, &a2a.TaskError{TaskID: taskID, ContextID: contextID, Err: err}
		}
		if got.State.Terminal() || got.State.Interrupted() {
			return got, nil
		}
		t := time.NewTimer(recoverPoll)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil, &a2a.TaskError{TaskID: taskID, ContextID: contextID, Err: ctx.Err()}
		case <-t.C:
		}
	}
}

// answerMaySent reports whether this run was taken over from a replica that had recorded
// taskID in the run's work: a resume records its task before sending the answer, so that
// replica may have delivered it.
func (r *Run) answerMaySent(taskID string) bool {
	return r.resumed != nil && slices.ContainsFunc(r.resumed.work.A2A, func(w workTask) bool { return w.TaskID == taskID })
}

// subIDAfterTakeover is the sub-agent id for a delegation of a run taken over: a stored
// id that the log already used and that is no longer open (CloseOpen ended it) cannot
// start again, so a new one is made.
func (r *Run) subIDAfterTakeover(subID string) string {
	if r.resumed == nil || subID == "" || slices.Contains(r.seq.Open().Subagents, subID) {
		return subID
	}
	return ""
}

// owner is the principal of the run whose work this is, from its checkpoint; "" (the
// anonymous principal) when it has none or it cannot be read. The cancels of a lost run's
// tasks carry that principal's credentials for agents that require them.
func (w runWork) owner() string {
	var cp struct {
		Owner string `json:"owner"`
	}
	if len(w.Checkpoint) == 0 || json.Unmarshal(w.Checkpoint, &cp) != nil {
		return ""
	}
	return cp.Owner
}
