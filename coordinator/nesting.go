package coordinator

import (
	"context"
	"crypto/rand"
	"fmt"
	"slices"

	"github.com/baton-dev/baton/agui"
	"github.com/baton-dev/baton/bridge"
	"github.com/baton-dev/baton/llm"
	"github.com/baton-dev/baton/runs"
)

// Nesting (contract §9c, design/nesting.md): a run has a depth, 1 for a run a user
// started and one more than its caller's for a run another Baton started (the A2A door
// reads the caller's depth from the message metadata into RunAgentInput.Depth). A call to
// an agent that would start a run deeper than Config.MaxDepth is not sent; the model gets
// [REFUSED:max_depth]. The depth is kept with the run's checkpoint (takeover) and its
// suspension (resume), so it never shrinks when the run moves or goes on.

// ErrTooDeep refuses a run deeper than Config.MaxDepth: a caller that did not stop at its
// own limit (or has a larger one). No run is started.
var ErrTooDeep = runs.ErrTooDeep

// maxDepth is Config.MaxDepth or its default.
func (c *Config) maxDepth() int {
	if c.MaxDepth > 0 {
		return c.MaxDepth
	}
	return DefaultMaxDepth
}

// checkDepth refuses in when its depth is beyond maxDepth.
func checkDepth(in *agui.RunAgentInput, maxDepth int) error {
	if in.Depth > maxDepth {
		return fmt.Errorf("%w: a run at depth %d is beyond this server's max_depth of %d", ErrTooDeep, in.Depth, maxDepth)
	}
	return nil
}

// depthOf is the run's depth: 1 for a run that no other Baton started.
func depthOf(r *Run) int { return max(r.in.Depth, 1) }

// keepDepth raises the run's depth to what an earlier run of its thread recorded (a
// resume carries no metadata of its own when its door starts it).
func keepDepth(r *Run, recorded int) {
	if recorded > r.in.Depth {
		r.in.Depth = recorded
	}
}

// depthRefusal is the refusal of call c to an agent when the run it would start is
// deeper than the configured limit; ok is false for any other call.
func depthRefusal(r *Run, t *toolset, c llm.ToolCall) (toolOutcome, bool) {
	a, isAgent := t.agents[c.Name]
	if !isAgent {
		return toolOutcome{}, false
	}
	d, limit := depthOf(r), r.e.cfg.maxDepth()
	if d+1 <= limit {
		return toolOutcome{}, false
	}
	r.log.Info("a sub-agent call refused: nesting too deep", "agent", a.Name, "depth", d, "max_depth", limit)
	return taggedOutcome(bridge.TagRefused, bridge.RefusedMaxDepth(a.Name, d, limit)), true
}

// threadContext is the A2A context id for a new task of agent in the thread: the one
// the thread's earlier calls to agent used, so that the agent sees one conversation
// (one thread at a callee Baton), not a new one per call. A new context is made when the
// thread has none yet, and one of its own (not recorded) while the shared one is busy: a
// call of this run is being sent on it, or a task of it is not finished (an agent that
// is a Baton would answer a new message there with that task's question). release ends
// the send's use of the context. newThread: the thread was created by the run that sends,
// so no earlier run stored a task of it (nothing to read).
func threadContext(ctx context.Context, e *Engine, threadID, agent string, newThread bool) (contextID string, release func()) {
	if id, rel, ok := takeContext(e, threadID, agent, newThread); ok {
		return id, rel
	}
	// Not known in memory: the thread's earlier runs may have recorded its tasks.
	e.tasks.load(ctx, e.cfg.Store, e.log, threadID)
	id, rel, _ := takeContext(e, threadID, agent, true)
	return id, rel
}

// takeContext picks the context under e.mu (see threadContext); without create it
// reports ok false when the thread has none for agent yet.
func takeContext(e *Engine, threadID, agent string, create bool) (string, func(), bool) {
	e.mu.Lock()
	defer e.mu.Unlock()
	th := e.threads[threadID]
	if th == nil {
		return newContextID(), func() {}, true
	}
	tasks := e.tasks.refs(threadID)
	i := slices.IndexFunc(th.contexts, func(c agentContext) bool { return c.agent == agent })
	id := ""
	if i >= 0 {
		id = th.contexts[i].id
	}
	if id == "" {
		id = earliestContext(tasks, agent)
	}
	if id == "" && !create {
		return "", nil, false
	}
	if id == "" {
		id = newContextID()
	} else if sendingOn(th.contexts, id) > 0 || contextBusy(tasks, agent, id) {
		return newContextID(), func() {}, true
	}
	if i < 0 {
		i = len(th.contexts)
		th.contexts = append(th.contexts, agentContext{agent: agent})
	}
	th.contexts[i].id = id
	th.contexts[i].sending++
	return id, func() {
		e.mu.Lock()
		defer e.mu.Unlock()
		// The entry is found again: the slice may have grown since. Entries are never
		// removed, and an agent's context id never changes once set.
		if j := slices.IndexFunc(th.contexts, func(c agentContext) bool { return c.agent == agent }); j >= 0 {
			th.contexts[j].sending--
		}
	}, true
}

// sendingOn counts the sends in flight on context id.
func sendingOn(contexts []agentContext, id string) int {
	n := 0
	for _, c := range contexts {
		if c.id == id {
			n += c.sending
		}
	}
	return n
}

// earliestContext is a context of agent's tasks in the thread (the smallest id, so that
// every replica picks the same one), or "".
func earliestContext(tasks []taskRef, agent string) string {
	var ids []string
	for _, ref := range tasks {
		if ref.agent == agent && ref.contextID != "" {
			ids = append(ids, ref.contextID)
		}
	}
	if len(ids) == 0 {
		return ""
	}
	return slices.Min(ids)
}

// contextBusy reports whether a task of agent in context id is not over: waiting for
// input or still working.
func contextBusy(tasks []taskRef, agent, id string) bool {
	for _, ref := range tasks {
		if ref.agent == agent && ref.contextID == id && !ref.state.Terminal() {
			return true
		}
	}
	return false
}

func newContextID() string { return "baton-ctx-" + rand.Text() }
