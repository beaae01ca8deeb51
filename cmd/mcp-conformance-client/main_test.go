package main

import (
	"context"
	"testing"

	"github.com/baton-dev/baton/mcpclient"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestMCPConformanceElicitorDefaults(t *testing.T) {
	schema := map[string]any{
		"type": "object",
		"properties": map[string]any{
			"name":   map[string]any{"type": "string", "default": "John Doe"},
			"age":    map[string]any{"type": "integer", "default": 30},
			"status": map[string]any{"type": "string", "enum": []any{"active", "inactive"}, "default": "active"},
			"note":   map[string]any{"type": "string"},
		},
	}
	tests := []struct {
		name string
		req  mcpclient.ElicitRequest
		want map[string]any
	}{
		{"form keeps defaults", mcpclient.ElicitRequest{Mode: "form", Schema: schema},
			map[string]any{"name": "John Doe", "age": 30.0, "status": "active"}},
		{"form without schema", mcpclient.ElicitRequest{Mode: "form"}, map[string]any{}},
		{"url", mcpclient.ElicitRequest{Mode: "url", URL: "https://x"}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res, err := DefaultsElicitor{}.Elicit(context.Background(), tt.req)
			require.NoError(t, err)
			assert.Equal(t, "accept", res.Action)
			assert.Equal(t, tt.want, res.Content)
		})
	}
}

func TestMCPConformanceArgs(t *testing.T) {
	tests := []struct {
		name string
		tool mcpclient.Tool
		want map[string]any
	}{
		{"add_numbers", mcpclient.Tool{ToolName: "add_numbers"}, map[string]any{"a": 2, "b": 3}},
		{"required by type", mcpclient.Tool{ToolName: "x", InputSchema: map[string]any{
			"properties": map[string]any{
				"n": map[string]any{"type": "number"}, "s": map[string]any{"type": "string"},
				"e": map[string]any{"type": "string", "enum": []any{"b", "c"}}, "d": map[string]any{"type": "integer", "default": 7.0},
				"opt": map[string]any{"type": "string"},
			},
			"required": []any{"n", "s", "e", "d"},
		}}, map[string]any{"n": 1, "s": "test", "e": "b", "d": 7.0}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			assert.Equal(t, tt.want, argsFor(tt.tool))
		})
	}
}
