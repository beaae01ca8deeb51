package server

import (
	"bytes"
	"context"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"os"
	"time"

	"github.com/baton-dev/baton/agui"
	"github.com/baton-dev/baton/runs"
)

// runHandler serves starting a run (POST /agui, its stream, and forwarding a resume to the
// replica that holds its elicitation: forward.go) and stopping one.
type runHandler struct {
	engine        Engine
	auth          *authn
	signIn        *signInHandler // sets the sign-in cookie of a run that may need one
	log           *slog.Logger
	maxBodyBytes  int64
	maxActiveRuns int
	pingInterval  time.Duration
	writeTimeout  time.Duration
}

func (h *runHandler) handleRun(w http.ResponseWriter, r *http.Request) {
	who, ok := h.auth.principal(r)
	if !ok {
		h.auth.unauthorized(w, r)
		return
	}
	if !jsonContentType(r) {
		writeError(w, http.StatusUnsupportedMediaType, "UNSUPPORTED_MEDIA_TYPE", "The body must be sent as Content-Type: application/json.")
		return
	}
	// The body is kept (bounded: the decoder reads at most MaxBodyBytes) in case the resume
	// must be forwarded to another replica.
	var raw bytes.Buffer
	in, err := agui.DecodeRunAgentInput(io.TeeReader(r.Body, &raw), h.maxBodyBytes)
	if err != nil {
		agui.WriteInputError(w, err)
		return
	}
	bodyRead(w)
	if h.staleForward(w, r, in, who) || h.forwardResume(w, r, in, who, raw.Bytes()) {
		return
	}
	// The request's trace context (telemetry.Extract) parents the run; only the span
	// context is kept, the run outlives the request. The engine admits it against
	// server.max_active_runs in one step with every other start, on every surface.
	run, err := h.engine.Start(r.Context(), in, who, runs.StartOptions{MaxActive: h.maxActiveRuns})
	if err != nil {
		writeEngineError(h.log, w, err)
		return
	}
	// The browser may have to sign in to an MCP server during this run (oauth.go).
	h.signIn.setSignInCookie(w, r, who)
	h.stream(w, r, run)
}

// stream relays the run's events as SSE until the terminal event or a disconnect
// (design/streams.md).
//
// A client that falls more than the run's stream buffer behind is not dropped: the run
// releases what is pending (NextFrom then starts beyond the last event sent) and the stream
// writes what it missed from the run's event log before the live events. Only a client that
// takes nothing for WriteTimeout is dropped: the write fails, the connection is closed
// without the response's end, so the client sees a broken stream and never a complete
// one, and the run is told (Stream.ClientGone: cancelled under server.on_disconnect: cancel,
// detached for a reconnect under detach).
func (h *runHandler) stream(w http.ResponseWriter, r *http.Request, run *runs.Started) {
	sse := agui.NewSSEWriter(w)
	sse.SetWriteTimeout(h.writeTimeout)
	clean := false
	defer func() {
		if clean {
			sse.Close()
			return
		}
		// A broken stream must not end like a complete one, nor hold this goroutine on
		// a client that reads nothing: the final flush fails at once and the
		// connection is closed.
		sse.Abort()
	}()
	ctx := r.Context()
	ping := time.NewTicker(h.pingInterval)
	defer ping.Stop()
	var sent int64 // the sequence number of the last event written
	for {
		first, events, ended := run.Stream.NextFrom()
		if first-1 > sent {
			if err := h.catchUp(ctx, sse, run, &sent, first-1); err != nil {
				h.clientGone(run, err)
				return
			}
		}
		if ended {
			// The thread is freed before the client can see the terminal event, so a
			// client that posts its next run on RUN_FINISHED is never refused with 409.
			<-run.Stream.Released()
		}
		// Each frame carries its sequence number in the run as its SSE id (DESIGN §3).
		if err := sse.WriteEventsFrom(first, events); err != nil {
			h.clientGone(run, err)
			return
		}
		sent = first - 1 + int64(len(events))
		if ended {
			clean = true
			return
		}
		select {
		case <-run.Stream.Wake():
		case <-ping.C:
			if err := sse.Ping(); err != nil {
				h.clientGone(run, err)
				return
			}
		case <-ctx.Done():
			run.Stream.ClientGone(runs.ErrClientGone)
			return
		}
	}
}

// A stream that fell behind reads the log in pages: the first of firstBacklogPage events,
// each next one twice as many (up to backlogPage) while a page stays under half of
// backlogPageBytes, half as many while it passes them. A page is held until the client
// took it, and a client that reads nothing holds it for the write timeout: pages of a
// run's large text deltas are kept small, pages of small events grow to save round trips.
const (
	firstBacklogPage = 16
	backlogPage      = 128
	backlogPageBytes = 64 << 10
)

// catchUp writes the run's events after *sent up to upto from its event log: the live
// stream released them when its client fell more than the stream buffer behind.
func (h *runHandler) catchUp(ctx context.Context, sse *agui.SSEWriter, run *runs.Started, sent *int64, upto int64) error {
	frames := make([]agui.RawFrame, 0, backlogPage)
	page := firstBacklogPage
	for *sent < upto {
		evs, err := run.Stream.Backlog(ctx, *sent, upto, page)
		if err != nil {
			return err
		}
		if len(evs) == 0 {
			// The log lost these (its writer logged why); the stream goes on after them.
			h.log.Warn("event stream: events missing from the event log were skipped", "from", *sent+1, "to", upto)
			*sent = upto
			return nil
		}
		frames = frames[:0]
		size := 0
		for _, ev := range evs {
			frames = append(frames, agui.RawFrame{ID: ev.Seq, Data: ev.Data})
			size += len(ev.Data)
		}
		switch {
		case size > backlogPageBytes:
			page = max(page/2, 1)
		case size < backlogPageBytes/2:
			page = min(2*page, backlogPage)
		}
		if err := sse.WriteRaw(frames); err != nil {
			return err
		}
		*sent = evs[len(evs)-1].Seq
	}
	return nil
}

// clientGone tells the run that its stream failed with err: a client that took nothing
// for the write timeout is too slow, anything else is gone.
func (h *runHandler) clientGone(run *runs.Started, err error) {
	cause := runs.ErrClientGone
	if errors.Is(err, os.ErrDeadlineExceeded) {
		cause = runs.ErrClientTooSlow
		h.log.Info("client dropped: it took nothing for the stream write timeout", "thread_id", run.ThreadID, "run_id", run.RunID, "timeout", h.writeTimeout.String())
	}
	run.Stream.ClientGone(cause)
}

func (h *runHandler) handleStop(w http.ResponseWriter, r *http.Request) {
	who, ok := h.auth.principal(r)
	if !ok {
		h.auth.unauthorized(w, r)
		return
	}
	threadID, runID := pathID(r, "threadId"), pathID(r, "runId")
	if !agui.ValidID(threadID) || !agui.ValidID(runID) {
		writeError(w, http.StatusNotFound, "RUN_NOT_FOUND", "No such run.")
		return
	}
	err := h.engine.Stop(threadID, runID, who)
	if errors.Is(err, runs.ErrForbidden) {
		// Another principal's thread reads as an unknown one: a stop must not reveal
		// which threads exist.
		err = runs.ErrRunNotFound
	}
	if err != nil {
		writeEngineError(h.log, w, err)
		return
	}
	writeJSON(w, http.StatusAccepted, map[string]string{"status": "stopping"})
}
