package server

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func getReady(t *testing.T, url string) (int, map[string]any) {
	t.Helper()
	resp, err := http.Get(url)
	require.NoError(t, err)
	defer resp.Body.Close()
	assert.Equal(t, "application/json", resp.Header.Get("Content-Type"))
	var body map[string]any
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&body))
	return resp.StatusCode, body
}

func TestHealthz(t *testing.T) {
	srv, _ := newTestServer(t, blockingModel{}, Config{})
	resp, err := http.Get(srv.URL + "/healthz")
	require.NoError(t, err)
	resp.Body.Close()
	assert.Equal(t, http.StatusOK, resp.StatusCode)
}

func TestReadyzReportsEachDependency(t *testing.T) {
	var storeErr, modelErr, agentErr, mcpErr atomic.Pointer[error]
	probe := func(p *atomic.Pointer[error]) func(context.Context) error {
		return func(context.Context) error {
			if e := p.Load(); e != nil {
				return *e
			}
			return nil
		}
	}
	set := func(p *atomic.Pointer[error], err error) {
		if err == nil {
			p.Store(nil)
			return
		}
		p.Store(&err)
	}
	var draining atomic.Bool
	srv, _ := newTestServer(t, blockingModel{}, Config{
		ReadyChecks: []ReadyCheck{
			{Group: GroupStore, Check: probe(&storeErr)},
			{Group: GroupModel, Check: probe(&modelErr)},
			{Group: GroupAgents, Name: "research", Check: probe(&agentErr)},
			{Group: GroupAgents, Name: "travel", Check: func(context.Context) error { return nil }},
			{Group: GroupMCP, Name: "files", Check: probe(&mcpErr)},
		},
		Draining: draining.Load,
	})

	tests := []struct {
		name                     string
		store, model, agent, mcp error
		drain                    bool
		status                   string
		code, strictCode         int
	}{
		{name: "all up", status: "ready", code: 200, strictCode: 200},
		{name: "model key missing", model: errors.New("OPENAI_API_KEY is not set"), status: "degraded", code: 200, strictCode: 503},
		{name: "agent down", agent: errors.New("agent card not read yet"), status: "degraded", code: 200, strictCode: 503},
		{name: "mcp down", mcp: errors.New("not connected"), status: "degraded", code: 200, strictCode: 503},
		{name: "store down", store: errors.New("store not reachable"), status: "down", code: 503, strictCode: 503},
		{name: "draining", drain: true, status: "draining", code: 503, strictCode: 503},
		{name: "draining wins over down", drain: true, store: errors.New("x"), status: "draining", code: 503, strictCode: 503},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			set(&storeErr, tt.store)
			set(&modelErr, tt.model)
			set(&agentErr, tt.agent)
			set(&mcpErr, tt.mcp)
			draining.Store(tt.drain)

			code, body := getReady(t, srv.URL+"/readyz")
			assert.Equal(t, tt.code, code)
			assert.Equal(t, tt.status, body["status"])
			checks, ok := body["checks"].(map[string]any)
			require.True(t, ok, "checks object: %v", body)
			want := func(err error) map[string]any {
				if err == nil {
					return map[string]any{"status": "up"}
				}
				return map[string]any{"status": "down", "error": err.Error()}
			}
			assert.Equal(t, want(tt.store), checks["store"])
			assert.Equal(t, want(tt.model), checks["model"])
			assert.Equal(t, map[string]any{"research": want(tt.agent), "travel": want(nil)}, checks["agents"])
			assert.Equal(t, map[string]any{"files": want(tt.mcp)}, checks["mcp"])

			code, body = getReady(t, srv.URL+"/readyz?strict=1")
			assert.Equal(t, tt.strictCode, code)
			assert.Equal(t, tt.status, body["status"])
		})
	}
}

func TestReadyzNoChecksIsReady(t *testing.T) {
	srv, _ := newTestServer(t, blockingModel{}, Config{})
	code, body := getReady(t, srv.URL+"/readyz?strict=1")
	assert.Equal(t, http.StatusOK, code)
	assert.Equal(t, "ready", body["status"])
	assert.Equal(t, map[string]any{"agents": map[string]any{}, "mcp": map[string]any{}}, body["checks"])
}

func TestReadyzErrorIsOneCappedLine(t *testing.T) {
	long := "first line\nsecond " + strings.Repeat("é", 300)
	srv, _ := newTestServer(t, blockingModel{}, Config{ReadyChecks: []ReadyCheck{
		{Group: GroupMCP, Name: "x", Check: func(context.Context) error { return errors.New(long) }},
	}})
	_, body := getReady(t, srv.URL+"/readyz")
	msg := body["checks"].(map[string]any)["mcp"].(map[string]any)["x"].(map[string]any)["error"].(string)
	assert.NotContains(t, msg, "\n")
	assert.LessOrEqual(t, len(msg), maxReadyError+len("…"))
	assert.True(t, strings.HasPrefix(msg, "first line second é"), msg)
	assert.True(t, strings.HasSuffix(msg, "…"), msg)
}

// An agent's error names its cause last, after a long URL: a capped message keeps the
// cause rather than cutting it off.
func TestReadyzErrorKeepsItsCause(t *testing.T) {
	long := `agent card: GET http://travel.internal.example:41250/` + strings.Repeat("a", 300) +
		`/.well-known/agent-card.json: dial tcp 10.0.0.7:41250: connect: connection refused`
	srv, _ := newTestServer(t, blockingModel{}, Config{ReadyChecks: []ReadyCheck{
		{Group: GroupAgents, Name: "travel", Check: func(context.Context) error { return errors.New(long) }},
	}})
	_, body := getReady(t, srv.URL+"/readyz")
	msg := body["checks"].(map[string]any)["agents"].(map[string]any)["travel"].(map[string]any)["error"].(string)
	assert.LessOrEqual(t, len(msg), maxReadyError+len("…"))
	assert.True(t, strings.HasPrefix(msg, "agent card: GET http://travel.internal.example:41250/aaa"), msg)
	assert.True(t, strings.HasSuffix(msg, "…: connection refused"), msg)
}

func TestReadyzCheckSeesDeadline(t *testing.T) {
	// A check that hangs is cut off by its own deadline instead of holding /readyz.
	srv, _ := newTestServer(t, blockingModel{}, Config{ReadyChecks: []ReadyCheck{
		{Group: GroupStore, Check: func(ctx context.Context) error {
			_, ok := ctx.Deadline()
			if !ok {
				return errors.New("no deadline")
			}
			return nil
		}},
	}})
	code, body := getReady(t, srv.URL+"/readyz")
	assert.Equal(t, http.StatusOK, code)
	assert.Equal(t, "ready", body["status"])
}
