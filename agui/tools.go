package agui

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"

	"github.com/google/jsonschema-go/jsonschema"
)

// Limits on identifiers and frontend tools. A frontend tool is forwarded to the model
// provider as a function definition, so its name must be one the providers accept and its
// schema must be small and shallow enough that neither the provider nor Baton's own schema
// handling can be made to do unbounded work.
const (
	// maxIDLen is the longest threadId or runId (DESIGN §3).
	maxIDLen = 128
	// maxTools is the most frontend tools one run may offer.
	maxTools = 128
	// maxToolNameLen is the longest frontend tool name (the providers' own limit).
	maxToolNameLen = 64
	// maxToolDescriptionBytes caps a frontend tool's description.
	maxToolDescriptionBytes = 8 << 10
	// maxSchemaBytes caps one frontend tool's parameters schema.
	maxSchemaBytes = 64 << 10
	// maxSchemaDepth caps the nesting of objects and arrays in a parameters schema.
	maxSchemaDepth = 32
)

// ValidID reports whether s is a valid threadId or runId: 1 to maxIDLen characters of
// [A-Za-z0-9._:-]. Such ids are safe in URL paths, log lines and store keys, so every run
// that could start can also be stopped and reconnected to.
func ValidID(s string) bool {
	if len(s) == 0 || len(s) > maxIDLen {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9':
		case c == '.', c == '_', c == ':', c == '-':
		default:
			return false
		}
	}
	return true
}

// validToolName reports whether s is 1 to maxToolNameLen characters of [A-Za-z0-9_-], the
// function names every supported provider accepts.
func validToolName(s string) bool {
	if len(s) == 0 || len(s) > maxToolNameLen {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '_' || c == '-') {
			return false
		}
	}
	return true
}

// validateTools checks the frontend tools: names, uniqueness, and parameters that are a
// bounded JSON Schema for an object.
func validateTools(tools []Tool) *InputError {
	if len(tools) > maxTools {
		return invalid("tools has %d entries; at most %d are allowed", len(tools), maxTools)
	}
	seen := make(map[string]int, len(tools))
	for i := range tools {
		t := &tools[i]
		if t.Name == "" {
			return invalid("tools[%d].name is required", i)
		}
		if !validToolName(t.Name) {
			return invalid("tools[%d].name must be 1 to %d characters of A-Z, a-z, 0-9, '_' and '-'", i, maxToolNameLen)
		}
		if j, dup := seen[t.Name]; dup {
			return invalid("tools[%d].name %q repeats tools[%d].name", i, t.Name, j)
		}
		seen[t.Name] = i
		if len(t.Description) > maxToolDescriptionBytes {
			return invalid("tools[%d].description exceeds %d bytes", i, maxToolDescriptionBytes)
		}
		t.Parameters = nullToNil(t.Parameters)
		if t.Parameters == nil {
			continue
		}
		if err := validateSchema(t.Parameters); err != nil {
			return invalid("tools[%d].parameters %s", i, err.Error())
		}
	}
	return nil
}

// errSchema values say what is wrong with a parameters schema, after "parameters ".
var (
	errSchemaNotObject = errors.New("must be a JSON Schema object")
	errSchemaTooLarge  = errors.New("is too large")
	errSchemaTooDeep   = errors.New("is nested too deeply")
	errSchemaType      = errors.New(`must describe an object ("type": "object")`)
	errSchemaInvalid   = errors.New("is not a valid JSON Schema")
)

// validateSchema checks a parameters schema: an object of at most maxSchemaBytes, nested at
// most maxSchemaDepth deep, that decodes as a JSON Schema whose type, when given, is
// "object". The depth is checked on the tokens first, so that a hostile schema is refused
// before any recursive decoding.
func validateSchema(raw json.RawMessage) error {
	if raw[0] != '{' {
		return errSchemaNotObject
	}
	if len(raw) > maxSchemaBytes {
		return errSchemaTooLarge
	}
	if jsonDepth(raw) > maxSchemaDepth {
		return errSchemaTooDeep
	}
	var s jsonschema.Schema
	if err := json.Unmarshal(raw, &s); err != nil {
		return errSchemaInvalid
	}
	if s.Type != "" && s.Type != "object" || len(s.Types) > 0 && !(len(s.Types) == 1 && s.Types[0] == "object") {
		return errSchemaType
	}
	return nil
}

// jsonDepth returns the deepest nesting of objects and arrays in raw, reading tokens only,
// and stops reading once maxSchemaDepth is passed. raw is already known to be valid JSON.
func jsonDepth(raw []byte) int {
	dec := json.NewDecoder(bytes.NewReader(raw))
	depth, deepest := 0, 0
	for {
		tok, err := dec.Token()
		if err == io.EOF || err != nil {
			return deepest
		}
		if d, ok := tok.(json.Delim); ok {
			switch d {
			case '{', '[':
				depth++
				deepest = max(deepest, depth)
				if deepest > maxSchemaDepth {
					return deepest
				}
			default:
				depth--
			}
		}
	}
}
