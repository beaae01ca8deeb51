package hitl

import (
	"bytes"
	"encoding/json"
	"fmt"
	"log/slog"
	"reflect"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/google/jsonschema-go/jsonschema"

	"github.com/baton-dev/baton/agui"
	"github.com/baton-dev/baton/store"
)

// Resume error codes, sent as RUN_ERROR.code.
const (
	CodeInvalidResume    = "INVALID_RESUME"
	CodeInterruptExpired = "INTERRUPT_EXPIRED"
)

// Answer is the validated answer to one open interrupt.
type Answer struct {
	InterruptID string
	// Cancelled is set when the user abandoned the interrupt (MCP "cancel", A2A CancelTask).
	Cancelled bool
	// Payload is the resolved payload, valid against the interrupt's responseSchema; an empty
	// map when the entry had none. Nil when Cancelled.
	Payload map[string]any
}

// ResumeError is why a resume was refused. Message is safe to show to the user: it names the
// interrupt ids and, for a bad payload, the field.
type ResumeError struct {
	Code    string // CodeInvalidResume or CodeInterruptExpired
	Message string
	// Expired lists the expired interrupt ids (CodeInterruptExpired only).
	Expired []string
}

// Error implements error.
func (e *ResumeError) Error() string { return e.Code + ": " + e.Message }

// Validate checks a resume list against the open interrupts of a thread and returns one
// Answer per open interrupt. Entries for ids that are not open are skipped and returned in
// ignored (each id once). err, when not nil, is a *ResumeError: CodeInterruptExpired when an
// open interrupt has expired (now >= ExpiresAt; a zero ExpiresAt never expires), else
// CodeInvalidResume when an open interrupt is not covered, is covered twice with different
// answers, or a resolved payload does not match its responseSchema.
func Validate(open []store.Interrupt, entries []agui.ResumeEntry, now time.Time) (answers map[string]Answer, ignored []string, err error) {
	var expired []string
	isOpen := make(map[string]bool, len(open))
	for _, in := range open {
		isOpen[in.ID] = true
		if !in.ExpiresAt.IsZero() && !now.Before(in.ExpiresAt) {
			expired = append(expired, in.ID)
		}
	}

	byID := make(map[string]agui.ResumeEntry, len(entries))
	var conflicts, badStatus []string
	seenIgnored := map[string]bool{}
	for _, e := range entries {
		if !isOpen[e.InterruptID] {
			if !seenIgnored[e.InterruptID] {
				seenIgnored[e.InterruptID] = true
				ignored = append(ignored, e.InterruptID)
			}
			continue
		}
		if prev, dup := byID[e.InterruptID]; dup {
			// A client that repeats an identical entry means no harm; two different answers
			// to one question cannot both be delivered.
			if !sameEntry(prev, e) && !contains(conflicts, e.InterruptID) {
				conflicts = append(conflicts, e.InterruptID)
			}
			continue
		}
		byID[e.InterruptID] = e
		if e.Status != agui.ResumeResolved && e.Status != agui.ResumeCancelled {
			badStatus = append(badStatus, e.InterruptID)
		}
	}

	if len(expired) > 0 {
		return nil, ignored, &ResumeError{
			Code:    CodeInterruptExpired,
			Message: fmt.Sprintf("%s %s expired and can no longer be answered", plural(len(expired), "interrupt", "interrupts"), strings.Join(expired, ", ")),
			Expired: expired,
		}
	}

	var problems []string
	var uncovered []string
	for _, in := range open {
		if _, ok := byID[in.ID]; !ok {
			uncovered = append(uncovered, in.ID)
		}
	}
	if len(uncovered) > 0 {
		problems = append(problems, fmt.Sprintf("the resume does not answer or cancel open %s %s; every open interrupt must be covered",
			plural(len(uncovered), "interrupt", "interrupts"), strings.Join(uncovered, ", ")))
	}
	for _, id := range conflicts {
		problems = append(problems, fmt.Sprintf("interrupt %s is answered more than once, with different answers", id))
	}
	for _, id := range badStatus {
		problems = append(problems, fmt.Sprintf("interrupt %s: status %q is neither %q nor %q", id, byID[id].Status, agui.ResumeResolved, agui.ResumeCancelled))
	}
	if len(problems) > 0 {
		return nil, ignored, &ResumeError{Code: CodeInvalidResume, Message: strings.Join(problems, "; ")}
	}

	answers = make(map[string]Answer, len(open))
	for _, in := range open {
		e := byID[in.ID]
		if e.Status == agui.ResumeCancelled {
			answers[in.ID] = Answer{InterruptID: in.ID, Cancelled: true}
			continue
		}
		payload, msg := checkPayload(in, e.Payload)
		if msg != "" {
			problems = append(problems, fmt.Sprintf("interrupt %s: %s", in.ID, msg))
			continue
		}
		answers[in.ID] = Answer{InterruptID: in.ID, Payload: payload}
	}
	if len(problems) > 0 {
		return nil, ignored, &ResumeError{Code: CodeInvalidResume, Message: strings.Join(problems, "; ")}
	}
	return answers, ignored, nil
}

// checkPayload decodes a resolved payload and validates it against the interrupt's schema.
// It returns the payload, or a user-safe reason why it is refused.
func checkPayload(in store.Interrupt, raw json.RawMessage) (map[string]any, string) {
	payload := map[string]any{}
	if len(bytes.TrimSpace(raw)) > 0 && string(bytes.TrimSpace(raw)) != "null" {
		if err := json.Unmarshal(raw, &payload); err != nil || payload == nil {
			return nil, "the payload must be a JSON object"
		}
	}
	if in.ResponseSchema == nil {
		return payload, ""
	}
	rs, err := resolveSchema(in.ResponseSchema)
	if err != nil {
		// The schema came from a remote server (an MCP requested schema) and the user cannot
		// fix it; refusing every answer would leave the interrupt unanswerable until it
		// expires, so the payload goes through unchecked, as an object.
		slog.Warn("hitl: responseSchema unusable, payload not validated", "interrupt", in.ID, "err", err)
		return payload, ""
	}
	if err := rs.Validate(payload); err != nil {
		return nil, describe(err, in.ResponseSchema, payload)
	}
	return payload, ""
}

func resolveSchema(m map[string]any) (*jsonschema.Resolved, error) {
	b, err := json.Marshal(m)
	if err != nil {
		return nil, err
	}
	var s jsonschema.Schema
	if err := json.Unmarshal(b, &s); err != nil {
		return nil, err
	}
	return s.Resolve(nil)
}

var (
	// validating /properties/content/properties/env: <detail>
	reValidating = regexp.MustCompile(`validating (/[^:]*|root): `)
	reType       = regexp.MustCompile(`^type: .* has type "([^"]+)", want (?:one of )?"([^"]+)"$`)
	reRequired   = regexp.MustCompile(`^required: missing properties: \[(.*)\]$`)
	reAdditional = regexp.MustCompile(`^unexpected additional properties \[(.*)\]$`)
	reQuoted     = regexp.MustCompile(`"((?:[^"\\]|\\.)*)"`)
)

// describe turns a jsonschema validation error into a short user-safe sentence naming the
// field. The library's messages are for developers ("validating /properties/text: type: 5
// has type \"number\", want \"string\""), so the ones a form can produce are rewritten, and
// any other keyword is told as what the schema expects at that field and what came.
func describe(err error, schema map[string]any, payload map[string]any) string {
	msg := err.Error()
	path, schemaPath := "", ""
	if locs := reValidating.FindAllStringSubmatchIndex(msg, -1); len(locs) > 0 {
		last := locs[len(locs)-1]
		for _, loc := range locs {
			// A combinator's own failure is what the user can act on; the failures of its
			// alternatives that follow it (type: want "boolean") would mislead.
			if rest := msg[loc[1]:]; strings.HasPrefix(rest, "anyOf:") || strings.HasPrefix(rest, "oneOf:") {
				last = loc
				break
			}
		}
		schemaPath = msg[last[2]:last[3]]
		path = fieldPath(schemaPath)
		msg = msg[last[1]:]
	}
	join := func(parent, name string) string {
		if parent == "" {
			return name
		}
		return parent + "." + name
	}
	switch {
	case reType.MatchString(msg):
		m := reType.FindStringSubmatch(msg)
		if path == "" {
			return fmt.Sprintf("the payload must be of type %s, not %s", m[2], m[1])
		}
		return fmt.Sprintf("field %q must be of type %s, not %s", path, m[2], m[1])
	case reRequired.MatchString(msg):
		var fields []string
		for _, q := range reQuoted.FindAllStringSubmatch(reRequired.FindStringSubmatch(msg)[1], -1) {
			fields = append(fields, fmt.Sprintf("%q", join(path, q[1])))
		}
		return fmt.Sprintf("%s %s %s required", plural(len(fields), "field", "fields"), strings.Join(fields, ", "), plural(len(fields), "is", "are"))
	case reAdditional.MatchString(msg):
		var fields []string
		for _, q := range reQuoted.FindAllStringSubmatch(reAdditional.FindStringSubmatch(msg)[1], -1) {
			fields = append(fields, fmt.Sprintf("%q", join(path, q[1])))
		}
		return fmt.Sprintf("unexpected %s %s", plural(len(fields), "field", "fields"), strings.Join(fields, ", "))
	case strings.HasPrefix(msg, "enum: "):
		if enum, ok := lookup(schema, schemaPath)["enum"].([]any); ok {
			if b, err := json.Marshal(enum); err == nil {
				return fmt.Sprintf("field %q must be one of %s", path, b)
			}
		}
		return fmt.Sprintf("field %q is not one of the allowed values", path)
	}
	// Any other keyword: the validator's words (oneOf: did not validate against any of
	// [<anonymous schema> …]) mean nothing to a user; say what the schema expects there
	// and what came instead.
	keyword, _, _ := strings.Cut(msg, ":")
	want := expectation(strings.TrimSpace(keyword), lookup(schema, schemaPath))
	got := gotValue(payload, path)
	if path == "" {
		return fmt.Sprintf("the payload must be %s; got %s", want, got)
	}
	return fmt.Sprintf("field %q must be %s; got %s", path, want, got)
}

// expectation says in plain words what sub accepts, from the keyword that refused a value.
func expectation(keyword string, sub map[string]any) string {
	num := func(k string) string {
		if v, ok := sub[k].(float64); ok {
			return strconv.FormatFloat(v, 'f', -1, 64)
		}
		return fmt.Sprint(sub[k])
	}
	switch keyword {
	case "oneOf", "anyOf":
		alts, _ := sub[keyword].([]any)
		var consts, kinds []string
		for _, a := range alts {
			m, _ := a.(map[string]any)
			if c, ok := m["const"]; ok {
				b, _ := json.Marshal(c)
				consts = append(consts, string(b))
				continue
			}
			if t, ok := m["type"].(string); ok {
				kinds = append(kinds, article(t))
			}
		}
		switch {
		case len(consts) == len(alts) && len(consts) > 0:
			return "one of " + strings.Join(consts, ", ")
		case len(kinds) == len(alts) && len(kinds) > 0:
			return strings.Join(kinds, " or ")
		}
		return "a value of one of the allowed forms"
	case "const":
		b, _ := json.Marshal(sub["const"])
		return "exactly " + string(b)
	case "minLength":
		return "a text of at least " + num("minLength") + " characters"
	case "maxLength":
		return "a text of at most " + num("maxLength") + " characters"
	case "minimum":
		return "a number of at least " + num("minimum")
	case "maximum":
		return "a number of at most " + num("maximum")
	case "exclusiveMinimum":
		return "a number greater than " + num("exclusiveMinimum")
	case "exclusiveMaximum":
		return "a number less than " + num("exclusiveMaximum")
	case "multipleOf":
		return "a multiple of " + num("multipleOf")
	case "pattern":
		return fmt.Sprintf("a text matching the pattern %v", sub["pattern"])
	case "format":
		return fmt.Sprintf("a text in the %v format", sub["format"])
	case "minItems":
		return "a list of at least " + num("minItems") + " items"
	case "maxItems":
		return "a list of at most " + num("maxItems") + " items"
	case "uniqueItems":
		return "a list without repeated items"
	case "not":
		return "a value the form does not exclude"
	}
	return "a value the form accepts"
}

// article names a JSON type with its article: "a string", "an integer".
func article(t string) string {
	switch t {
	case "integer", "array", "object":
		return "an " + t
	}
	return "a " + t
}

// gotValue shows the value at path (content.env, list[]) of the payload, shortened.
func gotValue(payload map[string]any, path string) string {
	var v any = payload
	if path != "" {
		for _, name := range strings.Split(path, ".") {
			if strings.HasSuffix(name, "[]") {
				return "a list with a value that does not fit"
			}
			m, ok := v.(map[string]any)
			if !ok {
				return "something else"
			}
			v = m[name]
		}
	}
	b, err := json.Marshal(v)
	if err != nil {
		return "something else"
	}
	const maxShown = 60
	if len(b) > maxShown {
		return string(b[:maxShown]) + "…"
	}
	return string(b)
}

// fieldPath turns a schema path (/properties/content/properties/env) into a payload field
// path (content.env).
func fieldPath(schemaPath string) string {
	if schemaPath == "root" {
		return ""
	}
	var parts []string
	segs := strings.Split(strings.TrimPrefix(schemaPath, "/"), "/")
	for i := 0; i < len(segs); i++ {
		if segs[i] == "properties" && i+1 < len(segs) {
			i++
			parts = append(parts, unescapePointer(segs[i]))
			continue
		}
		if segs[i] == "items" {
			parts = append(parts, "[]")
		}
	}
	return strings.ReplaceAll(strings.Join(parts, "."), ".[]", "[]")
}

// lookup returns the subschema at a JSON pointer of schema, or nil.
func lookup(schema map[string]any, pointer string) map[string]any {
	if pointer == "root" || pointer == "" {
		return schema
	}
	cur := schema
	for _, seg := range strings.Split(strings.TrimPrefix(pointer, "/"), "/") {
		next, ok := cur[unescapePointer(seg)].(map[string]any)
		if !ok {
			return nil
		}
		cur = next
	}
	return cur
}

func unescapePointer(s string) string {
	return strings.ReplaceAll(strings.ReplaceAll(s, "~1", "/"), "~0", "~")
}

func sameEntry(a, b agui.ResumeEntry) bool {
	if a.Status != b.Status {
		return false
	}
	if a.Status == agui.ResumeCancelled {
		return true
	}
	var pa, pb any
	errA := json.Unmarshal(orNull(a.Payload), &pa)
	errB := json.Unmarshal(orNull(b.Payload), &pb)
	return errA == nil && errB == nil && reflect.DeepEqual(pa, pb)
}

func orNull(raw json.RawMessage) []byte {
	if len(bytes.TrimSpace(raw)) == 0 {
		return []byte("null")
	}
	return raw
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

func plural(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}
