package server

import (
	"bytes"
	"context"
	"io"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"strconv"
	"time"

	"github.com/baton-dev/baton/agui"
)

// Forwarding of resumes to the replica that holds an in-session MCP elicitation
// (design/replica-forwarding.md). A 2025-11-25 server waits inside its tool call for the
// answer, and only the process that made the call can hand it over; every other resume runs
// on any replica. The forwarded request is the client's own request, sent on to the holder's
// advertised URL with the client's headers (its bearer token included): the holder
// authenticates and authorises it exactly as if the client had sent it there, and no replica
// gets a credential or an endpoint that a client does not have.

// forwardedHeader marks a request forwarded by another replica. It only stops a second
// forward (no loops); it grants nothing, so a client that sends it merely runs its resume
// where it landed.
const forwardedHeader = "Baton-Forwarded"

// forwardedEpochHeader carries the epoch that the resume's run had in the store when the
// request was forwarded (0: no such run yet). The holder refuses the request (409
// RUN_MOVED) when the run's epoch is another by the time it gets it: a holder that was
// paused past forwardTimeout must not run a resume that the forwarding replica has run
// meanwhile (its BeginRun would take over, and rewrite, that run).
const forwardedEpochHeader = "Baton-Forwarded-Epoch"

// forwardTimeout bounds reaching the holder and its answer (the response's headers): a
// replica that is gone or paused is noticed quickly, and the resume then runs here (where
// the lost call becomes a tool error for the model).
const forwardTimeout = 2 * time.Second

// forwardTransport reaches other replicas. It is not http.DefaultTransport, so that no
// proxy from the environment sees the client's token on its way between replicas.
var forwardTransport = &http.Transport{
	DialContext:           (&net.Dialer{Timeout: forwardTimeout}).DialContext,
	ResponseHeaderTimeout: forwardTimeout,
	MaxIdleConnsPerHost:   4,
	IdleConnTimeout:       90 * time.Second,
}

// forwardResume sends a resume to the replica that holds one of its thread's in-session
// elicitations and relays that replica's response. It reports false when nothing was
// forwarded (not a resume, already forwarded, nothing held elsewhere, or the holder could
// not be reached): the caller then runs the request here, from body. A resume from a
// principal who does not own the thread is refused here, never forwarded.
func (h *runHandler) forwardResume(w http.ResponseWriter, r *http.Request, in *agui.RunAgentInput, who string, body []byte) bool {
	if len(in.Resume) == 0 || r.Header.Get(forwardedHeader) != "" {
		return false
	}
	ctx, cancel := context.WithTimeout(r.Context(), 5*time.Second)
	home, err := h.engine.SessionHome(ctx, in.ThreadID, who)
	cancel()
	if err != nil {
		writeEngineError(h.log, w, err)
		return true
	}
	if home == "" {
		return false
	}
	target, err := url.Parse(home)
	if err != nil || (target.Scheme != "http" && target.Scheme != "https") || target.Host == "" {
		h.log.Warn("a stored replica address is not usable; the resume runs here", "thread_id", in.ThreadID)
		return false
	}
	// SessionHome authorised who against the thread's owner: the epoch is of who's run.
	epoch, _, err := h.engine.RunEpoch(r.Context(), who, in.ThreadID, in.RunID)
	if err != nil {
		writeEngineError(h.log, w, err)
		return true
	}
	var responded, unreachable bool
	proxy := &httputil.ReverseProxy{
		Rewrite: func(pr *httputil.ProxyRequest) {
			pr.SetURL(target)
			pr.Out.URL.Path = singleJoin(target.Path, "/agui")
			pr.Out.URL.RawPath = ""
			// The client's Host stays: the holder checks Origin against it as this
			// replica did.
			pr.Out.Host = r.Host
			pr.Out.Header.Set(forwardedHeader, "1")
			pr.Out.Header.Set(forwardedEpochHeader, strconv.FormatInt(epoch, 10))
			pr.Out.Body = io.NopCloser(bytes.NewReader(body))
			pr.Out.ContentLength = int64(len(body))
		},
		Transport:     forwardTransport,
		FlushInterval: -1, // SSE: every frame at once
		ModifyResponse: func(*http.Response) error {
			responded = true
			return nil
		},
		ErrorHandler: func(w http.ResponseWriter, _ *http.Request, err error) {
			if !responded && r.Context().Err() == nil {
				unreachable = true // nothing written yet: the caller runs the resume here
				h.log.Warn("the replica that holds the elicitation is unreachable; the resume runs here",
					"thread_id", in.ThreadID, "err", err)
				return
			}
			// The client left, or the holder's stream broke after it started: there is
			// nothing more to send; the client reconnects (GET .../events) or retries.
		},
	}
	h.log.Info("resume forwarded to the replica that holds the elicitation", "thread_id", in.ThreadID, "to", target.Host)
	proxy.ServeHTTP(w, r)
	return !unreachable
}

// staleForward refuses a forwarded request whose run's epoch moved on since it was
// forwarded (the forwarding replica gave up waiting and ran it, or another replica took it
// over): 409 RUN_MOVED, and nothing of the run is touched. It reports whether it refused.
// Only the thread's owner is told: anyone else's request goes on to be refused as a start
// would be (the answer does not tell a stranger that a run exists).
func (h *runHandler) staleForward(w http.ResponseWriter, r *http.Request, in *agui.RunAgentInput, who string) bool {
	v := r.Header.Get(forwardedEpochHeader)
	if v == "" || r.Header.Get(forwardedHeader) == "" {
		return false
	}
	sent, err := strconv.ParseInt(v, 10, 64)
	if err != nil || sent < 0 {
		writeError(w, http.StatusBadRequest, "INVALID_REQUEST", "The "+forwardedEpochHeader+" header must be a non-negative integer.")
		return true
	}
	now, yours, err := h.engine.RunEpoch(r.Context(), who, in.ThreadID, in.RunID)
	if err != nil {
		writeEngineError(h.log, w, err)
		return true
	}
	if now == sent || !yours {
		return false
	}
	h.log.Warn("a forwarded request arrived after its run moved on; refused", "thread_id", in.ThreadID, "run_id", in.RunID,
		"sent_epoch", sent, "epoch", now)
	writeError(w, http.StatusConflict, "RUN_MOVED", "The run was started or taken over elsewhere meanwhile; follow it with GET /agui/threads/{threadId}/runs/{runId}/events.")
	return true
}

// singleJoin joins a base path and "/agui" with one slash.
func singleJoin(base, p string) string {
	for len(base) > 0 && base[len(base)-1] == '/' {
		base = base[:len(base)-1]
	}
	return base + p
}
