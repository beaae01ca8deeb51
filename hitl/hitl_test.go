package hitl

import (
	"encoding/json"
	"regexp"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/baton-dev/baton/agui"
	"github.com/baton-dev/baton/store"
)

var (
	now0    = time.Date(2026, 9, 30, 12, 0, 0, 0, time.UTC)
	clock   = func() time.Time { return now0 }
	opts    = Options{Now: clock}
	idRegex = regexp.MustCompile(`^int-[0-9a-f]{16}$`)
)

// envSchema is an MCP requested schema: flat, with an enum, a required field and a default.
func envSchema() map[string]any {
	return map[string]any{
		"type": "object",
		"properties": map[string]any{
			"env":      map[string]any{"type": "string", "enum": []any{"staging", "prod"}},
			"replicas": map[string]any{"type": "integer", "default": float64(1)},
		},
		"required": []any{"env"},
	}
}

func TestBuilders(t *testing.T) {
	t.Parallel()
	textRequired := map[string]any{
		"type":       "object",
		"properties": map[string]any{"text": map[string]any{"type": "string"}},
		"required":   []any{"text"},
	}
	action := map[string]any{"type": "string", "enum": []any{"accept", "decline"}}
	a2aMD := map[string]any{"a2a": map[string]any{"agent": "research", "taskId": "task-9", "contextId": "ctx-3"}}

	tests := []struct {
		name     string
		build    func() store.Interrupt
		kind     string
		reason   string
		message  string
		schema   map[string]any
		metadata map[string]any
	}{
		{
			name:  "A2AInput",
			build: func() store.Interrupt { return A2AInput(opts, "research", "task-9", "ctx-3", "Which region?") },
			kind:  KindA2AInput, reason: "input_required", message: "Which region?",
			schema: textRequired, metadata: a2aMD,
		},
		{
			name:  "A2AAuth",
			build: func() store.Interrupt { return A2AAuth(opts, "research", "task-9", "ctx-3", "Sign in at https://idp") },
			kind:  KindA2AAuth, reason: "a2a:auth_required", message: "Sign in at https://idp",
			schema: map[string]any{
				"type":       "object",
				"properties": map[string]any{"text": map[string]any{"type": "string"}},
			},
			metadata: a2aMD,
		},
		{
			name: "MCPForm mrtr",
			build: func() store.Interrupt {
				return MCPForm(opts, "deploy", "deploy", "Which environment?", envSchema(), ShapeMRTR)
			},
			kind: KindMCPForm, reason: "input_required", message: "Which environment?",
			schema: map[string]any{
				"type":       "object",
				"properties": map[string]any{"action": action, "content": envSchema()},
				"required":   []any{"action"},
			},
			metadata: map[string]any{"mcp": map[string]any{"server": "deploy", "tool": "deploy", "mode": "form"}},
		},
		{
			name: "MCPForm session",
			build: func() store.Interrupt {
				return MCPForm(opts, "files", "trigger-elicitation-request", "Your name?", envSchema(), ShapeSession)
			},
			kind: KindMCPSession, reason: "input_required", message: "Your name?",
			schema: map[string]any{
				"type":       "object",
				"properties": map[string]any{"action": action, "content": envSchema()},
				"required":   []any{"action"},
			},
			metadata: map[string]any{"mcp": map[string]any{"server": "files", "tool": "trigger-elicitation-request", "mode": "form"}},
		},
		{
			name:  "MCPForm without requested schema",
			build: func() store.Interrupt { return MCPForm(opts, "s", "t", "ok?", nil, "") },
			kind:  KindMCPForm, reason: "input_required", message: "ok?",
			schema: map[string]any{
				"type":       "object",
				"properties": map[string]any{"action": action, "content": map[string]any{"type": "object"}},
				"required":   []any{"action"},
			},
			metadata: map[string]any{"mcp": map[string]any{"server": "s", "tool": "t", "mode": "form"}},
		},
		{
			name: "MCPURL",
			build: func() store.Interrupt {
				return MCPURL(opts, "files", "trigger-url-elicitation", "https://example.com/auth", "Please authorise")
			},
			kind: KindMCPURL, reason: "mcp:url_elicitation", message: "Please authorise",
			schema: map[string]any{
				"type":       "object",
				"properties": map[string]any{"action": action},
				"required":   []any{"action"},
			},
			metadata: map[string]any{"mcp": map[string]any{
				"server": "files", "tool": "trigger-url-elicitation", "mode": "url", "url": "https://example.com/auth",
			}},
		},
		{
			name:  "AskUser free text",
			build: func() store.Interrupt { return AskUser(opts, "What is the budget?", nil) },
			kind:  KindAskUser, reason: "input_required", message: "What is the budget?",
			schema: textRequired,
		},
		{
			name:  "AskUser choices",
			build: func() store.Interrupt { return AskUser(opts, "Which one?", []string{"red", "blue"}) },
			kind:  KindAskUser, reason: "input_required", message: "Which one?",
			schema: map[string]any{
				"type":       "object",
				"properties": map[string]any{"text": map[string]any{"type": "string", "enum": []any{"red", "blue"}}},
				"required":   []any{"text"},
			},
		},
		{
			name:  "Continue",
			build: func() store.Interrupt { return Continue(opts, "The run seems stuck. Continue?", "loop_detected") },
			kind:  KindContinue, reason: "input_required", message: "The run seems stuck. Continue?",
			schema: map[string]any{
				"type":       "object",
				"properties": map[string]any{"continue": map[string]any{"type": "boolean"}},
				"required":   []any{"continue"},
			},
			metadata: map[string]any{"baton": map[string]any{"kind": "loop_detected"}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := tt.build()
			assert.Regexp(t, idRegex, got.ID)
			assert.Equal(t, tt.kind, got.Kind)
			assert.Equal(t, tt.reason, got.Reason)
			assert.Equal(t, tt.message, got.Message)
			assert.Equal(t, tt.schema, got.ResponseSchema)
			assert.Equal(t, tt.metadata, got.Metadata)
			assert.Equal(t, now0.Add(defaultTTL), got.ExpiresAt)
			assert.Empty(t, got.ToolCallID, "the engine sets the tool call id")
			assert.Nil(t, got.Handle, "the engine sets the handle")

			// Every builder's schema is usable by Validate.
			_, err := resolveSchema(got.ResponseSchema)
			require.NoError(t, err)

			// The interrupt survives a JSON round trip (the store) unchanged.
			b, err := json.Marshal(got)
			require.NoError(t, err)
			var back store.Interrupt
			require.NoError(t, json.Unmarshal(b, &back))
			assert.True(t, got.ExpiresAt.Equal(back.ExpiresAt))
			back.ExpiresAt = got.ExpiresAt
			assert.Equal(t, got, back)

			assert.NotEqual(t, got.ID, tt.build().ID, "every interrupt gets a fresh id")
		})
	}
}

func TestOptions(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		o    Options
		want func(built time.Time) time.Time
	}{
		{"custom TTL", Options{Now: clock, TTL: 5 * time.Minute}, func(time.Time) time.Time { return now0.Add(5 * time.Minute) }},
		{"negative TTL is the default", Options{Now: clock, TTL: -time.Second}, func(time.Time) time.Time { return now0.Add(defaultTTL) }},
		{"non-UTC clock", Options{Now: func() time.Time { return now0.In(time.FixedZone("X", 3600)) }}, func(time.Time) time.Time { return now0.Add(defaultTTL) }},
		{"zero options use the wall clock", Options{}, func(built time.Time) time.Time { return built.Add(defaultTTL) }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			before := time.Now()
			got := AskUser(tt.o, "q", nil)
			after := time.Now()
			if tt.o.Now == nil {
				assert.False(t, got.ExpiresAt.Before(before.Add(defaultTTL)))
				assert.False(t, got.ExpiresAt.After(after.Add(defaultTTL)))
				return
			}
			assert.True(t, tt.want(before).Equal(got.ExpiresAt), "%v", got.ExpiresAt)
			assert.Equal(t, time.UTC, got.ExpiresAt.Location())
		})
	}
}

func TestToAGUI(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		in   store.Interrupt
		want agui.Interrupt
	}{
		{
			name: "full",
			in: store.Interrupt{
				ID: "int-1", ToolCallID: "call-1", Kind: KindMCPForm, Reason: "input_required", Message: "Env?",
				ResponseSchema: map[string]any{"type": "object"},
				ExpiresAt:      time.Date(2026, 9, 30, 14, 5, 0, 123456789, time.FixedZone("CEST", 2*3600)),
				SubagentRunID:  "sa-1",
				Metadata:       map[string]any{"mcp": map[string]any{"server": "deploy"}},
				Handle:         json.RawMessage(`{"requestState":"secret-ish"}`),
			},
			want: agui.Interrupt{
				ID: "int-1", ToolCallID: "call-1", Reason: "input_required", Message: "Env?",
				ResponseSchema: map[string]any{"type": "object"},
				ExpiresAt:      "2026-09-30T12:05:00.123Z",
				SubagentRunID:  "sa-1",
				Metadata:       map[string]any{"mcp": map[string]any{"server": "deploy"}},
			},
		},
		{
			name: "whole seconds keep the milliseconds",
			in:   store.Interrupt{ID: "int-2", Reason: "input_required", ExpiresAt: now0},
			want: agui.Interrupt{ID: "int-2", Reason: "input_required", ExpiresAt: "2026-09-30T12:00:00.000Z"},
		},
		{
			name: "no expiry",
			in:   store.Interrupt{ID: "int-3", Reason: "a2a:auth_required"},
			want: agui.Interrupt{ID: "int-3", Reason: "a2a:auth_required"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := ToAGUI(tt.in)
			assert.Equal(t, tt.want, got)
			if got.ExpiresAt != "" {
				parsed, err := time.Parse(time.RFC3339Nano, got.ExpiresAt)
				require.NoError(t, err)
				assert.True(t, tt.in.ExpiresAt.Truncate(time.Millisecond).Equal(parsed))
			}
		})
	}
}

func TestMCPAuthorization(t *testing.T) {
	t.Parallel()
	exp := time.Date(2026, 11, 23, 10, 0, 0, 0, time.UTC)
	in := MCPAuthorization(Options{}, "files", "read", "https://as.example/authorize?state=s", exp)
	assert.Equal(t, KindMCPAuth, in.Kind)
	assert.Equal(t, ReasonMCPAuthorization, in.Reason)
	assert.Equal(t, "Sign in to files", in.Message)
	assert.Equal(t, "https://as.example/authorize?state=s", in.Metadata["authorizationUrl"])
	assert.Equal(t, "files", in.Metadata["server"])
	assert.Equal(t, "2026-11-23T10:00:00.000Z", in.Metadata["signInExpiresAt"])
	assert.False(t, in.ExpiresAt.IsZero())
	bad := MCPAuthorization(Options{}, "files", "read", "javascript:alert(1)", time.Time{})
	assert.NotContains(t, bad.Metadata, "authorizationUrl", "only http(s) URLs are passed on")
	assert.NotContains(t, bad.Metadata, "signInExpiresAt")
}
