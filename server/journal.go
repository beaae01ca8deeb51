package server

import (
	"net/http"
	"strconv"
	"time"

	"github.com/baton-dev/baton/runs"
)

// GET /agui/threads/{threadId}/journal (DESIGN §3, §9b; design/journal.md): the thread's
// step journal, oldest first, in pages.

const (
	defaultJournalLimit = 500
	maxJournalLimit     = runs.MaxStepsRead
)

// journalStep is one step as the endpoint shows it.
type journalStep struct {
	Seq         int64     `json:"seq"`
	RunID       string    `json:"runId"`
	At          time.Time `json:"at"`
	Kind        string    `json:"kind"`
	Target      string    `json:"target"`
	Attempt     int       `json:"attempt"`
	Outcome     string    `json:"outcome"`
	Tag         string    `json:"tag,omitempty"`
	FailureKind string    `json:"failureKind,omitempty"`
	InDoubt     bool      `json:"inDoubt,omitempty"`
	Replica     string    `json:"replica"`
	Detail      string    `json:"detail,omitempty"`
}

func (h *threadHandler) handleJournal(w http.ResponseWriter, r *http.Request) {
	who, ok := h.auth.principal(r)
	if !ok {
		h.auth.unauthorized(w, r)
		return
	}
	threadID := pathID(r, "threadId")
	if !validID(threadID) {
		writeError(w, http.StatusBadRequest, "INVALID_INPUT", "threadId must be 1 to 128 characters of A-Z, a-z, 0-9, '.', '_', ':' or '-'.")
		return
	}
	q := r.URL.Query()
	after := int64(0)
	if v := q.Get("after"); v != "" {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n < 0 {
			writeError(w, http.StatusBadRequest, "INVALID_INPUT", "after must be a non-negative step number.")
			return
		}
		after = n
	}
	limit := defaultJournalLimit
	if v := q.Get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > maxJournalLimit {
			writeError(w, http.StatusBadRequest, "INVALID_INPUT", "limit must be a number from 1 to 5000.")
			return
		}
		limit = n
	}
	steps, err := h.engine.Steps(r.Context(), who, threadID, after, limit)
	if err != nil {
		h.threadError(w, err)
		return
	}
	out := make([]journalStep, 0, len(steps))
	for _, st := range steps {
		out = append(out, journalStep{Seq: st.Seq, RunID: st.RunID, At: st.At, Kind: st.Kind, Target: st.Target,
			Attempt: st.Attempt, Outcome: st.Outcome, Tag: st.Tag, FailureKind: st.FailureKind, InDoubt: st.InDoubt,
			Replica: st.Replica, Detail: st.Detail})
	}
	w.Header().Set("Cache-Control", "no-store")
	writeJSON(w, http.StatusOK, map[string]any{"steps": out})
}
