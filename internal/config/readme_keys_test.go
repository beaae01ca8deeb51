package config

import (
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// keyRow is one row of the key table (docs/configuration.md): | `key` | default | what |.
var keyRow = regexp.MustCompile("(?m)^\\| `([a-z0-9_.\\[\\]]+)` \\| ([^|]*) \\|")

// configKeys lists every key of t (the Config type) as docs/configuration.md writes it: nested keys
// joined with ".", the entries of a list of mappings as "name[].key". Maps (headers, env)
// and lists of scalars are leaves.
func configKeys(t reflect.Type, prefix string) []string {
	var out []string
	for name, ft := range yamlFields(t) {
		key := joinKey(prefix, name)
		switch {
		case ft.Kind() == reflect.Struct:
			out = append(out, configKeys(ft, key)...)
		case ft.Kind() == reflect.Slice && ft.Elem().Kind() == reflect.Struct:
			out = append(out, configKeys(ft.Elem(), key+"[]")...)
		default:
			out = append(out, key)
		}
	}
	sort.Strings(out)
	return out
}

// defaultsOf maps each scalar key of v to its default when that is not the zero value.
func defaultsOf(v reflect.Value, prefix string, out map[string]reflect.Value) {
	t := v.Type()
	for i := range t.NumField() {
		f := t.Field(i)
		name, _, _ := strings.Cut(f.Tag.Get("yaml"), ",")
		if !f.IsExported() || name == "-" || name == "" {
			continue
		}
		key := joinKey(prefix, name)
		fv := v.Field(i)
		switch {
		case fv.Kind() == reflect.Struct:
			defaultsOf(fv, key, out)
		case fv.Kind() == reflect.Slice && fv.Type().Elem().Kind() == reflect.Struct:
			if fv.Len() > 0 {
				defaultsOf(fv.Index(0), key+"[]", out)
			}
		case fv.Kind() != reflect.Slice && fv.Kind() != reflect.Map && !fv.IsZero():
			out[key] = fv
		}
	}
}

// TestREADMEConfigKeys: the table of config keys in docs/configuration.md names every key the loader
// accepts, and no other, and each default the code sets is the one the table shows.
func TestREADMEConfigKeys(t *testing.T) {
	b, err := os.ReadFile(filepath.Join("..", "..", "docs", "configuration.md"))
	require.NoError(t, err)
	rows := map[string]string{}
	var documented []string
	for _, m := range keyRow.FindAllStringSubmatch(string(b), -1) {
		if _, dup := rows[m[1]]; dup {
			t.Errorf("docs/configuration.md: key %s is in the table twice", m[1])
		}
		rows[m[1]] = strings.TrimSpace(m[2])
		documented = append(documented, m[1])
	}
	sort.Strings(documented)
	assert.Equal(t, configKeys(reflect.TypeFor[Config](), ""), documented,
		"docs/configuration.md's key table and internal/config differ")

	// The defaults: Default's, and the per-entry ones of a list entry as loaded.
	c, err := loadYAML(t, "agents: [{name: a, url: \"http://127.0.0.1:1\"}]\nmcp_servers: [{name: m, url: \"http://127.0.0.1:1/mcp\"}]\n", env{})
	require.NoError(t, err)
	defaults := map[string]reflect.Value{}
	defaultsOf(reflect.ValueOf(*c), "", defaults)
	for _, k := range []string{"agents[].name", "agents[].url", "mcp_servers[].name", "mcp_servers[].url"} {
		delete(defaults, k) // the entry's own values, not defaults
	}
	require.NotEmpty(t, defaults)
	code := regexp.MustCompile("^`([^`]*)`")
	for key, v := range defaults {
		cell, ok := rows[key]
		if !ok {
			continue // reported above
		}
		m := code.FindStringSubmatch(cell)
		if !assert.NotNil(t, m, "docs/configuration.md: the default of %s should start with `%v`", key, v.Interface()) {
			continue
		}
		switch d := v.Interface().(type) {
		case Duration:
			got, err := parseDuration(m[1])
			assert.NoError(t, err, key)
			assert.Equal(t, d, got, "docs/configuration.md: default of %s", key)
		case int, int64:
			n, err := strconv.ParseInt(m[1], 10, 64)
			assert.NoError(t, err, key)
			assert.Equal(t, v.Int(), n, "docs/configuration.md: default of %s", key)
		case bool:
			assert.Equal(t, strconv.FormatBool(d), m[1], "docs/configuration.md: default of %s", key)
		case float64:
			f, err := strconv.ParseFloat(m[1], 64)
			assert.NoError(t, err, key)
			assert.Equal(t, d, f, "docs/configuration.md: default of %s", key)
		default:
			assert.Equal(t, v.String(), m[1], "docs/configuration.md: default of %s", key)
		}
	}
}
