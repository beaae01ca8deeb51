package coordinator

import (
	"context"
	"encoding/json"
	"errors"

	"github.com/baton-dev/baton/agui"
	"github.com/baton-dev/baton/store"
)

// runWork is a run's downstream work as the store keeps it (runs.work): the A2A tasks it
// delegated to and the MCP calls it made, with what a replica taking the run over needs to
// know (task ids to resubscribe or cancel; whether a call may be sent again). It is one JSON
// document: nothing queries inside it.
type runWork struct {
	A2A []workTask `json:"a2a"`
	MCP []workCall `json:"mcp"`
	// Checkpoint is where a replica taking the run over continues it from (takeover.go),
	// encoded when it was taken; Results are the results of the current turn's tool
	// calls that have ended since (by tool call id).
	Checkpoint json.RawMessage       `json:"checkpoint,omitempty"`
	Results    map[string]ToolResult `json:"results,omitempty"`
}

type workTask struct {
	Agent     string `json:"agent"`
	TaskID    string `json:"taskId"`
	ContextID string `json:"contextId,omitempty"`
	State     string `json:"state"`
	// ToolCallID and SubagentRunID tie the task to the call that started it and to its
	// attribution in the run's stream, for a replica that takes the run over.
	ToolCallID    string `json:"toolCallId,omitempty"`
	SubagentRunID string `json:"subagentRunId,omitempty"`
}

type workCall struct {
	ToolCallID string `json:"toolCallId"`
	Tool       string `json:"tool"`
	// Idempotent: the tool is annotated idempotent or read-only, so it may be re-issued.
	Idempotent bool `json:"idempotent"`
	// State is "started" until the call returns, then "done".
	State string `json:"state"`
}

// maxWorkItems bounds the entries of each list (a run is bounded by max_iterations anyway).
const maxWorkItems = 1000

// noteTask records an A2A task of the run and its latest state.
func (l *runLog) noteTask(agent, taskID, contextID, state, toolCallID, subID string) {
	if taskID == "" {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.frozen {
		return
	}
	for i := range l.work.A2A {
		if w := &l.work.A2A[i]; w.TaskID == taskID {
			w.State = state
			if contextID != "" {
				w.ContextID = contextID
			}
			// A continuation (the model's answer to input-required, the user's on resume)
			// is a new call on the same task: a replica that takes the run over follows
			// the task for that call, not for the one that started it (whose result is in).
			if toolCallID != "" {
				w.ToolCallID = toolCallID
				if subID != "" {
					w.SubagentRunID = subID
				}
			}
			l.workDirty = true
			l.wake()
			return
		}
	}
	if len(l.work.A2A) < maxWorkItems {
		l.work.A2A = append(l.work.A2A, workTask{Agent: agent, TaskID: taskID, ContextID: contextID, State: state,
			ToolCallID: toolCallID, SubagentRunID: subID})
		l.workDirty = true
		l.wake()
	}
}

// noteCall records an MCP call of the run and whether it has returned.
func (l *runLog) noteCall(toolCallID, tool string, idempotent bool, state string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.frozen {
		return
	}
	for i := range l.work.MCP {
		if w := &l.work.MCP[i]; w.ToolCallID == toolCallID {
			w.State = state
			l.workDirty = true
			l.wake()
			return
		}
	}
	if len(l.work.MCP) < maxWorkItems {
		l.work.MCP = append(l.work.MCP, workCall{ToolCallID: toolCallID, Tool: tool, Idempotent: idempotent, State: state})
		l.workDirty = true
		l.wake()
	}
}

// saveWork writes the work document when it changed since the last write. Writes are
// serialised (saveMu), so that an older document never lands after a newer one. A write the
// store did not take leaves the document to write again (the writer retries it); one the
// store refused as fenced stops the run here (fenceOff).
func (l *runLog) saveWork() error {
	l.saveMu.Lock()
	defer l.saveMu.Unlock()
	l.mu.Lock()
	if !l.workDirty || l.fenced {
		l.mu.Unlock()
		return nil
	}
	l.workDirty = false
	doc, err := json.Marshal(&l.work)
	l.mu.Unlock()
	if err != nil {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), storeWriteTimeout)
	defer cancel()
	err = l.st.SaveRunWork(ctx, l.thread, l.run, l.epoch, doc)
	switch {
	case err == nil:
		return nil
	case errors.Is(err, store.ErrFenced):
		l.fenceOff(err)
	default:
		l.log.Warn("store: save run work; trying again", "err", err)
		l.mu.Lock()
		l.workDirty = true
		l.mu.Unlock()
	}
	return err
}

// reapLapsed looks after the runs of replicas that stopped heartbeating: a running run
// whose lease lapsed is taken over and continued here (takeover.go); a run that BeginRun
// marked lost to free its thread (a new run started on it) has its remote tasks cancelled
// and its event log ended with RUN_ERROR{RUN_LOST}, so that nothing is left running at a
// peer without an owner.
func (e *Engine) reapLapsed() {
	e.takeOverLapsed(false)
	ctx, cancel := context.WithTimeout(context.Background(), storeWriteTimeout)
	defer cancel()
	runs, err := e.cfg.Store.ClaimLapsedRuns(ctx, e.cfg.Replica, reapBatch)
	if err != nil {
		e.log.Warn("store: claim lost runs", "err", err)
		return
	}
	for _, run := range runs {
		var work runWork
		if len(run.Work) > 0 {
			if err := json.Unmarshal(run.Work, &work); err != nil {
				e.log.Warn("lost run: unreadable work document", "thread_id", run.ThreadID, "run_id", run.RunID)
			}
		}
		e.cancelWork(run, work)
		e.endLostLog(ctx, run.ThreadID, run.RunID, run.Epoch, "The run was interrupted and did not finish.")
		e.log.Warn("lost run ended: its replica stopped heartbeating and its thread went on", "thread_id", run.ThreadID, "run_id", run.RunID)
	}
}

// reapBatch bounds the lapsed runs one replica claims per heartbeat.
const reapBatch = 50

// endLostLog ends a lapsed run's event log with RUN_ERROR{code:"RUN_LOST", message}, unless
// it already ends with a terminal event. Like a takeover it numbers on from the log's last
// event (a live stream shows only stored events), and a log with nothing stored
// gets its RUN_STARTED first, so that a client reconnecting anywhere sees a whole stream.
func (e *Engine) endLostLog(ctx context.Context, threadID, runID string, epoch int64, message string) {
	evs, err := e.readLog(ctx, threadID, runID)
	if err != nil {
		e.log.Warn("store: read lapsed run's events", "err", err)
		return
	}
	if terminalOf(evs) != "" {
		return
	}
	now := e.cfg.Now().UnixMilli()
	seq := lastSeq(evs)
	var out []store.Event
	if len(evs) == 0 {
		data, err := agui.MarshalEvent(&agui.RunStarted{ThreadID: threadID, RunID: runID, Base: agui.Base{Timestamp: now}})
		if err != nil {
			return
		}
		seq++
		out = append(out, store.Event{Seq: seq, Data: data})
	}
	data, err := agui.MarshalEvent(&agui.RunError{Code: "RUN_LOST", Message: message, Base: agui.Base{Timestamp: now}})
	if err != nil {
		return
	}
	out = append(out, store.Event{Seq: seq + 1, Data: data})
	if err := e.cfg.Store.AppendEvents(ctx, threadID, runID, epoch, out); err != nil {
		e.log.Warn("store: end lapsed run's log", "err", err)
	}
}
