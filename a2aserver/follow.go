package a2aserver

import (
	"context"
	"errors"
	"fmt"
	"iter"
	"strings"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/a2aproject/a2a-go/v2/a2asrv"

	"github.com/baton-dev/baton/agui"
	"github.com/baton-dev/baton/runs"
)

// Log is what the engine's port tells this surface of a run relayed on any replica
// (coordinator.Runs fits): its logged events, whether it goes on, and its downstream
// cancels that were not confirmed. Every call names the principal whose run it is.
type Log interface {
	// Events follows the run from position after until its end (the port's one
	// follower of a run's log; runs.FollowOptions.Ping for a periodic empty batch).
	Events(ctx context.Context, principal, threadID, runID string, after int64, opts runs.FollowOptions) (iter.Seq2[[]runs.Event, error], error)
	// Log returns a page of the run's stored events after position after.
	Log(ctx context.Context, principal, threadID, runID string, after int64) ([]runs.Event, error)
	// RunState tells whether the run goes on or has ended.
	RunState(ctx context.Context, principal, threadID, runID string) (runs.RunState, error)
	// Unconfirmed waits, until deadline, for the run's downstream cancels to settle and
	// describes those not confirmed.
	Unconfirmed(ctx context.Context, principal, threadID, runID string, deadline time.Time) []string
}

// followPoll is how often a task followed on a replica other than its execution's reads
// the run's event log.
const followPoll = 100 * time.Millisecond

// replay is a task's runs read back from their event logs.
type replay struct {
	rel   *relay // the current run's relay, to go on with
	after int64  // the current run's last event read
	// artifacts are the answers of the runs, in order.
	artifacts []*a2a.Artifact
}

// replay reads the task's runs from their event logs: their answers (when withArtifacts)
// and, when withEnd and the stored task still says its current run is going on, the
// run's end if its log has one, which then is the task's state. The stored state is not
// changed: the execution relaying the run (on a replica that may be alive) writes it.
func (s *taskStore) replay(ctx context.Context, who string, t *a2a.Task, runIDs []string, withArtifacts, withEnd bool) (*replay, error) {
	threadID, current := runOf(t)
	rp := &replay{}
	if s.log == nil || ended(t.Status.State) || t.Status.State == a2a.TaskStateAuthRequired {
		// Nothing runs for the task: its answers were stored with its state.
		return rp, nil
	}
	for _, runID := range runIDs {
		if runID != current && !withArtifacts {
			continue
		}
		rel := newReplayRelay(t, threadID, runID)
		after, err := s.readLog(ctx, who, rel, rp, threadID, runID, 0)
		if err != nil {
			return nil, err
		}
		if runID == current {
			rp.rel, rp.after = rel, after
		}
	}
	if withArtifacts {
		t.Artifacts = rp.artifacts
	}
	if withEnd && current != "" && !ended(t.Status.State) && t.Status.State != a2a.TaskStateAuthRequired && rp.rel != nil {
		if ev := s.endOf(ctx, who, rp.rel, threadID, current); ev != nil {
			apply(t, ev)
		}
	}
	return rp, nil
}

// newReplayRelay is a relay of one run of t, as the execution had it.
func newReplayRelay(t *a2a.Task, threadID, runID string) *relay {
	ec := &a2asrv.ExecutorContext{TaskID: t.ID, ContextID: t.ContextID}
	return &relay{ec: ec, lt: &liveTask{threadID: threadID, runID: runID}}
}

// readLog feeds the run's logged events after `after` to rel, collecting the artifact
// events in rp, and returns the last event read.
func (s *taskStore) readLog(ctx context.Context, who string, rel *relay, rp *replay, threadID, runID string, after int64) (int64, error) {
	for {
		evs, err := s.log.Log(ctx, who, threadID, runID, after)
		if err != nil {
			return after, fmt.Errorf("%w: the event log is unavailable", a2a.ErrInternalError)
		}
		after = rp.feed(rel, evs, after)
		if len(evs) < runs.MaxEventsRead {
			return after, nil
		}
	}
}

// feed relays logged events to rel, collecting the artifact events in rp, and returns the
// position of the last (after when there is none).
func (rp *replay) feed(rel *relay, evs []runs.Event, after int64) int64 {
	for _, e := range evs {
		after = e.Seq
		ev, err := agui.DecodeEvent(e.Data)
		if err != nil {
			continue
		}
		for _, out := range rel.event(ev) {
			if a, ok := out.(*a2a.TaskArtifactUpdateEvent); ok {
				rp.addArtifact(a)
			}
		}
	}
	if a := rel.flush(); a != nil {
		rp.addArtifact(a)
	}
	return after
}

func (rp *replay) addArtifact(ev *a2a.TaskArtifactUpdateEvent) {
	for _, a := range rp.artifacts {
		if a.ID == ev.Artifact.ID {
			a.Parts = append(a.Parts, ev.Artifact.Parts...)
			return
		}
	}
	c := *ev.Artifact
	c.Parts = append([]*a2a.Part(nil), ev.Artifact.Parts...)
	rp.artifacts = append(rp.artifacts, &c)
}

// endOf returns the terminal event of a run whose log the relay has read, or nil while it
// goes on: its logged end, or a failure when its record says it ended without one (its
// replica died and nobody took it over). The end of a run that was stopped names the
// downstream cancels that were not confirmed, as CancelTask's answer does, as far as the
// store tells now (no wait: this is a read).
func (s *taskStore) endOf(ctx context.Context, who string, rel *relay, threadID, runID string) *a2a.TaskStatusUpdateEvent {
	if rel.ended {
		if ev, ok := rel.final.(*a2a.TaskStatusUpdateEvent); ok {
			if rel.stopped {
				if msg := unconfirmedMessage(s.log.Unconfirmed(ctx, who, threadID, runID, time.Time{})); msg != "" {
					return status(rel.ec, a2a.TaskStateCanceled, msg)
				}
			}
			return ev
		}
		return status(rel.ec, a2a.TaskStateCanceled, "The run was stopped.")
	}
	state, err := s.log.RunState(ctx, who, threadID, runID)
	if err != nil || state == runs.RunGoingOn {
		// Still running (here, elsewhere, or about to be taken over); or unknown.
		return nil
	}
	return status(rel.ec, a2a.TaskStateFailed, "The run ended without a result.")
}

// apply sets a status update on a task as a2asrv would.
func apply(t *a2a.Task, ev *a2a.TaskStatusUpdateEvent) {
	if t.Status.Message != nil {
		t.History = append(t.History, t.Status.Message)
	}
	for k, v := range ev.Metadata {
		if t.Metadata == nil {
			t.Metadata = map[string]any{}
		}
		t.Metadata[k] = v
	}
	t.Status = ev.Status
}

// follow streams a task from the store: the task as it is, then its current run's
// answer and end, followed through the engine's port (Log.Events: the one follower of a
// run's log, on any replica), until the task reaches a state in which nothing runs for it.
func (s *taskStore) follow(ctx context.Context, id a2a.TaskID, yield func(a2a.Event, error) bool) {
	rec, t, rp, ok := s.startFollow(ctx, id, yield)
	if !ok {
		return
	}
	who := rec.Principal
	threadID, runID := runOf(t)
	if rp.rel == nil {
		if rec, threadID, runID, rp, ok = s.awaitRun(ctx, who, id, rec, yield); !ok {
			return
		}
	}
	// The stream is counted once, as a follower of the task (handler.SubscribeToTask); the
	// periodic empty batch lets the stored state be read between the run's events.
	evs, err := s.log.Events(ctx, who, threadID, runID, rp.after, runs.FollowOptions{Ping: followPoll, Uncounted: true})
	if err != nil {
		yield(nil, followError(err))
		return
	}
	checked := time.Now()
	for batch, err := range evs {
		if err != nil {
			yield(nil, fmt.Errorf("%w: the event log is unavailable", a2a.ErrInternalError))
			return
		}
		if len(batch) > 0 && !rp.relay(batch, yield) {
			return
		}
		if time.Since(checked) < followPoll {
			continue
		}
		// The stored state: a cancel, or the execution's own end, is there.
		checked = time.Now()
		if end := s.storedEnd(ctx, who, id, &rec); end != nil {
			s.drain(ctx, who, rp, threadID, runID, end, yield)
			return
		}
	}
	if ctx.Err() != nil {
		return
	}
	// The run's log has ended. The execution relaying the run, if it is alive, stores the
	// task's end (its status message may say more, e.g. which cancels were not confirmed):
	// it is given a moment before the end read from the log is reported.
	tick := time.NewTicker(followPoll)
	defer tick.Stop()
	for waited := 0; ; waited++ {
		if end := s.storedEnd(ctx, who, id, &rec); end != nil {
			yield(end, nil)
			return
		}
		if waited >= endWait {
			if ev := s.endOf(ctx, who, rp.rel, threadID, runID); ev != nil {
				yield(ev, nil)
			}
			return
		}
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
}

// awaitRun waits for a submitted task's execution to record its run, and returns the task
// as then stored with the run to follow (its log read from its start: its answer so far is
// new here); ok is false when following ends there (an error, the caller gone, or a task
// that ended meanwhile, whose end was yielded).
func (s *taskStore) awaitRun(ctx context.Context, who string, id a2a.TaskID, rec *runs.Task, yield func(a2a.Event, error) bool) (_ *runs.Task, threadID, runID string, rp *replay, ok bool) {
	tick := time.NewTicker(followPoll)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil, "", "", nil, false
		case <-tick.C:
		}
		now, err := s.db.GetTask(ctx, who, string(id))
		if err != nil {
			yield(nil, storeError(err))
			return nil, "", "", nil, false
		}
		if now.Version == rec.Version {
			continue
		}
		rec = now
		nt, nrp, err := s.load(ctx, now, true)
		if err != nil {
			yield(nil, err)
			return nil, "", "", nil, false
		}
		if ended(nt.Status.State) || nt.Status.State == a2a.TaskStateAuthRequired {
			yield(statusOf(nt), nil)
			return nil, "", "", nil, false
		}
		if nrp.rel == nil {
			continue
		}
		threadID, runID = runOf(nt)
		return rec, threadID, runID, &replay{rel: newReplayRelay(nt, threadID, runID)}, true
	}
}

// storedEnd reads the stored task and returns its status when it changed since *rec into
// a state in which nothing runs for it; nil otherwise.
func (s *taskStore) storedEnd(ctx context.Context, who string, id a2a.TaskID, rec **runs.Task) *a2a.TaskStatusUpdateEvent {
	now, err := s.db.GetTask(ctx, who, string(id))
	if err != nil || now.Version == (*rec).Version {
		return nil
	}
	*rec = now
	st, _, err := s.load(ctx, now, false)
	if err != nil || !(ended(st.Status.State) || st.Status.State == a2a.TaskStateAuthRequired) {
		return nil
	}
	return statusOf(st)
}

// drain yields what the run's log holds beyond what was relayed (the follower's tail may
// not have read it yet when the stored end is seen), then the end.
func (s *taskStore) drain(ctx context.Context, who string, rp *replay, threadID, runID string, end a2a.Event, yield func(a2a.Event, error) bool) {
	for {
		evs, err := s.log.Log(ctx, who, threadID, runID, rp.after)
		if err != nil {
			break // the end is what matters; the answer is in GetTask
		}
		if len(evs) > 0 && !rp.relay(evs, yield) {
			return
		}
		if len(evs) < runs.MaxEventsRead {
			break
		}
	}
	yield(end, nil)
}

// followError is the A2A error of a run the port would not follow.
func followError(err error) error {
	switch {
	case errors.Is(err, runs.ErrThreadNotFound), errors.Is(err, runs.ErrRunNotFound), errors.Is(err, runs.ErrEventsExpired):
		return a2a.ErrTaskNotFound
	case errors.Is(err, runs.ErrTooManyFollowers):
		return busyError("You follow too many streams at once; close some, or retry later.")
	}
	return fmt.Errorf("%w: the event log is unavailable", a2a.ErrInternalError)
}

// startFollow reads the caller's task and yields it as it is; ok is false when following
// ends there (an error, the caller gone, or a task in which nothing runs).
func (s *taskStore) startFollow(ctx context.Context, id a2a.TaskID, yield func(a2a.Event, error) bool) (*runs.Task, *a2a.Task, *replay, bool) {
	who, ok := callerOf(ctx)
	if !ok {
		yield(nil, a2a.ErrUnauthenticated)
		return nil, nil, nil, false
	}
	rec, err := s.db.GetTask(ctx, who, string(id))
	if err != nil {
		yield(nil, storeError(err))
		return nil, nil, nil, false
	}
	t, rp, err := s.load(ctx, rec, true)
	if err != nil {
		yield(nil, err)
		return nil, nil, nil, false
	}
	if !yield(t, nil) || ended(t.Status.State) || t.Status.State == a2a.TaskStateAuthRequired {
		return nil, nil, nil, false
	}
	return rec, t, rp, true
}

// relay feeds a batch of the run's logged events into rp and yields what it added to the
// answer: new artifacts, and new parts of those already sent. False when following ends
// (the caller gone).
func (rp *replay) relay(batch []runs.Event, yield func(a2a.Event, error) bool) bool {
	n := len(rp.artifacts)
	parts := make([]int, n)
	for i, a := range rp.artifacts {
		parts[i] = len(a.Parts)
	}
	rp.after = rp.feed(rp.rel, batch, rp.after)
	for i, a := range rp.artifacts {
		var ev *a2a.TaskArtifactUpdateEvent
		switch {
		case i >= n:
			ev = a2a.NewArtifactEvent(rp.rel.ec, a.Parts...)
			ev.Artifact.ID, ev.Artifact.Name = a.ID, a.Name
		case len(a.Parts) > parts[i]:
			ev = a2a.NewArtifactUpdateEvent(rp.rel.ec, a.ID, a.Parts[parts[i]:]...)
		default:
			continue
		}
		if !yield(ev, nil) {
			return false
		}
	}
	return true
}

// endWait is how many polls a follower waits for the stored end of a run whose log has
// ended.
const endWait = 20

// statusOf is a task's status as a final status update.
func statusOf(t *a2a.Task) *a2a.TaskStatusUpdateEvent {
	ev := a2a.NewStatusUpdateEvent(t, t.Status.State, t.Status.Message)
	ev.Metadata = t.Metadata
	return ev
}

// unconfirmedMessage is a canceled task's status message naming the downstream
// cancellations that were not confirmed ("" when there are none).
func unconfirmedMessage(failed []string) string {
	if len(failed) == 0 {
		return ""
	}
	return "Canceled; these downstream cancellations were not confirmed: " + strings.Join(failed, "; ") + "."
}
