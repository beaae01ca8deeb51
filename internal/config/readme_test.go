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

// userDocs are the README and the docs/ pages whose YAML examples are loaded (the same list
// as cmd/coordinator's README tests read).
var userDocs = []string{
	"README.md",
	"docs/demo.md", "docs/quickstart.md", "docs/endpoints.md", "docs/configuration.md",
	"docs/auth.md", "docs/approvals.md", "docs/a2a-agent.md", "docs/browser.md",
	"docs/docker.md", "docs/operations.md", "docs/layout.md", "docs/threads.md",
	"docs/stores.md", "docs/proxies.md", "docs/testing.md", "docs/nesting.md",
	"docs/spend.md", "docs/history.md", "docs/mcp-server.md",
}

// TestREADMEConfigExamples loads every YAML example of the README and its docs/ pages with
// the config loader: an example a reader copies must be accepted as written (the variables
// it names set).
func TestREADMEConfigExamples(t *testing.T) {
	var all strings.Builder
	for _, f := range userDocs {
		b, err := os.ReadFile(filepath.Join("..", "..", filepath.FromSlash(f)))
		require.NoError(t, err)
		all.Write(b)
	}
	blocks := fencedYAML.FindAllStringSubmatch(all.String(), -1)
	require.NotEmpty(t, blocks, "the docs have YAML examples")
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
