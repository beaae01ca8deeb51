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
// A2A discovery expects: it says which scheme the other routes require.
func (s *server) routeA2A(r chi.Router) {
	if s.cfg.A2A == nil {
		return
	}
	r.Method(http.MethodGet, A2ACardPath, s.cfg.A2A)
	r.Method(http.MethodOptions, A2ACardPath, s.cfg.A2A)
	h := http.HandlerFunc(s.serveA2A)
	r.Handle(A2APath, h)
	r.Handle(A2APath+"/*", h)
}

func (s *server) serveA2A(w http.ResponseWriter, r *http.Request) {
	who, ok := s.principal(r)
	if !ok {
		w.Header().Set("WWW-Authenticate", `Bearer realm="baton"`)
		writeError(w, http.StatusUnauthorized, "UNAUTHORIZED", "A valid bearer token is required.")
		return
	}
	if r.Body != nil && r.Body != http.NoBody {
		// The body is read here, bounded, so that its read deadline (guard) is lifted
		// before a streaming answer starts, and so that the A2A handlers (which set no
		// limit of their own) never see more than max_body_bytes.
		body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, s.cfg.MaxBodyBytes))
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
	s.cfg.A2A.ServeHTTP(w, r.WithContext(principal.With(r.Context(), who)))
}
