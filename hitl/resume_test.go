package hitl

import (
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/baton-dev/baton/agui"
	"github.com/baton-dev/baton/store"
)

func resolved(id, payload string) agui.ResumeEntry {
	e := agui.ResumeEntry{InterruptID: id, Status: agui.ResumeResolved}
	if payload != "" {
		e.Payload = json.RawMessage(payload)
	}
	return e
}

func cancelled(id string) agui.ResumeEntry {
	return agui.ResumeEntry{InterruptID: id, Status: agui.ResumeCancelled}
}

// withID fixes a builder's random id so that the test table can name it.
func withID(id string, in store.Interrupt) store.Interrupt {
	in.ID = id
	return in
}

func TestValidate(t *testing.T) {
	t.Parallel()
	a2a := withID("int-a2a", A2AInput(opts, "research", "task-9", "ctx-3", "Which region?"))
	form := withID("int-form", MCPForm(opts, "deploy", "deploy", "Which environment?", envSchema(), ShapeMRTR))
	url := withID("int-url", MCPURL(opts, "files", "login", "https://example.com", "Sign in"))
	ask := withID("int-ask", AskUser(opts, "Colour?", []string{"red", "blue"}))
	cont := withID("int-cont", Continue(opts, "Continue?", "max_iterations"))
	later := withID("int-later", A2AInput(Options{Now: clock, TTL: 2 * time.Hour}, "r", "t", "c", "q"))
	forever := withID("int-forever", A2AInput(opts, "r", "t", "c", "q"))
	forever.ExpiresAt = time.Time{}
	badSchema := withID("int-bad-schema", AskUser(opts, "q", nil))
	badSchema.ResponseSchema = map[string]any{"type": 5}
	noSchema := withID("int-no-schema", AskUser(opts, "q", nil))
	noSchema.ResponseSchema = nil

	beforeExpiry := now0.Add(defaultTTL - time.Millisecond)
	atExpiry := now0.Add(defaultTTL)

	tests := []struct {
		name        string
		open        []store.Interrupt
		entries     []agui.ResumeEntry
		now         time.Time
		wantAnswers map[string]Answer
		wantIgnored []string
		wantCode    string
		wantMsg     []string // substrings of ResumeError.Message
		notMsg      []string // substrings that must not be there
		wantExpired []string
	}{
		{
			name: "all covered",
			open: []store.Interrupt{a2a, form, url, ask, cont},
			entries: []agui.ResumeEntry{
				resolved("int-cont", `{"continue":true}`),
				resolved("int-a2a", `{"text":"EU only"}`),
				resolved("int-form", `{"action":"accept","content":{"env":"staging","replicas":2}}`),
				resolved("int-url", `{"action":"decline"}`),
				resolved("int-ask", `{"text":"blue"}`),
			},
			now: beforeExpiry,
			wantAnswers: map[string]Answer{
				"int-a2a":  {InterruptID: "int-a2a", Payload: map[string]any{"text": "EU only"}},
				"int-form": {InterruptID: "int-form", Payload: map[string]any{"action": "accept", "content": map[string]any{"env": "staging", "replicas": float64(2)}}},
				"int-url":  {InterruptID: "int-url", Payload: map[string]any{"action": "decline"}},
				"int-ask":  {InterruptID: "int-ask", Payload: map[string]any{"text": "blue"}},
				"int-cont": {InterruptID: "int-cont", Payload: map[string]any{"continue": true}},
			},
		},
		{
			name:    "cancelled entries need no payload",
			open:    []store.Interrupt{a2a, form},
			entries: []agui.ResumeEntry{cancelled("int-a2a"), {InterruptID: "int-form", Status: agui.ResumeCancelled, Payload: json.RawMessage(`"ignored"`)}},
			now:     now0,
			wantAnswers: map[string]Answer{
				"int-a2a":  {InterruptID: "int-a2a", Cancelled: true},
				"int-form": {InterruptID: "int-form", Cancelled: true},
			},
		},
		{
			name:     "uncovered",
			open:     []store.Interrupt{a2a, form, ask},
			entries:  []agui.ResumeEntry{resolved("int-form", `{"action":"decline"}`)},
			now:      now0,
			wantCode: CodeInvalidResume,
			wantMsg:  []string{"does not answer or cancel open interrupts int-a2a, int-ask"},
			notMsg:   []string{"int-form"},
		},
		{
			name:     "nothing covered",
			open:     []store.Interrupt{a2a},
			now:      now0,
			wantCode: CodeInvalidResume,
			wantMsg:  []string{"open interrupt int-a2a;"},
		},
		{
			name:        "unknown ids are ignored, once each",
			open:        []store.Interrupt{a2a},
			entries:     []agui.ResumeEntry{resolved("int-old", `{"text":"x"}`), resolved("int-a2a", `{"text":"ok"}`), cancelled("int-old"), cancelled("int-other")},
			now:         now0,
			wantAnswers: map[string]Answer{"int-a2a": {InterruptID: "int-a2a", Payload: map[string]any{"text": "ok"}}},
			wantIgnored: []string{"int-old", "int-other"},
		},
		{
			name:        "nothing open",
			entries:     []agui.ResumeEntry{resolved("int-old", `{"text":"x"}`)},
			now:         now0,
			wantAnswers: map[string]Answer{},
			wantIgnored: []string{"int-old"},
		},
		{
			name:     "bad payload type",
			open:     []store.Interrupt{a2a},
			entries:  []agui.ResumeEntry{resolved("int-a2a", `{"text":5}`)},
			now:      now0,
			wantCode: CodeInvalidResume,
			wantMsg:  []string{`interrupt int-a2a: field "text" must be of type string, not integer`},
		},
		{
			name:     "boolean expected",
			open:     []store.Interrupt{cont},
			entries:  []agui.ResumeEntry{resolved("int-cont", `{"continue":"yes"}`)},
			now:      now0,
			wantCode: CodeInvalidResume,
			wantMsg:  []string{`interrupt int-cont: field "continue" must be of type boolean, not string`},
		},
		{
			name:     "missing required",
			open:     []store.Interrupt{a2a},
			entries:  []agui.ResumeEntry{resolved("int-a2a", `{"answer":"EU"}`)},
			now:      now0,
			wantCode: CodeInvalidResume,
			wantMsg:  []string{`interrupt int-a2a: field "text" is required`},
		},
		{
			name:     "resolved without payload",
			open:     []store.Interrupt{a2a},
			entries:  []agui.ResumeEntry{resolved("int-a2a", "")},
			now:      now0,
			wantCode: CodeInvalidResume,
			wantMsg:  []string{`field "text" is required`},
		},
		{
			name:     "missing required in nested content",
			open:     []store.Interrupt{form},
			entries:  []agui.ResumeEntry{resolved("int-form", `{"action":"accept","content":{"replicas":1}}`)},
			now:      now0,
			wantCode: CodeInvalidResume,
			wantMsg:  []string{`interrupt int-form: field "content.env" is required`},
		},
		{
			name:     "enum violation",
			open:     []store.Interrupt{ask},
			entries:  []agui.ResumeEntry{resolved("int-ask", `{"text":"green"}`)},
			now:      now0,
			wantCode: CodeInvalidResume,
			wantMsg:  []string{`interrupt int-ask: field "text" must be one of ["red","blue"]`},
		},
		{
			name:     "enum violation in nested content",
			open:     []store.Interrupt{form},
			entries:  []agui.ResumeEntry{resolved("int-form", `{"action":"accept","content":{"env":"dev"}}`)},
			now:      now0,
			wantCode: CodeInvalidResume,
			wantMsg:  []string{`field "content.env" must be one of ["staging","prod"]`},
		},
		{
			name:     "action outside accept/decline",
			open:     []store.Interrupt{url},
			entries:  []agui.ResumeEntry{resolved("int-url", `{"action":"cancel"}`)},
			now:      now0,
			wantCode: CodeInvalidResume,
			wantMsg:  []string{`field "action" must be one of ["accept","decline"]`},
		},
		{
			name:     "payload not an object",
			open:     []store.Interrupt{a2a},
			entries:  []agui.ResumeEntry{resolved("int-a2a", `"EU only"`)},
			now:      now0,
			wantCode: CodeInvalidResume,
			wantMsg:  []string{"interrupt int-a2a: the payload must be a JSON object"},
		},
		{
			name: "every bad payload is named",
			open: []store.Interrupt{a2a, ask, cont},
			entries: []agui.ResumeEntry{
				resolved("int-a2a", `{}`), resolved("int-ask", `{"text":"red"}`), resolved("int-cont", `{"continue":1}`),
			},
			now:      now0,
			wantCode: CodeInvalidResume,
			wantMsg:  []string{"interrupt int-a2a:", "interrupt int-cont:"},
			notMsg:   []string{"int-ask"},
		},
		{
			name:        "expired",
			open:        []store.Interrupt{a2a, later},
			entries:     []agui.ResumeEntry{resolved("int-a2a", `{"text":"x"}`), resolved("int-later", `{"text":"y"}`)},
			now:         atExpiry,
			wantCode:    CodeInterruptExpired,
			wantMsg:     []string{"interrupt int-a2a expired"},
			notMsg:      []string{"int-later"},
			wantExpired: []string{"int-a2a"},
		},
		{
			name:        "expired even when cancelled",
			open:        []store.Interrupt{a2a, form},
			entries:     []agui.ResumeEntry{cancelled("int-a2a"), cancelled("int-form")},
			now:         atExpiry.Add(time.Hour),
			wantCode:    CodeInterruptExpired,
			wantMsg:     []string{"interrupts int-a2a, int-form expired"},
			wantExpired: []string{"int-a2a", "int-form"},
		},
		{
			name:        "expiry comes before coverage and payload",
			open:        []store.Interrupt{a2a, later, ask},
			entries:     []agui.ResumeEntry{resolved("int-ask", `{"text":"green"}`)},
			now:         atExpiry,
			wantCode:    CodeInterruptExpired,
			wantExpired: []string{"int-a2a", "int-ask"},
			notMsg:      []string{"int-later", "cover", "must be one of"},
		},
		{
			name:     "coverage comes before payload",
			open:     []store.Interrupt{a2a, ask},
			entries:  []agui.ResumeEntry{resolved("int-ask", `{"text":"green"}`)},
			now:      now0,
			wantCode: CodeInvalidResume,
			wantMsg:  []string{"int-a2a"},
			notMsg:   []string{"must be one of", "int-ask"},
		},
		{
			name:        "zero expiry never expires",
			open:        []store.Interrupt{forever},
			entries:     []agui.ResumeEntry{resolved("int-forever", `{"text":"x"}`)},
			now:         now0.Add(1000 * time.Hour),
			wantAnswers: map[string]Answer{"int-forever": {InterruptID: "int-forever", Payload: map[string]any{"text": "x"}}},
		},
		{
			name:        "identical duplicates collapse",
			open:        []store.Interrupt{a2a},
			entries:     []agui.ResumeEntry{resolved("int-a2a", `{"text":"EU"}`), resolved("int-a2a", `{ "text" : "EU" }`)},
			now:         now0,
			wantAnswers: map[string]Answer{"int-a2a": {InterruptID: "int-a2a", Payload: map[string]any{"text": "EU"}}},
		},
		{
			name:     "conflicting duplicates",
			open:     []store.Interrupt{a2a, ask},
			entries:  []agui.ResumeEntry{resolved("int-a2a", `{"text":"EU"}`), resolved("int-ask", `{"text":"red"}`), resolved("int-a2a", `{"text":"US"}`), resolved("int-a2a", `{"text":"UK"}`)},
			now:      now0,
			wantCode: CodeInvalidResume,
			wantMsg:  []string{"interrupt int-a2a is answered more than once"},
			notMsg:   []string{"int-ask"},
		},
		{
			name:     "resolved and cancelled at once",
			open:     []store.Interrupt{a2a},
			entries:  []agui.ResumeEntry{resolved("int-a2a", `{"text":"EU"}`), cancelled("int-a2a")},
			now:      now0,
			wantCode: CodeInvalidResume,
			wantMsg:  []string{"more than once"},
		},
		{
			name:     "unknown status",
			open:     []store.Interrupt{a2a},
			entries:  []agui.ResumeEntry{{InterruptID: "int-a2a", Status: "maybe"}},
			now:      now0,
			wantCode: CodeInvalidResume,
			wantMsg:  []string{`interrupt int-a2a: status "maybe"`},
		},
		{
			name: "other keywords name the field",
			open: []store.Interrupt{withID("int-min", MCPForm(opts, "s", "t", "n?", map[string]any{
				"type": "object", "properties": map[string]any{"n": map[string]any{"type": "number", "minimum": float64(1)}},
			}, ShapeMRTR))},
			entries:  []agui.ResumeEntry{resolved("int-min", `{"action":"accept","content":{"n":0}}`)},
			now:      now0,
			wantCode: CodeInvalidResume,
			wantMsg:  []string{`interrupt int-min: field "content.n" must be a number of at least 1; got 0`},
			notMsg:   []string{"minimum:", "0/1"},
		},
		{
			// What a titled MCP enum (oneOf of consts) gives: plain words, never the
			// validator's "oneOf: did not validate against any of [<anonymous schema> …]".
			name: "oneOf says the allowed values and what came",
			open: []store.Interrupt{withID("int-one", MCPForm(opts, "s", "t", "size?", map[string]any{
				"type": "object", "properties": map[string]any{"size": map[string]any{"type": "string", "oneOf": []any{
					map[string]any{"const": "s", "title": "Small"}, map[string]any{"const": "l", "title": "Large"}}}},
			}, ShapeMRTR))},
			entries:  []agui.ResumeEntry{resolved("int-one", `{"action":"accept","content":{"size":"xl"}}`)},
			now:      now0,
			wantCode: CodeInvalidResume,
			wantMsg:  []string{`interrupt int-one: field "content.size" must be one of "s", "l"; got "xl"`},
			notMsg:   []string{"oneOf", "anonymous schema", "did not validate"},
		},
		{
			name: "anyOf of types",
			open: []store.Interrupt{withID("int-any", MCPForm(opts, "s", "t", "n?", map[string]any{
				"type": "object", "properties": map[string]any{"n": map[string]any{"anyOf": []any{
					map[string]any{"type": "string", "minLength": float64(2)}, map[string]any{"type": "boolean"}}}},
			}, ShapeMRTR))},
			entries:  []agui.ResumeEntry{resolved("int-any", `{"action":"accept","content":{"n":"x"}}`)},
			now:      now0,
			wantCode: CodeInvalidResume,
			wantMsg:  []string{`field "content.n" must be a string or a boolean; got "x"`},
			notMsg:   []string{"anyOf", "anonymous schema"},
		},
		{
			name:        "unusable schema lets an object through",
			open:        []store.Interrupt{badSchema},
			entries:     []agui.ResumeEntry{resolved("int-bad-schema", `{"anything":1}`)},
			now:         now0,
			wantAnswers: map[string]Answer{"int-bad-schema": {InterruptID: "int-bad-schema", Payload: map[string]any{"anything": float64(1)}}},
		},
		{
			name:        "no schema, empty payload",
			open:        []store.Interrupt{noSchema},
			entries:     []agui.ResumeEntry{resolved("int-no-schema", ``)},
			now:         now0,
			wantAnswers: map[string]Answer{"int-no-schema": {InterruptID: "int-no-schema", Payload: map[string]any{}}},
		},
		{
			name:     "no schema still wants an object",
			open:     []store.Interrupt{noSchema},
			entries:  []agui.ResumeEntry{resolved("int-no-schema", `[1]`)},
			now:      now0,
			wantCode: CodeInvalidResume,
			wantMsg:  []string{"must be a JSON object"},
		},
		{
			name:        "MCP form without requested schema takes any content",
			open:        []store.Interrupt{withID("int-f2", MCPForm(opts, "s", "t", "ok?", nil, ShapeSession))},
			entries:     []agui.ResumeEntry{resolved("int-f2", `{"action":"accept","content":{"x":[1]}}`)},
			now:         now0,
			wantAnswers: map[string]Answer{"int-f2": {InterruptID: "int-f2", Payload: map[string]any{"action": "accept", "content": map[string]any{"x": []any{float64(1)}}}}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			answers, ignored, err := Validate(tt.open, tt.entries, tt.now)
			assert.Equal(t, tt.wantIgnored, ignored)
			if tt.wantCode == "" {
				require.NoError(t, err)
				assert.Equal(t, tt.wantAnswers, answers)
				return
			}
			require.Error(t, err)
			assert.Nil(t, answers)
			var re *ResumeError
			require.True(t, errors.As(err, &re), "err is a *ResumeError: %T", err)
			assert.Equal(t, tt.wantCode, re.Code)
			assert.Equal(t, tt.wantExpired, re.Expired)
			for _, s := range tt.wantMsg {
				assert.Contains(t, re.Message, s)
			}
			for _, s := range tt.notMsg {
				assert.NotContains(t, re.Message, s)
			}
			assert.Equal(t, re.Code+": "+re.Message, err.Error())
			assert.NotContains(t, re.Message, "validating", "no schema-path noise")
		})
	}
}

func TestFieldPath(t *testing.T) {
	t.Parallel()
	tests := []struct{ in, want string }{
		{"root", ""},
		{"/properties/text", "text"},
		{"/properties/content/properties/env", "content.env"},
		{"/properties/a~1b/properties/c~0d", "a/b.c~d"},
		{"/properties/list/items", "list[]"},
		{"/properties/list/items/properties/x", "list[].x"},
		{"/properties/properties", "properties"},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			assert.Equal(t, tt.want, fieldPath(tt.in))
		})
	}
}
