package coordinator

import (
	"context"
	"encoding/json"
	"errors"
	"iter"
	"time"

	"github.com/baton-dev/baton/agui"
	"github.com/baton-dev/baton/runs"
	"github.com/baton-dev/baton/store"
)

// Following a run, for every surface (DESIGN §9a).
//
// Design note: a run is followed from the store's event log, never from the run in memory,
// so it works the same on every replica: the follower replays the events after the
// client's position, then follows the log until the run's terminal event. On the replica
// that executes the run a follower is woken as soon as the run's events are written
// (Engine.LogChanged); elsewhere it polls the log (followPoll). All followers of one run on
// this process read its new events through one shared tail (tail.go). A stream that starts
// mid-run can be restated (runs.FollowOptions.Restate): the run's RUN_STARTED first, then
// the start events of the text messages, tool calls, steps and sub-agents still open at
// that point, all with the position the client sent. The official AG-UI client checks each
// connection as a stream of its own, and a continuation without them would be refused.

// followPoll is how often a follower reads the log when nothing wakes it.
const followPoll = 200 * time.Millisecond

// catchUpWait is how long a position beyond the stored log is given for the log to catch
// up (the owner writes it a moment after streaming) before it is refused.
const catchUpWait = 3 * time.Second

// lostGrace is how long a run may look ended or lapsed without a terminal event in its log
// before its followers are told it was lost (the owner writes the terminal event a moment
// after it releases the run).
const lostGrace = 3 * time.Second

// logEvent is what a follower reads from a stored event.
type logEvent struct {
	Type          string `json:"type"`
	MessageID     string `json:"messageId"`
	ToolCallID    string `json:"toolCallId"`
	StepName      string `json:"stepName"`
	SubagentRunID string `json:"subagentRunId"`
}

// openTracker follows a stored stream to know what is open at a point.
type openTracker struct {
	runStarted []byte
	order      []string
	open       map[string][]byte
	terminal   []byte
}

// add records ev and reports whether it is the run's terminal event.
func (o *openTracker) add(ev store.Event) bool {
	var le logEvent
	if json.Unmarshal(ev.Data, &le) != nil {
		return false
	}
	if o.open == nil {
		o.open = map[string][]byte{}
	}
	opened := func(key string) {
		if _, dup := o.open[key]; !dup {
			o.order = append(o.order, key)
		}
		o.open[key] = ev.Data
	}
	switch agui.EventType(le.Type) {
	case agui.EventRunStarted:
		o.runStarted = ev.Data
	case agui.EventRunFinished, agui.EventRunError:
		o.terminal = ev.Data
		return true
	case agui.EventTextMessageStart:
		opened("m:" + le.MessageID)
	case agui.EventTextMessageEnd:
		delete(o.open, "m:"+le.MessageID)
	case agui.EventToolCallStart:
		opened("t:" + le.ToolCallID)
	case agui.EventToolCallEnd:
		delete(o.open, "t:"+le.ToolCallID)
	case agui.EventStepStarted:
		opened("s:" + le.SubagentRunID + "/" + le.StepName)
	case agui.EventStepFinished:
		delete(o.open, "s:"+le.SubagentRunID+"/"+le.StepName)
	case agui.EventSubagentStarted:
		opened("a:" + le.SubagentRunID)
	case agui.EventSubagentFinished, agui.EventSubagentError:
		delete(o.open, "a:"+le.SubagentRunID)
	}
	return false
}

// restate returns the events that reopen the stream at position id.
func (o *openTracker) restate(id int64) []runs.Event {
	out := []runs.Event{{Seq: id, Data: o.runStarted}}
	if o.terminal != nil {
		return append(out, runs.Event{Seq: id, Data: o.terminal})
	}
	for _, key := range o.order {
		if data, ok := o.open[key]; ok {
			out = append(out, runs.Event{Seq: id, Data: data})
		}
	}
	return out
}

// Events follows run runID of principal's thread threadID from position after (0: its
// start), from its live queue on the replica that runs it or its stored log anywhere. The
// checks come first, so that a surface can answer them before it starts its stream:
// runs.ErrThreadNotFound (also for another principal's thread), ErrThreadExpired,
// ErrRunNotFound, ErrEventsExpired, ErrBadPosition, ErrTooManyFollowers (per run: the
// port's cap) or ErrPrincipalFollowers, ErrUnavailable. The sequence then yields the run's
// events in batches (one per read, for one write each) until its terminal one (a run lost
// without one ends with RUN_ERROR RUN_LOST), an empty batch as a keep-alive every
// opts.Ping, and an error when the log cannot be read
// (the client follows again from its last position). It must be ranged over once: the
// follower's count, and its hold on a detached run, end with the range.
func (p *Runs) Events(ctx context.Context, principal, threadID, runID string, after int64, opts runs.FollowOptions) (iter.Seq2[[]runs.Event, error], error) {
	rctx, cancel := context.WithTimeout(ctx, portTimeout)
	_, err := p.thread(rctx, principal, threadID)
	cancel()
	if err != nil {
		return nil, err
	}
	st := p.e.cfg.Store
	rctx, cancel = context.WithTimeout(ctx, portTimeout)
	rec, err := st.GetRun(rctx, threadID, runID)
	cancel()
	if errors.Is(err, store.ErrNotFound) {
		return nil, runs.ErrRunNotFound
	}
	if err != nil {
		return nil, unavailable("get run", err)
	}
	// Any replay needs the log's head: from 0 it is the stream's start, from a position
	// it is the RUN_STARTED that the restatement begins with.
	expired, err := p.logExpired(ctx, rec)
	if err != nil {
		return nil, unavailable("read events", err)
	}
	if expired {
		return nil, runs.ErrEventsExpired
	}
	tr, restarted, err := p.catchUp(ctx, rec, after)
	if err != nil {
		return nil, err
	}
	leave := func() {}
	if !opts.Uncounted {
		if leave, err = p.Follower(principal, threadID+"\x00"+runID, p.cfg.MaxFollowersPerRun); err != nil {
			return nil, err
		}
	}
	return func(yield func([]runs.Event, error) bool) {
		defer leave()
		if opts.Attach {
			// Under server.on_disconnect: detach this stream keeps a detached run from
			// being cancelled while it lasts; its end starts the reconnect grace again.
			// Only a stream that is served attaches: a refused one must not hold the run.
			defer p.e.Attach(threadID, runID)()
		}
		if after > 0 && !restarted && opts.Restate {
			if !yield(tr.restate(after), nil) || tr.terminal != nil {
				return
			}
		}
		p.follow(ctx, threadID, runID, after, tr, opts.Ping, yield)
	}, nil
}

// catchUp reads the run's log up to the client's position, to know what is open there.
// restarted: nothing of the run was stored up to the position, and the log starts after it
// (a run taken over, or ended, before its first events were stored): the stream is
// followed from there, its own RUN_STARTED first.
func (p *Runs) catchUp(ctx context.Context, rec *store.RunRecord, after int64) (tr *openTracker, restarted bool, err error) {
	st := p.e.cfg.Store
	threadID, runID := rec.ThreadID, rec.RunID
	tr = &openTracker{}
	var last int64
	// owner is the run's record as the catch-up last saw its owner change (ownerAlive).
	owner := rec
	deadline := time.Now().Add(catchUpWait)
	for last < after {
		rctx, cancel := context.WithTimeout(ctx, portTimeout)
		evs, err := st.Events(rctx, threadID, runID, last, store.MaxEventsRead)
		cancel()
		if err != nil {
			return nil, false, unavailable("read events", err)
		}
		// An event past the client's position also places it: a run taken over by
		// another replica goes on after a gap in the numbering (design/takeover.md).
		beyond := false
		for _, ev := range evs {
			if ev.Seq > after {
				beyond = true
				break
			}
			tr.add(ev)
			last = ev.Seq
		}
		if beyond {
			restarted = tr.runStarted == nil
			break
		}
		if len(evs) > 0 && last < after && len(evs) == store.MaxEventsRead {
			continue
		}
		if last >= after {
			break
		}
		// The client claims more than the log holds: the log may lag a running run a
		// little; a run that has ended, or a wait that ran out, means the position is not
		// one of this run's.
		if tr.terminal != nil || !p.runGoingOn(ctx, threadID, runID) || time.Now().After(deadline) && p.ownerAlive(ctx, threadID, runID, &owner, &deadline) {
			if last == 0 && rec.State != store.RunRunning && rec.State != store.RunLost {
				// An ended run with nothing left in its log: swept (server.event_retention).
				return nil, false, runs.ErrEventsExpired
			}
			return nil, false, runs.ErrBadPosition
		}
		select {
		case <-ctx.Done():
			return nil, false, ctx.Err()
		case <-time.After(followPoll):
		}
	}
	if after > 0 && tr.runStarted == nil && !restarted {
		return nil, false, runs.ErrEventsExpired
	}
	return tr, restarted, nil
}

// logExpired reports whether a replay from the start is impossible because the retention
// sweep (server.event_retention) took the run's first events: what is left would not begin
// with RUN_STARTED, so no client could accept it. An ended run with an empty log is expired
// too; a running or lost one may still be writing its first events (or be ended for its
// followers with RUN_LOST).
func (p *Runs) logExpired(ctx context.Context, rec *store.RunRecord) (bool, error) {
	rctx, cancel := context.WithTimeout(ctx, portTimeout)
	defer cancel()
	head, err := p.e.cfg.Store.Events(rctx, rec.ThreadID, rec.RunID, 0, 1)
	if err != nil {
		return false, err
	}
	if len(head) > 0 {
		// The stream's start, wherever its numbering starts (a run taken over before its
		// first events were stored begins after a gap: design/takeover.md).
		var first logEvent
		_ = json.Unmarshal(head[0].Data, &first)
		return agui.EventType(first.Type) != agui.EventRunStarted, nil
	}
	return rec.State != store.RunRunning && rec.State != store.RunLost, nil
}

// runGoingOn reports whether the run is still recorded as running (on a live replica, or
// about to be taken over by one).
func (p *Runs) runGoingOn(ctx context.Context, threadID, runID string) bool {
	rctx, cancel := context.WithTimeout(ctx, portTimeout)
	defer cancel()
	run, err := p.e.cfg.Store.GetRun(rctx, threadID, runID)
	if err != nil {
		return false
	}
	// A running run whose lease lapsed is not over: a replica takes it over from its
	// checkpoint at its next heartbeat (design/takeover.md), or ends it with RUN_LOST.
	return run.State == store.RunRunning
}

// ownerAlive reports whether the replica that owns the run has owned it since *first was
// read and is alive: it runs the run here, or it has renewed its lease since. A position
// past the log's end that such a replica does not reach in catchUpWait is not one of the
// run's. While the owner may be dead (its lease not renewed), the position may be one that
// it streamed before storing it; once another replica has taken the run over, that replica
// gets catchUpWait of its own to write (*first and *deadline move on).
func (p *Runs) ownerAlive(ctx context.Context, threadID, runID string, first **store.RunRecord, deadline *time.Time) bool {
	rctx, cancel := context.WithTimeout(ctx, portTimeout)
	defer cancel()
	run, err := p.e.cfg.Store.GetRun(rctx, threadID, runID)
	if err != nil {
		return true
	}
	if run.Replica != (*first).Replica {
		*first, *deadline = run, time.Now().Add(catchUpWait)
		return false
	}
	return p.e.LogChanged(threadID, runID) != nil || run.LeaseUntil.After((*first).LeaseUntil)
}

// follow yields the run's logged events after `after` until its terminal event. It reads
// them from the run's shared tail, and reads the store itself only while it is further
// behind than the tail keeps.
func (p *Runs) follow(ctx context.Context, threadID, runID string, after int64, tr *openTracker, ping time.Duration, yield func([]runs.Event, error) bool) {
	st := p.e.cfg.Store
	tl := p.tails.acquire(threadID+"\x00"+runID, tailSource{st: st, threadID: threadID, runID: runID,
		goingOn: func(ctx context.Context) bool { return p.runGoingOn(ctx, threadID, runID) },
		changed: func() <-chan struct{} { return p.e.LogChanged(threadID, runID) },
	}, after)
	defer tl.release()
	var pings <-chan time.Time
	if ping > 0 {
		t := time.NewTicker(ping)
		defer t.Stop()
		pings = t.C
	}
	for {
		evs, wake, state, covered := tl.since(after)
		if !covered {
			rctx, cancel := context.WithTimeout(ctx, portTimeout)
			var err error
			evs, err = st.Events(rctx, threadID, runID, after, store.MaxEventsRead)
			cancel()
			if err != nil {
				yield(nil, unavailable("read events", err))
				return
			}
		}
		batch := make([]runs.Event, 0, len(evs))
		done := false
		for _, ev := range evs {
			batch = append(batch, runs.Event{Seq: ev.Seq, Data: ev.Data})
			after = ev.Seq
			if tr.add(ev) {
				done = true
				break
			}
		}
		if len(batch) > 0 && !yield(batch, nil) || done {
			return
		}
		if len(evs) > 0 {
			continue // the tail may hold more, or the store more pages
		}
		switch state {
		case tailLost:
			yield([]runs.Event{{Seq: after, Data: lostRunError}}, nil)
			return
		case tailFailed:
			yield(nil, unavailable("read events", errTailFailed))
			return
		}
		select {
		case <-ctx.Done():
			return
		case <-wake:
		case <-pings:
			if !yield(nil, nil) {
				return
			}
		}
	}
}

// errTailFailed: the run's shared tail could not read its events.
var errTailFailed = errors.New("the run's tail could not read its events")

// lostRunError ends a followed stream whose run ended without a terminal event.
var lostRunError = func() []byte {
	b, _ := agui.MarshalEvent(&agui.RunError{Code: "RUN_LOST", Message: "The run was interrupted and did not finish."})
	return b
}()
