package server

import (
	"context"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"time"
	"unicode/utf8"
)

// Groups of ReadyCheck.Group, the keys of the "checks" object of GET /readyz (DESIGN §3).
const (
	GroupStore  = "store"
	GroupModel  = "model"
	GroupAgents = "agents"
	GroupMCP    = "mcp"
	// GroupModels lists every model of the fallback chain (llm.model and llm.fallback) by
	// name; only with llm.fallback.
	GroupModels = "models"
)

// Readiness states of GET /readyz.
const (
	StatusReady    = "ready"
	StatusDegraded = "degraded"
	StatusDraining = "draining"
	StatusDown     = "down"
)

// ReadyCheck is one dependency probed by GET /readyz. Checks are registered by whoever
// wires the dependencies (cmd/coordinator registers the store, the model, and one check
// per agent and per MCP server), so the server knows nothing about the dependencies
// themselves.
type ReadyCheck struct {
	// Group is GroupStore, GroupModel, GroupAgents or GroupMCP. The store and the model
	// are single entries; agents and mcp are keyed by Name.
	Group string
	// Name is the agent or MCP server name; ignored for the store and the model.
	Name string
	// Check returns nil when the dependency is usable. Its error message is shown in the
	// readiness report (one line, capped), so it must hold no secret. It must be cheap:
	// /readyz is polled, and each check gets at most readyCheckTimeout.
	Check func(ctx context.Context) error
}

// readyCheckTimeout bounds each check of one /readyz request; checks run in parallel.
const readyCheckTimeout = 2 * time.Second

// maxReadyError caps an error message in the readiness report.
const maxReadyError = 200

// checkState is one entry of the readiness report.
type checkState struct {
	Status string `json:"status"`
	Error  string `json:"error,omitempty"`
}

// readyReport is the body of GET /readyz.
type readyReport struct {
	Status string `json:"status"`
	Checks struct {
		Store  *checkState            `json:"store,omitempty"`
		Model  *checkState            `json:"model,omitempty"`
		Agents map[string]*checkState `json:"agents"`
		MCP    map[string]*checkState `json:"mcp"`
		Models map[string]*checkState `json:"models,omitempty"`
	} `json:"checks"`
}

// readiness runs the checks and logs their transitions (a dependency going down or up is
// logged once, not on every poll).
type readiness struct {
	checks   []ReadyCheck
	draining func() bool // nil: never
	log      *slog.Logger
	mu       sync.Mutex
	last     map[string]string // group/name → last error ("" = up)
}

func newReadiness(checks []ReadyCheck, draining func() bool, log *slog.Logger) *readiness {
	return &readiness{checks: checks, draining: draining, log: log, last: map[string]string{}}
}

// handleReady answers GET /readyz: 503 only when the store is down or the process
// drains; with ?strict=1 (or true), 503 when any dependency is down.
func (rd *readiness) handleReady(w http.ResponseWriter, r *http.Request) {
	rep := rd.run(r.Context())
	code := http.StatusOK
	switch rep.Status {
	case StatusDown, StatusDraining:
		code = http.StatusServiceUnavailable
	case StatusDegraded:
		if strict := r.URL.Query().Get("strict"); strict == "1" || strict == "true" {
			code = http.StatusServiceUnavailable
		}
	}
	w.Header().Set("Cache-Control", "no-store")
	writeJSON(w, code, rep)
}

func (rd *readiness) run(ctx context.Context) readyReport {
	checks := rd.checks
	results := make([]checkState, len(checks))
	var wg sync.WaitGroup
	for i, c := range checks {
		wg.Go(func() {
			cctx, cancel := context.WithTimeout(ctx, readyCheckTimeout)
			defer cancel()
			results[i] = rd.probe(cctx, c)
		})
	}
	wg.Wait()

	var rep readyReport
	rep.Checks.Agents = map[string]*checkState{}
	rep.Checks.MCP = map[string]*checkState{}
	storeDown, anyDown := false, false
	for i, c := range checks {
		st := &results[i]
		if st.Status == StatusDown {
			anyDown = true
		}
		switch c.Group {
		case GroupStore:
			rep.Checks.Store = st
			storeDown = st.Status == StatusDown
		case GroupModel:
			rep.Checks.Model = st
		case GroupAgents:
			rep.Checks.Agents[c.Name] = st
		case GroupMCP:
			rep.Checks.MCP[c.Name] = st
		case GroupModels:
			if rep.Checks.Models == nil {
				rep.Checks.Models = map[string]*checkState{}
			}
			rep.Checks.Models[c.Name] = st
		}
	}
	switch {
	case rd.draining != nil && rd.draining():
		rep.Status = StatusDraining
	case storeDown:
		rep.Status = StatusDown
	case anyDown:
		rep.Status = StatusDegraded
	default:
		rep.Status = StatusReady
	}
	return rep
}

// probe runs one check and logs when its state changes.
func (rd *readiness) probe(ctx context.Context, c ReadyCheck) checkState {
	var err error
	if c.Check != nil {
		err = c.Check(ctx)
	}
	key := c.Group + "/" + c.Name
	msg := ""
	if err != nil {
		msg = oneLine(err.Error(), maxReadyError)
		if msg == "" {
			msg = "unavailable"
		}
	}
	rd.mu.Lock()
	prev, seen := rd.last[key]
	rd.last[key] = msg
	rd.mu.Unlock()
	switch {
	case msg != "" && (!seen || prev == ""):
		rd.log.Warn("dependency not ready", "check", c.Group, "name", c.Name, "err", msg)
	case msg == "" && seen && prev != "":
		rd.log.Info("dependency ready again", "check", c.Group, "name", c.Name)
	}
	if msg != "" {
		return checkState{Status: StatusDown, Error: msg}
	}
	return checkState{Status: "up"}
}

// oneLine flattens s to one line of at most about n bytes. An error chain ("fetch card:
// Get …: dial tcp …: connection refused") names its cause last, so a long one is cut in the
// middle: its start and its cause (the part after the last ": ", itself at most n/2 bytes)
// are kept around a "…", never the cause cut off.
func oneLine(s string, n int) string {
	s = strings.Join(strings.Fields(s), " ")
	if len(s) <= n {
		return s
	}
	tail := ""
	if i := strings.LastIndex(s, ": "); i > 0 && len(s)-i-2 <= n/2 {
		tail = s[i+2:]
	}
	if tail == "" {
		return cutRunes(s, n) + "…"
	}
	return cutRunes(s, n-len(tail)-len(" …: ")) + " …: " + tail
}

// cutRunes returns s cut to at most n bytes on a rune boundary.
func cutRunes(s string, n int) string {
	if len(s) <= n {
		return s
	}
	cut := max(n, 0)
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut]
}
