package server

import (
	"errors"
	"iter"
	"net/http"

	"github.com/baton-dev/baton/agui"
	"github.com/baton-dev/baton/runs"
)

// The reconnect stream, GET /agui/threads/{threadId}/runs/{runId}/events (DESIGN §9a): the
// engine's port follows the run from its stored log on any replica (coordinator.Runs.Events),
// restating what is open at the client's position; this surface writes it as SSE.

func (h *threadHandler) handleRunEvents(w http.ResponseWriter, r *http.Request) {
	th, who := h.threadOf(w, r)
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
	ctx := r.Context()
	evs, err := h.engine.Events(ctx, who, th.ID, runID, after, runs.FollowOptions{Restate: true, Attach: true, Ping: h.pingInterval})
	switch {
	case err == nil:
	case errors.Is(err, runs.ErrRunNotFound):
		writeError(w, http.StatusNotFound, "RUN_NOT_FOUND", "No such run.")
		return
	case errors.Is(err, runs.ErrThreadNotFound):
		writeError(w, http.StatusNotFound, "THREAD_NOT_FOUND", "No such thread.")
		return
	case errors.Is(err, runs.ErrEventsExpired):
		writeError(w, http.StatusGone, "EVENTS_EXPIRED", "The events of this run are no longer kept.")
		return
	case errors.Is(err, runs.ErrBadPosition):
		writeError(w, http.StatusBadRequest, "INVALID_LAST_EVENT_ID", "Last-Event-ID is not an event of this run (or its log has expired).")
		return
	case errors.Is(err, runs.ErrTooManyFollowers):
		w.Header().Set("Retry-After", retryAfterBusy)
		msg := "Too many streams follow this run; try again later."
		if errors.Is(err, runs.ErrPrincipalFollowers) {
			msg = "You follow too many streams at once; close some, or try again later."
		}
		writeError(w, http.StatusTooManyRequests, "TOO_MANY_FOLLOWERS", msg)
		return
	case ctx.Err() != nil:
		return
	default:
		storeDown(h.log, w, "follow run", err)
		return
	}
	sse := agui.NewSSEWriter(w)
	// A reader that takes nothing does not hold this handler: its write fails at the
	// deadline (server.stream_write_timeout).
	sse.SetWriteTimeout(h.writeTimeout)
	defer sse.Close()
	h.follow(sse, evs)
}

// frameSink is where a followed stream goes (agui.SSEWriter).
type frameSink interface {
	Start() error
	WriteRaw([]agui.RawFrame) error
	Ping() error
}

// follow writes a followed run's events: each batch in one write, an empty batch as a
// keep-alive. A read error ends the stream without its terminal event: the client
// reconnects with its Last-Event-ID.
func (h *threadHandler) follow(sse frameSink, evs iter.Seq2[[]runs.Event, error]) {
	if err := sse.Start(); err != nil {
		return
	}
	var frames []agui.RawFrame
	for batch, err := range evs {
		if err != nil {
			h.log.Warn("reconnect: read events", "err", err)
			return
		}
		if len(batch) == 0 {
			if sse.Ping() != nil {
				return
			}
			continue
		}
		frames = frames[:0]
		for _, ev := range batch {
			frames = append(frames, agui.RawFrame{ID: ev.Seq, Data: ev.Data})
		}
		if sse.WriteRaw(frames) != nil {
			return
		}
	}
}
