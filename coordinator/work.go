package coordinator

import (
	"context"
	"encoding/json"
)

// runWork is a run's downstream work as the store keeps it (runs.work): the A2A tasks it
// delegated to and the MCP calls it made, with what a replica taking the run over needs to
// know (task ids to resubscribe or cancel; whether a call may be sent again). It is one JSON
// document: nothing queries inside it.
type runWork struct {
	A2A []workTask `json:"a2a"`
	MCP []workCall `json:"mcp"`
}

type workTask struct {
	Agent     string `json:"agent"`
	TaskID    string `json:"taskId"`
	ContextID string `json:"contextId,omitempty"`
	State     string `json:"state"`
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
func (l *runLog) noteTask(agent, taskID, contextID, state string) {
	if taskID == "" {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	for i := range l.work.A2A {
		if w := &l.work.A2A[i]; w.TaskID == taskID {
			w.State = state
			if contextID != "" {
				w.ContextID = contextID
			}
			l.workDirty = true
			return
		}
	}
	if len(l.work.A2A) < maxWorkItems {
		l.work.A2A = append(l.work.A2A, workTask{Agent: agent, TaskID: taskID, ContextID: contextID, State: state})
		l.workDirty = true
	}
}

// noteCall records an MCP call of the run and whether it has returned.
func (l *runLog) noteCall(toolCallID, tool string, idempotent bool, state string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for i := range l.work.MCP {
		if w := &l.work.MCP[i]; w.ToolCallID == toolCallID {
			w.State = state
			l.workDirty = true
			return
		}
	}
	if len(l.work.MCP) < maxWorkItems {
		l.work.MCP = append(l.work.MCP, workCall{ToolCallID: toolCallID, Tool: tool, Idempotent: idempotent, State: state})
		l.workDirty = true
	}
	select {
	case l.kick <- struct{}{}:
	default:
	}
}

// saveWork writes the work document when it changed since the last write.
func (l *runLog) saveWork() {
	l.mu.Lock()
	if !l.workDirty {
		l.mu.Unlock()
		return
	}
	l.workDirty = false
	doc, err := json.Marshal(&l.work)
	l.mu.Unlock()
	if err != nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), storeWriteTimeout)
	defer cancel()
	if err := l.st.SaveRunWork(ctx, l.thread, l.run, doc); err != nil {
		l.log.Warn("store: save run work", "err", err)
	}
}
