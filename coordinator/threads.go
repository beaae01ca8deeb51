package coordinator

// The engine's threads as the surfaces reach them: stopping a run, deleting a thread and
// abandoning the work parked on it, following a run (the disconnect policy's attachments),
// finding where a thread's in-session question is held; and what the engine remembers of
// a thread between runs (its owner, its A2A tasks in the taskBook).

import (
	"context"
	"errors"
	"fmt"

	"github.com/baton-dev/baton/agui"
	"github.com/baton-dev/baton/durable"
	"github.com/baton-dev/baton/store"
)

// StopRun cancels the active run (threadID, runID) on the producer side: its stream ends with
// the cancelled outcome.
//
// Who owns the thread, and which replica owns the run, are read from the store, never from
// this replica's memory: another replica may have deleted and re-created the thread, or
// taken the run over, and a stale owner must never stop (or cancel the downstream work of)
// a run it does not hold.
func (e *Engine) StopRun(threadID, runID, principal string) error {
	// A stop is carried out whole even when its request goes away: the store's timeout
	// bounds the reads.
	ctx, cancel := context.WithTimeout(context.Background(), storeWriteTimeout)
	defer cancel()
	st, err := e.cfg.Store.GetThread(ctx, threadID)
	if errors.Is(err, store.ErrNotFound) {
		return ErrRunNotFound
	}
	if err != nil {
		return fmt.Errorf("coordinator: stop: %w", err)
	}
	if st.Owner != principal {
		return ErrForbidden
	}
	e.mu.Lock()
	r := e.active[threadID]
	_, done := e.finished[runKey(threadID, runID)]
	e.mu.Unlock()
	if r == nil || r.RunID != runID {
		if done {
			return ErrRunFinished
		}
		return e.records.StopElsewhere(ctx, threadID, runID)
	}
	if r.terminated() {
		return ErrRunFinished
	}
	if r.begun.Load() && !r.handedOff.Load() {
		mine, err := r.own.Holds(ctx, e.cfg.Store)
		if err != nil {
			return fmt.Errorf("coordinator: stop: %w", err)
		}
		if !mine {
			// Taken over while this replica was stalled: the run stops here without
			// cancelling anything, and the stop goes to its owner.
			r.dur.Moved("the store names another owner")
			return e.records.StopElsewhere(ctx, threadID, runID)
		}
	}
	if r.handedOff.Load() {
		return e.records.StopElsewhere(ctx, threadID, runID)
	}
	if r.begun.Load() {
		// The stop is recorded with the run before it is carried out here: if this replica
		// dies while it cancels the run's downstream work, the replica that takes the run
		// over stops it too (durable.Heartbeat.ApplyStops) instead of driving it on.
		if _, err := e.cfg.Store.RequestStop(ctx, threadID, runID); err != nil && !errors.Is(err, store.ErrNotFound) {
			r.log.Warn("store: record the stop; it is carried out here only", "err", err)
		}
	}
	r.Cancel(ErrStopped)
	return nil
}

// DeleteThread deletes a thread of principal with its messages, event logs and suspension,
// and cancels the work parked on its open interrupts. A thread that does not exist or
// belongs to another principal is ErrThreadNotFound (404 for both, so that
// nobody learns which threads exist); a running thread is ErrThreadBusy and is left as it was.
func (e *Engine) DeleteThread(ctx context.Context, threadID, principal string) error {
	th, err := e.cfg.Store.GetThread(ctx, threadID)
	if errors.Is(err, store.ErrNotFound) || (err == nil && th.Owner != principal) {
		return ErrThreadNotFound
	}
	if err != nil {
		return fmt.Errorf("coordinator: delete thread: %w", err)
	}
	e.mu.Lock()
	_, busy := e.active[threadID]
	e.mu.Unlock()
	if busy || th.Running {
		return ErrThreadBusy
	}
	susp, err := e.loadSuspension(ctx, threadID)
	if err != nil {
		return fmt.Errorf("coordinator: delete thread: %w", err)
	}
	if err := e.cfg.Store.DeleteThread(ctx, threadID); err != nil {
		if errors.Is(err, store.ErrThreadBusy) {
			return ErrThreadBusy
		}
		return fmt.Errorf("coordinator: delete thread: %w", err)
	}
	if susp != nil && len(susp.Interrupts) > 0 {
		e.abandon(ctx, susp.Owner, threadID, susp.Interrupts)
		if m := e.cfg.Metrics; m != nil {
			m.InterruptsOpen(-len(susp.Interrupts))
		}
	}
	e.mu.Lock()
	delete(e.threads, threadID)
	e.tasks.drop(threadID)
	e.mu.Unlock()
	return nil
}

func (e *Engine) loadSuspension(ctx context.Context, threadID string) (*store.Suspension, error) {
	s, err := e.cfg.Store.LoadSuspension(ctx, threadID)
	if errors.Is(err, store.ErrNotFound) {
		return nil, nil
	}
	return s, err
}

// duplicateResume reports whether every entry answers an interrupt that was already
// resolved: the resume was applied before and must not be applied twice.
func (e *Engine) duplicateResume(ctx context.Context, threadID string, entries []agui.ResumeEntry) (bool, error) {
	for _, en := range entries {
		ok, err := e.cfg.Store.IsResolved(ctx, threadID, en.InterruptID)
		if err != nil || !ok {
			return false, err
		}
	}
	return true, nil
}

// Attach registers a reconnect stream of run (threadID, runID), so that under
// DisconnectDetach the run is not cancelled while the stream lasts; the returned function
// ends the registration (the grace period starts again when it was the last watcher).
// Under DisconnectCancel, or when the run is not active on this replica, Attach does
// nothing.
//
// A stream of a run that another replica executes is recorded in the store instead
// (Store.HoldRunForFollower, renewed every heartbeat, holding three heartbeats and at least 2 s), since only the store
// reaches the owner: its grace check (graceOver) holds the run while the follower's hold lasts.
func (e *Engine) Attach(threadID, runID string) (release func()) {
	if e.cfg.OnDisconnect != DisconnectDetach {
		return func() {}
	}
	e.mu.Lock()
	r := e.active[threadID]
	e.mu.Unlock()
	if r == nil || r.RunID != runID {
		return holdForRemoteFollower(e.cfg.Store, e.log, e.cfg.Heartbeat, threadID, runID)
	}
	return r.stream.attach()
}

// LogChanged returns a channel closed when more of the run's events are in the store's
// event log, or nil when the run is not active on this replica (a follower then polls).
func (e *Engine) LogChanged(threadID, runID string) <-chan struct{} {
	e.mu.Lock()
	r := e.active[threadID]
	e.mu.Unlock()
	if r == nil || r.RunID != runID {
		return nil
	}
	return r.elog.Changed()
}

// SessionHome returns the advertised URL of the replica that holds an in-session MCP
// elicitation of the thread's suspension in memory, when that is another replica: a resume
// of the thread must be forwarded there, since only that process can hand the answer to the
// waiting call. It returns "" when the resume can run here: no such elicitation, one held
// here, one recorded without an address, or a store that cannot be read (the resume run then
// reports what it finds).
//
// Before it names a holder it authorises principal against the thread's owner as stored
// (ErrForbidden): a stranger's resume is refused here, so that it costs no replica any work
// and its answer's timing does not tell where the thread is held.
func (e *Engine) SessionHome(ctx context.Context, threadID, principal string) (string, error) {
	susp, err := e.loadSuspension(ctx, threadID)
	if err != nil || susp == nil {
		return "", nil
	}
	home := ""
	for _, in := range susp.Interrupts {
		h := decodeHandle(in)
		if h.Session == "" || h.Home == "" || h.Home == e.cfg.AdvertiseURL {
			continue
		}
		if e.cfg.Sessions != nil && e.cfg.Sessions.get(h.Session) != nil {
			continue // held here after all (an advertised URL that changed)
		}
		home = h.Home
		break
	}
	if home == "" {
		return "", nil
	}
	owner := susp.Owner
	th, err := e.cfg.Store.GetThread(ctx, threadID)
	switch {
	case err == nil:
		owner = th.Owner
	case !errors.Is(err, store.ErrNotFound):
		// The owner cannot be read: the request is not forwarded, and the start here
		// authorises it (or fails) as any other.
		return "", nil
	}
	if owner != principal {
		return "", ErrForbidden
	}
	return home, nil
}

// abandon cancels the work parked on interrupts that will not be answered, each through
// its home: A2A tasks get CancelTask, MRTR calls are abandoned, in-session elicitations
// are answered "cancel".
func (e *Engine) abandon(ctx context.Context, owner, threadID string, ins []store.Interrupt) {
	cctx, cancel := context.WithTimeout(ctx, e.cfg.CancelTimeout)
	defer cancel()
	groups := map[toolHome][]store.Interrupt{}
	var order []toolHome
	for _, in := range ins {
		h := homeOf(in.Kind)
		if h == nil {
			continue
		}
		if _, seen := groups[h]; !seen {
			order = append(order, h)
		}
		groups[h] = append(groups[h], in)
	}
	for _, h := range order {
		h.abandon(cctx, e, owner, threadID, groups[h])
	}
}

// thread is what the engine remembers about a thread between runs (its A2A tasks are in
// the engine's taskBook).
type thread struct {
	owner string
	// contexts is the A2A context of the thread's conversation with each agent, and the
	// sends in flight on it (nesting.go). A slice, not maps: a thread talks to few agents,
	// and the two maps this was cost every open run 0.6 KB (BENCHMARKS.md, "Per open
	// streaming run: the delegation's stack and the thread's contexts").
	contexts []agentContext
}

// agentContext is the context id of a thread's conversation with agent, and how many sends
// are in flight on it.
type agentContext struct {
	agent, id string
	sending   int
}

// rememberTask records a task that the thread's run saw, in the thread's book and in the
// work document of the thread's active run, which follows every task and state it sees.
func (e *Engine) rememberTask(threadID, taskID string, ref taskRef) {
	if taskID == "" {
		return
	}
	e.tasks.remember(threadID, taskID, ref)
	if r := e.activeRun(threadID); r != nil {
		r.elog.NoteTask(durable.Task{Agent: ref.agent, TaskID: taskID, ContextID: ref.contextID, State: string(ref.state)})
	}
}

// forgetThread drops what this replica remembers of a thread (th) when the store says it
// changed hands (deleted, re-created by someone else) through another replica.
func (e *Engine) forgetThread(threadID string, th *thread) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.threads[threadID] == th {
		delete(e.threads, threadID)
		e.tasks.drop(threadID)
	}
}
