package server

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"time"

	"github.com/baton-dev/baton/agui"
	"github.com/baton-dev/baton/internal/followers"
	"github.com/baton-dev/baton/store"
)

// The reconnect stream, GET /agui/threads/{threadId}/runs/{runId}/events (DESIGN §9a).
//
// Design note: the stream is read from the store's event log, never from the run in memory,
// so it works the same on every replica: it replays the events after Last-Event-ID, then
// follows the log until the run's terminal event. On the replica that executes the run a
// follower is woken as soon as the run's events are written; elsewhere it polls the log
// (followPoll). A stream that starts mid-run restates what the client needs to accept it:
// the run's RUN_STARTED first, then the start events of the text messages, tool calls, steps
// and sub-agents still open at that point, all with the id the client sent. The official
// client checks each connection as a stream of its own, and a continuation without them
// would be refused.

// followPoll is how often a follower reads the log when nothing wakes it.
const followPoll = 200 * time.Millisecond

// catchUpWait is how long a Last-Event-ID beyond the stored log is given for the log to
// catch up (the owner writes it a moment after streaming) before it is refused.
const catchUpWait = 3 * time.Second

// lostGrace is how long a run may look ended or lapsed without a terminal event in its log
// before its followers are told it was lost (the owner writes the terminal event a moment
// after it releases the run).
const lostGrace = 3 * time.Second

// logEvent is what the reconnect stream reads from a stored event.
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

// restate returns the frames that reopen the stream at id.
func (o *openTracker) restate(id int64) []agui.RawFrame {
	frames := []agui.RawFrame{{ID: id, Data: o.runStarted}}
	if o.terminal != nil {
		return append(frames, agui.RawFrame{ID: id, Data: o.terminal})
	}
	for _, key := range o.order {
		if data, ok := o.open[key]; ok {
			frames = append(frames, agui.RawFrame{ID: id, Data: data})
		}
	}
	return frames
}

func (s *server) handleRunEvents(w http.ResponseWriter, r *http.Request) {
	th, who := s.threadOf(w, r)
	if th == nil {
		return
	}
	runID := pathID(r, "runId")
	if !validID(runID) {
		writeError(w, http.StatusBadRequest, "INVALID_INPUT", "runId must be 1 to 128 characters of A-Z, a-z, 0-9, '.', '_', ':' or '-'.")
		return
	}
	after, ok := parseAfter(r)
	if !ok {
		writeError(w, http.StatusBadRequest, "INVALID_LAST_EVENT_ID", "Last-Event-ID (or after) must be a non-negative event number of this run.")
		return
	}
	st := s.cfg.Engine.Store()
	ctx := r.Context()
	rctx, cancel := context.WithTimeout(ctx, storeTimeout)
	rec, err := st.GetRun(rctx, th.ID, runID)
	cancel()
	if errors.Is(err, store.ErrNotFound) {
		writeError(w, http.StatusNotFound, "RUN_NOT_FOUND", "No such run.")
		return
	}
	if err != nil {
		s.storeDown(w, "get run", err)
		return
	}
	// Any replay needs the log's head: from 0 it is the stream's start, from an id it is the
	// RUN_STARTED that the restatement begins with.
	expired, err := s.logExpired(ctx, rec)
	if err != nil {
		s.storeDown(w, "read events", err)
		return
	}
	if expired {
		writeError(w, http.StatusGone, "EVENTS_EXPIRED", "The events of this run are no longer kept.")
		return
	}

	// Read up to the client's position, to restate what is open there.
	var tr openTracker
	var last int64
	// restarted: nothing of the run was stored up to the client's position, and the log
	// starts after it (a run taken over, or ended, before its first events were stored):
	// the stream is followed from there, its own RUN_STARTED first.
	restarted := false
	// owner is the run's record as the catch-up last saw its owner change (ownerAlive).
	owner := rec
	deadline := time.Now().Add(catchUpWait)
	for last < after {
		rctx, cancel := context.WithTimeout(ctx, storeTimeout)
		evs, err := st.Events(rctx, th.ID, runID, last, store.MaxEventsRead)
		cancel()
		if err != nil {
			s.storeDown(w, "read events", err)
			return
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
		// little; a run that has ended, or a wait that ran out, means the id is not one of
		// this run's.
		if tr.terminal != nil || !s.runGoingOn(ctx, th.ID, runID) || time.Now().After(deadline) && s.ownerAlive(ctx, th.ID, runID, &owner, &deadline) {
			if last == 0 && rec.State != store.RunRunning && rec.State != store.RunLost {
				// An ended run with nothing left in its log: swept (server.event_retention).
				writeError(w, http.StatusGone, "EVENTS_EXPIRED", "The events of this run are no longer kept.")
				return
			}
			writeError(w, http.StatusBadRequest, "INVALID_LAST_EVENT_ID", "Last-Event-ID is not an event of this run (or its log has expired).")
			return
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(followPoll):
		}
	}
	if after > 0 && tr.runStarted == nil && !restarted {
		writeError(w, http.StatusGone, "EVENTS_EXPIRED", "The events of this run are no longer kept.")
		return
	}

	leave, ok := s.joinFollowers(w, who, th.ID, runID)
	if !ok {
		return
	}
	defer leave()
	// Under server.on_disconnect: detach this stream keeps a detached run from being
	// cancelled while it lasts; its end starts the reconnect grace again. Only a request
	// that is served attaches: a refused one must not hold the run or restart its grace.
	detach := s.cfg.Engine.Attach(th.ID, runID)
	defer detach()
	sse := agui.NewSSEWriter(w)
	// A reader that takes nothing does not hold this handler: its write fails at the
	// deadline (server.stream_write_timeout).
	sse.SetWriteTimeout(s.cfg.WriteTimeout)
	defer sse.Close()
	s.replay(ctx, sse, th.ID, runID, after, restarted, &tr)
}

// frameSink is where a followed stream goes (agui.SSEWriter).
type frameSink interface {
	Start() error
	WriteRaw([]agui.RawFrame) error
	Ping() error
}

// replay restates the stream at the client's position (or starts it) and follows the log.
// joinFollowers counts a follower of the run for who against server.max_followers_per_run
// and server.max_followers_per_principal, or answers 429 TOO_MANY_FOLLOWERS.
func (s *server) joinFollowers(w http.ResponseWriter, who, threadID, runID string) (leave func(), ok bool) {
	leave, err := s.cfg.Followers.Join(who, threadID+"\x00"+runID, s.cfg.MaxFollowersPerRun)
	if err == nil {
		return leave, true
	}
	w.Header().Set("Retry-After", retryAfterBusy)
	msg := "Too many streams follow this run; try again later."
	if errors.Is(err, followers.ErrPrincipalFull) {
		msg = "You follow too many streams at once; close some, or try again later."
	}
	writeError(w, http.StatusTooManyRequests, "TOO_MANY_FOLLOWERS", msg)
	return nil, false
}

func (s *server) replay(ctx context.Context, sse frameSink, threadID, runID string, after int64, restarted bool, tr *openTracker) {
	if after > 0 && !restarted {
		if err := sse.WriteRaw(tr.restate(after)); err != nil {
			return
		}
		if tr.terminal != nil {
			return
		}
	} else if err := sse.Start(); err != nil {
		return
	}
	s.follow(ctx, sse, threadID, runID, after, tr)
}

// logExpired reports whether a replay from the start is impossible because the retention
// sweep (server.event_retention) took the run's first events: what is left would not begin
// with RUN_STARTED, so no client could accept it. An ended run with an empty log is expired
// too; a running or lost one may still be writing its first events (or be ended for its
// followers with RUN_LOST).
func (s *server) logExpired(ctx context.Context, rec *store.RunRecord) (bool, error) {
	rctx, cancel := context.WithTimeout(ctx, storeTimeout)
	defer cancel()
	head, err := s.cfg.Engine.Store().Events(rctx, rec.ThreadID, rec.RunID, 0, 1)
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
func (s *server) runGoingOn(ctx context.Context, threadID, runID string) bool {
	rctx, cancel := context.WithTimeout(ctx, storeTimeout)
	defer cancel()
	run, err := s.cfg.Engine.Store().GetRun(rctx, threadID, runID)
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
func (s *server) ownerAlive(ctx context.Context, threadID, runID string, first **store.RunRecord, deadline *time.Time) bool {
	rctx, cancel := context.WithTimeout(ctx, storeTimeout)
	defer cancel()
	run, err := s.cfg.Engine.Store().GetRun(rctx, threadID, runID)
	if err != nil {
		return true
	}
	if run.Replica != (*first).Replica {
		*first, *deadline = run, time.Now().Add(catchUpWait)
		return false
	}
	return s.cfg.Engine.LogChanged(threadID, runID) != nil || run.LeaseUntil.After((*first).LeaseUntil)
}

// follow streams the run's logged events after `after` until its terminal event. It reads
// them from the run's shared tail (tails), and reads the store itself only while it is
// further behind than the tail keeps.
func (s *server) follow(ctx context.Context, sse frameSink, threadID, runID string, after int64, tr *openTracker) {
	st := s.cfg.Engine.Store()
	tl := s.tails.acquire(threadID+"\x00"+runID, tailSource{st: st, threadID: threadID, runID: runID,
		goingOn: func(ctx context.Context) bool { return s.runGoingOn(ctx, threadID, runID) },
		changed: func() <-chan struct{} { return s.cfg.Engine.LogChanged(threadID, runID) },
	}, after)
	defer tl.release()
	ping := time.NewTicker(s.cfg.PingInterval)
	defer ping.Stop()
	for {
		evs, wake, state, covered := tl.since(after)
		if !covered {
			rctx, cancel := context.WithTimeout(ctx, storeTimeout)
			var err error
			evs, err = st.Events(rctx, threadID, runID, after, store.MaxEventsRead)
			cancel()
			if err != nil {
				s.log.Warn("reconnect: read events", "err", err)
				return // the client reconnects with its Last-Event-ID
			}
		}
		frames := make([]agui.RawFrame, 0, len(evs))
		done := false
		for _, ev := range evs {
			frames = append(frames, agui.RawFrame{ID: ev.Seq, Data: ev.Data})
			after = ev.Seq
			if tr.add(ev) {
				done = true
				break
			}
		}
		if err := sse.WriteRaw(frames); err != nil || done {
			return
		}
		if len(evs) > 0 {
			continue // the tail may hold more, or the store more pages
		}
		switch state {
		case tailLost:
			_ = sse.WriteRaw([]agui.RawFrame{{ID: after, Data: lostRunError}})
			return
		case tailFailed:
			s.log.Warn("reconnect: the run's tail could not read its events")
			return // the client reconnects with its Last-Event-ID
		}
		select {
		case <-ctx.Done():
			return
		case <-wake:
		case <-ping.C:
			if err := sse.Ping(); err != nil {
				return
			}
		}
	}
}

// lostRunError ends a followed stream whose run ended without a terminal event.
var lostRunError = func() []byte {
	b, _ := agui.MarshalEvent(&agui.RunError{Code: "RUN_LOST", Message: "The run was interrupted and did not finish."})
	return b
}()
