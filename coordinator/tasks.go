package coordinator

import (
	"context"
	"encoding/json"
	"log/slog"
	"sync"

	"github.com/baton-dev/baton/durable"
	"github.com/baton-dev/baton/store"
	"github.com/baton-dev/baton/subagent"
)

// Tasks belong to threads: the A2A tasks a thread started are recorded with the thread in
// memory (taskBook), saved with its suspension, and kept in the store with each run's work
// document (read back by taskBook.load after a restart or on another replica); a task_id
// from the model continues only one of those (checkContinuation).

type taskRef struct {
	agent     string
	contextID string
	state     subagent.State
}

// taskBook is the A2A tasks of the threads this replica remembers, by thread and task id,
// so that a continuation can be checked and sent with the right context id. A thread is
// in the book from when the engine remembers it (open) until it forgets it (drop), both
// under the engine's lock, which is taken before the book's; the tasks of a thread it
// does not remember are not recorded.
type taskBook struct {
	mu      sync.Mutex
	threads map[string]map[string]taskRef
}

func newTaskBook() *taskBook { return &taskBook{threads: map[string]map[string]taskRef{}} }

// open starts the book of a thread the engine now remembers; one already open is kept.
func (b *taskBook) open(threadID string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if _, open := b.threads[threadID]; !open {
		// Its map is made with its first task: most open runs have none in the book.
		b.threads[threadID] = nil
	}
}

// drop forgets the tasks of a thread the engine forgets.
func (b *taskBook) drop(threadID string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	delete(b.threads, threadID)
}

// remember records (or updates) a task the thread's run saw.
func (b *taskBook) remember(threadID, taskID string, ref taskRef) {
	if taskID == "" {
		return
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	tasks, open := b.threads[threadID]
	if !open {
		return
	}
	if _, known := tasks[taskID]; known || len(tasks) < maxTasksPerThread {
		b.taskMap(threadID, tasks)[taskID] = ref
	}
}

// taskMap is the thread's tasks, the map made if tasks is still nil.
func (b *taskBook) taskMap(threadID string, tasks map[string]taskRef) map[string]taskRef {
	if tasks == nil {
		tasks = make(map[string]taskRef)
		b.threads[threadID] = tasks
	}
	return tasks
}

// add records a task known from elsewhere (a suspension, a run's work document), without
// overwriting what this process knows newer.
func (b *taskBook) add(threadID, taskID string, ref taskRef) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.addLocked(threadID, taskID, ref)
}

func (b *taskBook) addLocked(threadID, taskID string, ref taskRef) {
	tasks, open := b.threads[threadID]
	if !open {
		return
	}
	if _, known := tasks[taskID]; !known && len(tasks) < maxTasksPerThread {
		b.taskMap(threadID, tasks)[taskID] = ref
	}
}

// records returns the tasks the thread started, to be saved with its suspension.
func (b *taskBook) records(threadID string) map[string]TaskRecord {
	b.mu.Lock()
	defer b.mu.Unlock()
	tasks := b.threads[threadID]
	if len(tasks) == 0 {
		return nil
	}
	out := make(map[string]TaskRecord, len(tasks))
	for id, ref := range tasks {
		out[id] = TaskRecord{Agent: ref.agent, ContextID: ref.contextID, State: ref.state}
	}
	return out
}

// restore records tasks saved with the thread's suspension (after a restart, or on
// another replica), without overwriting what this process knows newer.
func (b *taskBook) restore(threadID string, tasks map[string]TaskRecord) {
	b.mu.Lock()
	defer b.mu.Unlock()
	for id, rec := range tasks {
		b.addLocked(threadID, id, taskRef{agent: rec.Agent, contextID: rec.ContextID, state: rec.State})
	}
}

// lookup returns a task of the thread.
func (b *taskBook) lookup(threadID, taskID string) (taskRef, bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	ref, ok := b.threads[threadID][taskID]
	return ref, ok
}

// refs returns the thread's tasks, in no order.
func (b *taskBook) refs(threadID string) []taskRef {
	b.mu.Lock()
	defer b.mu.Unlock()
	tasks := b.threads[threadID]
	out := make([]taskRef, 0, len(tasks))
	for _, ref := range tasks {
		out = append(out, ref)
	}
	return out
}

// maxTasksPerThread bounds the tasks remembered per thread.
const maxTasksPerThread = 1000

// TaskRecord is an A2A task a thread started, as saved with the thread's state.
type TaskRecord struct {
	Agent     string         `json:"agent"`
	ContextID string         `json:"contextId,omitempty"`
	State     subagent.State `json:"state"`
}

// storedTaskRuns bounds how many of a thread's earlier runs are read for its tasks: a task
// the model continues was started a few turns ago, not a hundred runs back.
const storedTaskRuns = 50

// load records the A2A tasks the thread's earlier runs saved in st (each run's work
// document) into the book, without overwriting what this process knows newer. It is how a
// task stays the thread's after a restart, an eviction from memory, or on another replica
// when the thread was not parked. A store error leaves the thread as it was: the
// continuation is then refused, which fails closed.
func (b *taskBook) load(ctx context.Context, st store.Store, log *slog.Logger, threadID string) {
	runs, err := st.ThreadRuns(ctx, threadID, storedTaskRuns)
	if err != nil {
		log.Warn("reading the thread's earlier tasks", "thread_id", threadID, "err", err)
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
	b.restore(threadID, tasks)
}
