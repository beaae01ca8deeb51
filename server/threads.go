package server

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/baton-dev/baton/agui"
	"github.com/baton-dev/baton/runs"
)

// Thread endpoints (DESIGN §3, §9a): the principal's thread list, one thread's messages and
// open interrupts, deleting a thread, and the reconnect stream of a run's events.

// maxListedThreads bounds GET /agui/threads (?limit=, default defaultListedThreads).
const (
	maxListedThreads     = 500
	defaultListedThreads = 100
)

// storeTimeout bounds the store reads of one request (the event stream reads in steps).
const storeTimeout = 10 * time.Second

// validID reports whether s is a thread or run id as DESIGN §3 allows: 1 to 128 characters
// of [A-Za-z0-9._:-].
func validID(s string) bool {
	if len(s) == 0 || len(s) > 128 {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '.' || c == '_' || c == ':' || c == '-') {
			return false
		}
	}
	return true
}

// threadHandler serves the thread endpoints: the list, one thread, deleting it, its journal
// (journal.go) and the reconnect stream of its runs (reconnect.go).
type threadHandler struct {
	engine       Engine
	auth         *authn
	log          *slog.Logger
	pingInterval time.Duration // keep-alive of the reconnect stream
	writeTimeout time.Duration // bounds each write of the reconnect stream
}

// threadOf authenticates the request and loads its thread for the principal. It writes the
// error response and returns nil when the request cannot go on: a thread that does not
// exist and another principal's thread are both 404, so that nobody learns which exist.
func (h *threadHandler) threadOf(w http.ResponseWriter, r *http.Request) (*runs.Thread, string) {
	who, ok := h.auth.principal(r)
	if !ok {
		h.auth.unauthorized(w, r)
		return nil, ""
	}
	id := pathID(r, "threadId")
	if !validID(id) {
		writeError(w, http.StatusBadRequest, "INVALID_INPUT", "threadId must be 1 to 128 characters of A-Z, a-z, 0-9, '.', '_', ':' or '-'.")
		return nil, ""
	}
	th, err := h.engine.Thread(r.Context(), who, id)
	if err != nil {
		h.threadError(w, err)
		return nil, ""
	}
	return th, who
}

// threadError answers a thread read the port refused.
func (h *threadHandler) threadError(w http.ResponseWriter, err error) {
	switch {
	case errors.Is(err, runs.ErrThreadExpired):
		writeError(w, http.StatusNotFound, "THREAD_EXPIRED", "This thread was deleted after a period without use (thread retention).")
	case errors.Is(err, runs.ErrThreadNotFound):
		writeError(w, http.StatusNotFound, "THREAD_NOT_FOUND", "No such thread.")
	default:
		storeDown(h.log, w, "get thread", err)
	}
}

type threadSummary struct {
	ThreadID       string    `json:"threadId"`
	UpdatedAt      time.Time `json:"updatedAt"`
	Running        bool      `json:"running"`
	OpenInterrupts int       `json:"openInterrupts"`
	Title          string    `json:"title,omitempty"`
}

func (h *threadHandler) handleListThreads(w http.ResponseWriter, r *http.Request) {
	who, ok := h.auth.principal(r)
	if !ok {
		h.auth.unauthorized(w, r)
		return
	}
	limit := defaultListedThreads
	if v := r.URL.Query().Get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > maxListedThreads {
			writeError(w, http.StatusBadRequest, "INVALID_INPUT", "limit must be a number from 1 to 500.")
			return
		}
		limit = n
	}
	list, err := h.engine.Threads(r.Context(), who, limit)
	if err != nil {
		storeDown(h.log, w, "list threads", err)
		return
	}
	out := make([]threadSummary, 0, len(list))
	for _, t := range list {
		out = append(out, threadSummary{ThreadID: t.ID, UpdatedAt: t.UpdatedAt, Running: t.Running, OpenInterrupts: t.OpenInterrupts, Title: t.Title})
	}
	writeJSON(w, http.StatusOK, map[string]any{"threads": out})
}

type threadRun struct {
	RunID  string `json:"runId"`
	Status string `json:"status"`
}

type threadDoc struct {
	ThreadID   string            `json:"threadId"`
	Messages   []json.RawMessage `json:"messages"`
	Interrupts []agui.Interrupt  `json:"interrupts"`
	Run        *threadRun        `json:"run,omitempty"`
	Usage      threadUsage       `json:"usage"`
}

// threadUsage is what the thread's model calls used (DESIGN §3).
type threadUsage struct {
	InputTokens  int64   `json:"inputTokens"`
	OutputTokens int64   `json:"outputTokens"`
	CostUSD      float64 `json:"costUsd"`
}

func (h *threadHandler) handleGetThread(w http.ResponseWriter, r *http.Request) {
	who, ok := h.auth.principal(r)
	if !ok {
		h.auth.unauthorized(w, r)
		return
	}
	id := pathID(r, "threadId")
	if !validID(id) {
		writeError(w, http.StatusBadRequest, "INVALID_INPUT", "threadId must be 1 to 128 characters of A-Z, a-z, 0-9, '.', '_', ':' or '-'.")
		return
	}
	d, err := h.engine.ThreadDoc(r.Context(), who, id)
	if err != nil {
		h.threadError(w, err)
		return
	}
	doc := threadDoc{ThreadID: d.Thread.ID, Messages: d.Messages, Interrupts: d.Interrupts,
		Usage: threadUsage{InputTokens: d.Usage.InputTokens, OutputTokens: d.Usage.OutputTokens, CostUSD: d.Usage.CostUSD}}
	if doc.Messages == nil {
		doc.Messages = []json.RawMessage{}
	}
	if doc.Interrupts == nil {
		doc.Interrupts = []agui.Interrupt{}
	}
	if d.ActiveRun != nil {
		doc.Run = &threadRun{RunID: d.ActiveRun.RunID, Status: d.ActiveRun.State}
	}
	writeJSON(w, http.StatusOK, doc)
}

// storeDown answers a request that needed the store while it could not be reached or
// written: 503 STORE_UNAVAILABLE with Retry-After (DESIGN §3), never 404 or 500, whatever
// the store was asked. It is the one place where store errors become a response.
func storeDown(log *slog.Logger, w http.ResponseWriter, what string, err error) {
	log.Error("store: "+what, "err", err)
	w.Header().Set("Retry-After", retryAfterStore)
	writeError(w, http.StatusServiceUnavailable, "STORE_UNAVAILABLE", "The store is not reachable right now; try again shortly.")
}

func (h *threadHandler) handleDeleteThread(w http.ResponseWriter, r *http.Request) {
	th, who := h.threadOf(w, r)
	if th == nil {
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), storeTimeout)
	defer cancel()
	err := h.engine.DeleteThread(ctx, th.ID, who)
	switch {
	case err == nil:
		w.WriteHeader(http.StatusNoContent)
	case errors.Is(err, runs.ErrThreadNotFound):
		writeError(w, http.StatusNotFound, "THREAD_NOT_FOUND", "No such thread.")
	case errors.Is(err, runs.ErrThreadBusy):
		writeError(w, http.StatusConflict, "THREAD_BUSY", "This thread has an active run; stop it first.")
	default:
		storeDown(h.log, w, "delete thread", err)
	}
}

// parseAfter reads the replay position: the Last-Event-ID header wins over ?after=; none
// means from the start.
func parseAfter(r *http.Request) (int64, bool) {
	v := r.Header.Get("Last-Event-ID")
	if v == "" {
		v = r.URL.Query().Get("after")
	}
	if v == "" {
		return 0, true
	}
	n, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
	if err != nil || n < 0 {
		return 0, false
	}
	return n, true
}
