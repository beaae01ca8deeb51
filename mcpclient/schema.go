package mcpclient

import (
	"encoding/json"
	"fmt"
	"regexp"
	"slices"
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
// is nil).
func (s *schema) check(args map[string]any) *argError {
	if s == nil {
		return nil
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
				return ae
			}
		}
	}
	for _, k := range s.raw.Required {
		if _, ok := args[k]; !ok {
			ae.field = k
			return ae
		}
	}
	return ae
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
