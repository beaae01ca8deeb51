package mcpclient

import (
	"encoding/json"
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/google/jsonschema-go/jsonschema"
)

// schema is a tool's (or an elicitation's) JSON schema, compiled once.
// A schema that jsonschema-go cannot handle (an old draft, a remote $ref)
// compiles to nil and is not checked on the client: the server still checks.
type schema struct {
	raw      *jsonschema.Schema
	resolved *jsonschema.Resolved
	// loose is raw without the object-level constraints (required, ...), used
	// only to find which property made a validation fail.
	loose *jsonschema.Resolved
}

// compileSchema compiles v (whatever JSON the server sent) into a schema.
func compileSchema(v any) (*schema, error) {
	if v == nil {
		return nil, nil
	}
	b, err := json.Marshal(v)
	if err != nil {
		return nil, fmt.Errorf("encoding schema: %w", err)
	}
	var s jsonschema.Schema
	if err := json.Unmarshal(b, &s); err != nil {
		return nil, fmt.Errorf("decoding schema: %w", err)
	}
	rs, err := s.Resolve(nil)
	if err != nil {
		return nil, fmt.Errorf("resolving schema: %w", err)
	}
	// Validate an empty object once, so that an unsupported draft shows now
	// rather than as a bogus validation failure on every call.
	if err := rs.Validate(map[string]any{}); err != nil && strings.Contains(err.Error(), "cannot validate version") {
		return nil, fmt.Errorf("unsupported schema: %w", err)
	}
	out := &schema{raw: &s, resolved: rs}
	var loose jsonschema.Schema
	if json.Unmarshal(b, &loose) == nil {
		loose.Required = nil
		loose.DependentRequired = nil
		loose.MinProperties = nil
		if lrs, err := loose.Resolve(nil); err == nil {
			out.loose = lrs
		}
	}
	return out, nil
}

// argError describes arguments that do not match a schema.
type argError struct {
	reason string
	field  string
	got    any
}

// check validates args against s. It returns nil when they match (or when s
// is nil). An optional argument sent as null is taken as absent: it is removed
// from args (so it is not sent either). The reason is plain words for the
// model: the field, what was expected and what came.
func (s *schema) check(args map[string]any) *argError {
	if s == nil {
		return nil
	}
	for k, v := range args {
		if v == nil && !slices.Contains(s.raw.Required, k) {
			delete(args, k)
		}
	}
	err := s.resolved.Validate(args)
	if err == nil {
		return nil
	}
	ae := &argError{reason: validationReason(err)}
	// Find the offending property: each one alone against the schema without
	// its object-level constraints; else the first missing required one.
	if s.loose != nil {
		keys := make([]string, 0, len(args))
		for k := range args {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		for _, k := range keys {
			if s.loose.Validate(map[string]any{k: args[k]}) != nil {
				ae.field, ae.got = k, args[k]
				ae.reason = s.plainReason(k, args[k], ae.reason)
				return ae
			}
		}
	}
	for _, k := range s.raw.Required {
		if _, ok := args[k]; !ok {
			ae.field = k
			ae.reason = fmt.Sprintf("%s: required, but missing", k)
			return ae
		}
	}
	return ae
}

// plainReason says why value does not fit the property field, in plain words. fallback
// is the validator's message, used (cleaned of Go internals) when no rule below explains
// it.
func (s *schema) plainReason(field string, value any, fallback string) string {
	p := s.raw.Properties[field]
	if p == nil {
		if s.raw.AdditionalProperties != nil {
			return fmt.Sprintf("%s: unknown argument (the tool takes no such field)", field)
		}
		return field + ": " + plainFallback(fallback)
	}
	got := describe(value)
	types := p.Types
	if p.Type != "" {
		types = []string{p.Type}
	}
	if len(types) > 0 && !slices.ContainsFunc(types, func(t string) bool { return hasType(value, t) }) {
		return fmt.Sprintf("%s: expected %s, got %s", field, strings.Join(types, " or "), got)
	}
	if len(p.Enum) > 0 && !slices.ContainsFunc(p.Enum, func(e any) bool { return sameValue(e, value) }) {
		return fmt.Sprintf("%s: expected one of %s, got %s", field, jsonList(p.Enum), got)
	}
	if n, ok := value.(float64); ok {
		switch {
		case p.Minimum != nil && n < *p.Minimum:
			return fmt.Sprintf("%s: expected a number of at least %s, got %s", field, num(*p.Minimum), got)
		case p.ExclusiveMinimum != nil && n <= *p.ExclusiveMinimum:
			return fmt.Sprintf("%s: expected a number above %s, got %s", field, num(*p.ExclusiveMinimum), got)
		case p.Maximum != nil && n > *p.Maximum:
			return fmt.Sprintf("%s: expected a number of at most %s, got %s", field, num(*p.Maximum), got)
		case p.ExclusiveMaximum != nil && n >= *p.ExclusiveMaximum:
			return fmt.Sprintf("%s: expected a number below %s, got %s", field, num(*p.ExclusiveMaximum), got)
		}
	}
	if str, ok := value.(string); ok {
		l := len([]rune(str))
		switch {
		case p.MinLength != nil && l < *p.MinLength:
			return fmt.Sprintf("%s: expected a string of at least %d characters, got %d", field, *p.MinLength, l)
		case p.MaxLength != nil && l > *p.MaxLength:
			return fmt.Sprintf("%s: expected a string of at most %d characters, got %d", field, *p.MaxLength, l)
		case p.Pattern != "":
			if re, err := regexp.Compile(p.Pattern); err == nil && !re.MatchString(str) {
				return fmt.Sprintf("%s: expected a string matching %s, got %s", field, p.Pattern, got)
			}
		}
	}
	return field + ": " + plainFallback(fallback)
}

// hasType reports whether v (decoded JSON) is of the JSON Schema type t.
func hasType(v any, t string) bool {
	switch t {
	case "null":
		return v == nil
	case "boolean":
		_, ok := v.(bool)
		return ok
	case "string":
		_, ok := v.(string)
		return ok
	case "number":
		_, ok := v.(float64)
		return ok
	case "integer":
		f, ok := v.(float64)
		return ok && f == float64(int64(f))
	case "array":
		_, ok := v.([]any)
		return ok
	case "object":
		_, ok := v.(map[string]any)
		return ok
	}
	return true
}

// describe names a value for a reason: its JSON type, and the value when short.
func describe(v any) string {
	switch v := v.(type) {
	case nil:
		return "null"
	case bool:
		return fmt.Sprintf("the boolean %v", v)
	case float64:
		return "the number " + num(v)
	case string:
		if len(v) > 40 {
			return "a string"
		}
		return fmt.Sprintf("the string %q", v)
	case []any:
		return "an array"
	case map[string]any:
		return "an object"
	}
	return "a value"
}

func num(f float64) string { return strconv.FormatFloat(f, 'g', -1, 64) }

func sameValue(a, b any) bool {
	x, err1 := json.Marshal(a)
	y, err2 := json.Marshal(b)
	return err1 == nil && err2 == nil && string(x) == string(y)
}

func jsonList(vs []any) string {
	b, err := json.Marshal(vs)
	if err != nil || len(b) > 200 {
		return "the listed values"
	}
	return string(b)
}

// goInternals matches what a validator's message may carry from Go: reflect values,
// fractions of a Go rational, %f floats.
var goInternals = regexp.MustCompile(`<[^<>]*reflect[^<>]*>|\b\d+/\d+\b|\b(\d+)\.0{6}\b`)

// plainFallback keeps a validator message without Go internals.
func plainFallback(msg string) string {
	if goInternals.MatchString(msg) {
		return "the value does not fit the tool's input schema"
	}
	return msg
}

// applyDefaults fills in the schema's defaults for missing properties of
// content, in place.
func (s *schema) applyDefaults(content map[string]any) (err error) {
	if s == nil {
		return nil
	}
	// ApplyDefaults panics on a default it cannot assign; a server's schema
	// must not crash the coordinator.
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("applying schema defaults: %v", r)
		}
	}()
	return s.resolved.ApplyDefaults(&content)
}

var validatingPrefix = regexp.MustCompile(`^validating [^:]*: `)

// validationReason strips jsonschema-go's "validating <schema>: " prefixes,
// keeping the innermost message, which names the problem.
func validationReason(err error) string {
	msg := err.Error()
	for {
		loc := validatingPrefix.FindStringIndex(msg)
		if loc == nil {
			break
		}
		msg = msg[loc[1]:]
	}
	if msg == "" {
		return "the arguments do not match the tool's input schema"
	}
	return msg
}
