package config

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// fencedYAML finds the ```yaml blocks of a Markdown file.
var fencedYAML = regexp.MustCompile("(?s)```yaml\n(.*?)```")

// varRef finds the ${VAR} references of a config example.
var varRef = regexp.MustCompile(`\$\{([A-Za-z_][A-Za-z0-9_]*)\}`)

// TestREADMEConfigExamples loads every YAML example of README.md with the config loader:
// an example a reader copies must be accepted as written (the variables it names set).
func TestREADMEConfigExamples(t *testing.T) {
	b, err := os.ReadFile(filepath.Join("..", "..", "README.md"))
	require.NoError(t, err)
	blocks := fencedYAML.FindAllStringSubmatch(string(b), -1)
	require.NotEmpty(t, blocks, "README.md has YAML examples")
	for i, m := range blocks {
		text := m[1]
		e := env{}
		for _, ref := range varRef.FindAllStringSubmatch(text, -1) {
			e[ref[1]] = "set-for-the-test"
		}
		c, err := loadYAML(t, text, e)
		require.NoError(t, err, "README YAML example %d:\n%s", i+1, text)
		assert.NotNil(t, c)
		if strings.Contains(text, "store:") {
			assert.NotEmpty(t, c.Store)
		}
	}
}

// The comment that once read "# or memory:" invited `store: memory:`, which YAML reads
// as a mapping: the loader must refuse it with a message that names the key.
func TestStoreMemoryUnquoted(t *testing.T) {
	_, err := loadYAML(t, "store: memory:\n", nil)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "baton.yaml")
	assert.Contains(t, err.Error(), `quote a value that contains ": " or ends with ":", e.g. store: "memory:"`)
	c, err := loadYAML(t, "store: \"memory:\"\n", nil)
	require.NoError(t, err)
	assert.Equal(t, "memory:", c.Store)
}
