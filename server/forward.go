package server

import (
	"bytes"
	"context"
	"io"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
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

// forwardDialTimeout bounds reaching the holder: a replica that is gone is noticed quickly,
// and the resume then runs here (where the lost call becomes a tool error for the model).
const forwardDialTimeout = 2 * time.Second

// forwardTransport reaches other replicas. It is not http.DefaultTransport, so that no
// proxy from the environment sees the client's token on its way between replicas.
var forwardTransport = &http.Transport{
	DialContext:           (&net.Dialer{Timeout: forwardDialTimeout}).DialContext,
	ResponseHeaderTimeout: 30 * time.Second,
	MaxIdleConnsPerHost:   4,
	IdleConnTimeout:       90 * time.Second,
}

// forwardResume sends a resume to the replica that holds one of its thread's in-session
// elicitations and relays that replica's response. It reports false when nothing was
// forwarded (not a resume, already forwarded, nothing held elsewhere, or the holder could
// not be reached): the caller then runs the request here, from body. A resume from a
// principal who does not own the thread is refused here, never forwarded.
func (s *server) forwardResume(w http.ResponseWriter, r *http.Request, in *agui.RunAgentInput, who string, body []byte) bool {
	if len(in.Resume) == 0 || r.Header.Get(forwardedHeader) != "" {
		return false
	}
	ctx, cancel := context.WithTimeout(r.Context(), 5*time.Second)
	home, err := s.cfg.Engine.SessionHome(ctx, in.ThreadID, who)
	cancel()
	if err != nil {
		s.writeEngineError(w, err)
		return true
	}
	if home == "" {
		return false
	}
	target, err := url.Parse(home)
	if err != nil || (target.Scheme != "http" && target.Scheme != "https") || target.Host == "" {
		s.log.Warn("a stored replica address is not usable; the resume runs here", "thread_id", in.ThreadID)
		return false
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
				s.log.Warn("the replica that holds the elicitation is unreachable; the resume runs here",
					"thread_id", in.ThreadID, "err", err)
				return
			}
			// The client left, or the holder's stream broke after it started: there is
			// nothing more to send; the client reconnects (GET .../events) or retries.
		},
	}
	s.log.Info("resume forwarded to the replica that holds the elicitation", "thread_id", in.ThreadID, "to", target.Host)
	proxy.ServeHTTP(w, r)
	return !unreachable
}

// singleJoin joins a base path and "/agui" with one slash.
func singleJoin(base, p string) string {
	for len(base) > 0 && base[len(base)-1] == '/' {
		base = base[:len(base)-1]
	}
	return base + p
}
