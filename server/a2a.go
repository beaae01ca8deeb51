package server

import (
	"bytes"
	"errors"
	"io"
	"net/http"

	"github.com/go-chi/chi/v5"

	"github.com/baton-dev/baton/internal/principal"
)

// A2APaths are where the A2A surface is mounted when Config.A2A is set (DESIGN §3): the
// card, the JSON-RPC binding at /a2a and the HTTP+JSON binding's routes under /a2a/.
const (
	A2ACardPath = "/.well-known/agent-card.json"
	A2APath     = "/a2a"
)

// routeA2A mounts the A2A handler behind the same guards as /agui: the DNS-rebinding and
// CSRF checks (guard, for every route), the bearer token (a 401 with an RFC 6750 challenge),
// the body cap and read deadline. max_active_runs is applied where a message starts a run
// (a CancelTask must get through at capacity). The card is public, as
// A2A discovery expects: it says which scheme the other routes require. A nil h mounts
// nothing.
func routeA2A(r chi.Router, h http.Handler, auth *authn, maxBody int64) {
	if h == nil {
		return
	}
	r.Method(http.MethodGet, A2ACardPath, h)
	r.Method(http.MethodOptions, A2ACardPath, h)
	serve := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { serveA2A(w, r, h, auth, maxBody) })
	r.Handle(A2APath, serve)
	r.Handle(A2APath+"/*", serve)
}

// serveA2A authenticates a request to the A2A bindings and hands it to h with its
// principal, its body read (at most maxBody bytes).
func serveA2A(w http.ResponseWriter, r *http.Request, h http.Handler, auth *authn, maxBody int64) {
	who, ok := auth.principal(r)
	if !ok {
		w.Header().Set("WWW-Authenticate", `Bearer realm="baton"`)
		writeError(w, http.StatusUnauthorized, "UNAUTHORIZED", "A valid bearer token is required.")
		return
	}
	if r.Body != nil && r.Body != http.NoBody {
		// The body is read here, bounded, so that its read deadline (guard) is lifted
		// before a streaming answer starts, and so that the A2A handlers (which set no
		// limit of their own) never see more than max_body_bytes.
		body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxBody))
		if err != nil {
			var tooBig *http.MaxBytesError
			if errors.As(err, &tooBig) {
				writeError(w, http.StatusRequestEntityTooLarge, "BODY_TOO_LARGE", "The request body is too large.")
				return
			}
			writeError(w, http.StatusBadRequest, "INVALID_INPUT", "The request body could not be read.")
			return
		}
		bodyRead(w)
		r.Body = io.NopCloser(bytes.NewReader(body))
	}
	h.ServeHTTP(w, r.WithContext(principal.With(r.Context(), who)))
}
