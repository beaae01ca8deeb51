package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// userDocs are the README and the pages under docs/ that it links and that the README tests
// read, in the order the README's sections had before they moved: their commands, curl
// examples (which build on one another) and YAML examples must run as written. A new page
// with commands or examples is added here.
var userDocs = []string{
	"README.md",
	"docs/demo.md", "docs/quickstart.md", "docs/endpoints.md", "docs/configuration.md",
	"docs/auth.md", "docs/approvals.md", "docs/a2a-agent.md", "docs/browser.md",
	"docs/docker.md", "docs/operations.md", "docs/layout.md", "docs/threads.md",
	"docs/stores.md", "docs/proxies.md", "docs/testing.md", "docs/nesting.md",
	"docs/spend.md", "docs/history.md", "docs/mcp-server.md",
}

// readDocs returns the text of every page of userDocs under root, one after another.
func readDocs(t *testing.T, root string) string {
	t.Helper()
	var all strings.Builder
	for _, f := range userDocs {
		b, err := os.ReadFile(filepath.Join(root, filepath.FromSlash(f)))
		require.NoError(t, err, "a page of the user documentation")
		all.Write(b)
		all.WriteString("\n")
	}
	return all.String()
}

// TestUserDocsListed: every page the README tests read is one the README's contents link.
func TestUserDocsListed(t *testing.T) {
	t.Parallel()
	readme, err := os.ReadFile(filepath.Join("..", "..", "README.md"))
	require.NoError(t, err)
	for _, f := range userDocs[1:] {
		require.Contains(t, string(readme), "]("+f+")", "the README's contents link %s", f)
	}
}
