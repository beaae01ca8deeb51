package hitl

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/baton-dev/baton/agui"
	"github.com/baton-dev/baton/store"
)

func TestApprovalInterrupt(t *testing.T) {
	t.Parallel()
	schema := map[string]any{
		"$schema":    "https://json-schema.org/draft/2020-12/schema",
		"type":       "object",
		"properties": map[string]any{"release": map[string]any{"type": "string", "minLength": 1}},
		"required":   []string{"release"},
	}
	in := Approval(opts, "demo__delete_release", "Approve?", json.RawMessage(`{"release":"v1"}`), schema, false)
	assert.Regexp(t, idRegex, in.ID)
	assert.Equal(t, KindApproval, in.Kind)
	assert.Equal(t, ReasonToolCall, in.Reason)
	assert.Equal(t, now0.Add(defaultTTL), in.ExpiresAt)
	props := in.ResponseSchema["properties"].(map[string]any)
	edited := props["editedArgs"].(map[string]any)
	assert.NotContains(t, edited, "$schema", "a dialect only at the root")
	assert.Equal(t, []any{"release"}, edited["required"], "JSON shapes only, as after a round trip")
	assert.Contains(t, schema, "$schema", "the tool's schema is not modified")
	assert.Equal(t, map[string]any{"baton": map[string]any{"tool": "demo__delete_release", "arguments": map[string]any{"release": "v1"}}}, in.Metadata)

	doubt := Approval(opts, "demo__delete_release", InDoubtMessage, json.RawMessage(`{}`), nil, true)
	assert.Equal(t, true, doubt.Metadata["baton"].(map[string]any)["inDoubt"])
	assert.Equal(t, map[string]any{"type": "object"}, doubt.ResponseSchema["properties"].(map[string]any)["editedArgs"])

	// Answers are checked against the tool's schema before anything runs.
	open := []store.Interrupt{in}
	entry := func(payload string) []agui.ResumeEntry {
		return []agui.ResumeEntry{{InterruptID: in.ID, Status: agui.ResumeResolved, Payload: json.RawMessage(payload)}}
	}
	for _, ok := range []string{`{"approved":true}`, `{"approved":false,"reason":"no"}`, `{"approved":true,"editedArgs":{"release":"v2"}}`} {
		_, _, err := Validate(open, entry(ok), now0)
		require.NoError(t, err, ok)
	}
	for _, bad := range []string{`{}`, `{"approved":"yes"}`, `{"approved":true,"editedArgs":{"release":""}}`, `{"approved":true,"editedArgs":{"release":5}}`, `{"approved":true,"editedArgs":{}}`} {
		_, _, err := Validate(open, entry(bad), now0)
		var re *ResumeError
		require.ErrorAs(t, err, &re, bad)
		assert.Equal(t, CodeInvalidResume, re.Code, bad)
	}
}
