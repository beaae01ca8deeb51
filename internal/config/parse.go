package config

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"reflect"
	"strings"

	"gopkg.in/yaml.v3"
)

var unmarshalerType = reflect.TypeFor[yaml.Unmarshaler]()

// decode lays the YAML document in data over c. See the package doc for why the node
// tree is walked before decoding.
func decode(c *Config, data []byte) error {
	var doc yaml.Node
	if err := yaml.Unmarshal(data, &doc); err != nil {
		return yamlErr(c.Source, err)
	}
	if doc.Kind == 0 || len(doc.Content) == 0 {
		return nil // empty file: defaults
	}
	if err := walk(c.Source, doc.Content[0], reflect.TypeFor[Config](), ""); err != nil {
		return err
	}

	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	if err := dec.Decode(c); err != nil {
		return yamlErr(c.Source, err)
	}
	var extra yaml.Node
	if err := dec.Decode(&extra); !errors.Is(err, io.EOF) {
		return &FieldError{Where: c.Source, Message: "the file must hold a single YAML document"}
	}
	return nil
}

func yamlErr(source string, err error) error {
	msg := strings.TrimPrefix(err.Error(), "yaml: ")
	msg = strings.ReplaceAll(msg, "\n ", "")
	if strings.Contains(msg, "mapping values are not allowed") {
		// The usual cause: store: memory: (a plain value that ends with a colon).
		msg += `; check the indentation, and quote a value that contains ": " or ends with ":", e.g. store: "memory:"`
	}
	return &FieldError{Where: source, Message: "invalid YAML: " + msg}
}

// walk checks node n against Go type t: unknown keys, duplicate keys and values of the
// wrong shape, each reported with its key path and line.
func walk(source string, n *yaml.Node, t reflect.Type, path string) error {
	if n.Kind == yaml.AliasNode && n.Alias != nil {
		n = n.Alias
	}
	if n.Kind == yaml.ScalarNode && n.Tag == "!!null" {
		return nil // null keeps the default
	}
	if reflect.PointerTo(t).Implements(unmarshalerType) {
		if err := n.Decode(reflect.New(t).Interface()); err != nil {
			return lineErr(source, path, n, "%s", strings.TrimPrefix(err.Error(), "yaml: "))
		}
		return nil
	}
	switch t.Kind() {
	case reflect.Struct:
		if n.Kind != yaml.MappingNode {
			return lineErr(source, path, n, "must be a mapping")
		}
		fields := yamlFields(t)
		seen := map[string]bool{}
		for i := 0; i+1 < len(n.Content); i += 2 {
			k := n.Content[i]
			key := joinKey(path, k.Value)
			if k.Tag == "!!merge" {
				// "<<: *anchor" merges another mapping into this one.
				if err := walk(source, n.Content[i+1], t, path); err != nil {
					return err
				}
				continue
			}
			ft, ok := fields[k.Value]
			if !ok {
				return lineErr(source, key, k, "unknown key")
			}
			if seen[k.Value] {
				return lineErr(source, key, k, "duplicate key")
			}
			seen[k.Value] = true
			if err := walk(source, n.Content[i+1], ft, key); err != nil {
				return err
			}
		}
	case reflect.Slice:
		if n.Kind != yaml.SequenceNode {
			return lineErr(source, path, n, "must be a list")
		}
		for i, e := range n.Content {
			if err := walk(source, e, t.Elem(), fmt.Sprintf("%s[%d]", path, i)); err != nil {
				return err
			}
		}
	case reflect.Map:
		if n.Kind != yaml.MappingNode {
			return lineErr(source, path, n, "must be a mapping")
		}
		seen := map[string]bool{}
		for i := 0; i+1 < len(n.Content); i += 2 {
			k := n.Content[i]
			key := joinKey(path, k.Value)
			if k.Kind != yaml.ScalarNode {
				return lineErr(source, path, k, "keys must be strings")
			}
			if seen[k.Value] {
				return lineErr(source, key, k, "duplicate key")
			}
			seen[k.Value] = true
			if err := walk(source, n.Content[i+1], t.Elem(), key); err != nil {
				return err
			}
		}
	case reflect.String, reflect.Bool, reflect.Float64, reflect.Int, reflect.Int64:
		return walkScalar(source, n, t.Kind(), path)
	}
	return nil
}

// walkScalar checks that scalar node n decodes as kind.
func walkScalar(source string, n *yaml.Node, kind reflect.Kind, path string) error {
	if n.Kind != yaml.ScalarNode {
		return lineErr(source, path, n, "must be %s", kindNames[kind])
	}
	var err error
	switch kind {
	case reflect.Bool:
		var v bool
		err = n.Decode(&v)
	case reflect.Float64:
		var v float64
		err = n.Decode(&v)
	case reflect.Int, reflect.Int64:
		var v int64
		err = n.Decode(&v)
	}
	if err != nil {
		return lineErr(source, path, n, "must be %s%s", kindNames[kind], got(n))
	}
	return nil
}

// kindNames name the scalar kinds in errors.
var kindNames = map[reflect.Kind]string{
	reflect.String: "a string", reflect.Bool: "a boolean", reflect.Float64: "a number",
	reflect.Int: "an integer", reflect.Int64: "an integer",
}

// got quotes a scalar for an error message. Only used for fields that hold no secrets.
func got(n *yaml.Node) string {
	if n.Kind != yaml.ScalarNode {
		return ""
	}
	return fmt.Sprintf(" (got %q)", n.Value)
}

func lineErr(source, key string, n *yaml.Node, format string, args ...any) error {
	return &FieldError{Where: source, Key: key, Message: fmt.Sprintf(format, args...) + fmt.Sprintf(" (line %d)", n.Line)}
}

func joinKey(path, key string) string {
	if path == "" {
		return key
	}
	return path + "." + key
}

// yamlFields maps the YAML key of each exported field of struct type t to its type,
// following yaml.v3's rules: the tag name, else the lowercased field name; "-" skips.
func yamlFields(t reflect.Type) map[string]reflect.Type {
	out := make(map[string]reflect.Type, t.NumField())
	for f := range t.Fields() {
		if !f.IsExported() {
			continue
		}
		name, _, _ := strings.Cut(f.Tag.Get("yaml"), ",")
		if name == "-" {
			continue
		}
		if name == "" {
			name = strings.ToLower(f.Name)
		}
		out[name] = f.Type
	}
	return out
}
