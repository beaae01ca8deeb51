package coordinator

import "github.com/baton-dev/baton/a2a"

// Tasks belong to threads: the A2A tasks a thread started are recorded with the thread (and
// saved with its suspension), and a task_id from the model continues only one of those
// (checkContinuation).

type taskRef struct {
	agent     string
	contextID string
	state     a2a.State
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
		r.elog.noteTask(ref.agent, taskID, ref.contextID, string(ref.state))
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
	Agent     string    `json:"agent"`
	ContextID string    `json:"contextId,omitempty"`
	State     a2a.State `json:"state"`
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
