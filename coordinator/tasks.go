package coordinator

import (
	"context"
	"encoding/json"

	"github.com/baton-dev/baton/durable"
	"github.com/baton-dev/baton/subagent"
)

// Tasks belong to threads: the A2A tasks a thread started are recorded with the thread in
// memory, saved with its suspension, and kept in the store with each run's work document
// (read back by loadStoredTasks after a restart or on another replica); a task_id from the
// model continues only one of those (checkContinuation).

type taskRef struct {
	agent     string
	contextID string
	state     subagent.State
}

func (e *Engine) rememberTask(threadID, taskID string, ref taskRef) {
	if taskID == "" {
		return
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if th := e.threads[threadID]; th != nil {
		if _, known := th.tasks[taskID]; known || len(th.tasks) < maxTasksPerThread {
			th.tasks[taskID] = ref
		}
	}
	// The run's work document in the store follows every task and state it sees.
	if r := e.active[threadID]; r != nil {
		r.elog.NoteTask(durable.Task{Agent: ref.agent, TaskID: taskID, ContextID: ref.contextID, State: string(ref.state)})
	}
}

// threadTasks returns the tasks the thread started, to be saved with its suspension.
func (e *Engine) threadTasks(threadID string) map[string]TaskRecord {
	e.mu.Lock()
	defer e.mu.Unlock()
	th := e.threads[threadID]
	if th == nil || len(th.tasks) == 0 {
		return nil
	}
	out := make(map[string]TaskRecord, len(th.tasks))
	for id, ref := range th.tasks {
		out[id] = TaskRecord{Agent: ref.agent, ContextID: ref.contextID, State: ref.state}
	}
	return out
}

// restoreTasks records tasks saved with the thread's suspension (after a restart, or on
// another replica), without overwriting what this process knows newer.
func (e *Engine) restoreTasks(threadID string, tasks map[string]TaskRecord) {
	e.mu.Lock()
	defer e.mu.Unlock()
	th := e.threads[threadID]
	if th == nil {
		return
	}
	for id, rec := range tasks {
		if _, known := th.tasks[id]; !known && len(th.tasks) < maxTasksPerThread {
			th.tasks[id] = taskRef{agent: rec.Agent, contextID: rec.ContextID, state: rec.State}
		}
	}
}

// maxTasksPerThread bounds the tasks remembered per thread.
const maxTasksPerThread = 1000

// TaskRecord is an A2A task a thread started, as saved with the thread's state.
type TaskRecord struct {
	Agent     string         `json:"agent"`
	ContextID string         `json:"contextId,omitempty"`
	State     subagent.State `json:"state"`
}

func (e *Engine) lookupTask(threadID, taskID string) (taskRef, bool) {
	e.mu.Lock()
	defer e.mu.Unlock()
	th := e.threads[threadID]
	if th == nil {
		return taskRef{}, false
	}
	ref, ok := th.tasks[taskID]
	return ref, ok
}

// storedTaskRuns bounds how many of a thread's earlier runs are read for its tasks: a task
// the model continues was started a few turns ago, not a hundred runs back.
const storedTaskRuns = 50

// loadStoredTasks records the A2A tasks the thread's earlier runs saved in the store (each
// run's work document) into the thread's memory, without overwriting what this process knows
// newer. It is how a task stays the thread's after a restart, an eviction from memory, or
// on another replica when the thread was not parked. A store error leaves the thread as it
// was: the continuation is then refused, which fails closed.
func (e *Engine) loadStoredTasks(ctx context.Context, threadID string) {
	runs, err := e.cfg.Store.ThreadRuns(ctx, threadID, storedTaskRuns)
	if err != nil {
		e.log.Warn("reading the thread's earlier tasks", "thread_id", threadID, "err", err)
		return
	}
	tasks := map[string]TaskRecord{}
	for i := len(runs) - 1; i >= 0; i-- { // oldest first, so a newer state wins
		var w durable.Work
		if len(runs[i].Work) == 0 || json.Unmarshal(runs[i].Work, &w) != nil {
			continue
		}
		for _, t := range w.A2A {
			if t.TaskID != "" {
				tasks[t.TaskID] = TaskRecord{Agent: t.Agent, ContextID: t.ContextID, State: subagent.State(t.State)}
			}
		}
	}
	e.restoreTasks(threadID, tasks)
}
