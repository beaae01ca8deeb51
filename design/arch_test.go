package design

import (
	"os"
	"path/filepath"
	"testing"
)

const module = "github.com/baton-dev/baton/"

// protocolPackages speak one protocol each and know nothing of the engine (design/contract.md
// §2: the dependency rule).
var protocolPackages = []string{"subagent", "agui", "mcpclient", "llm", "store"}

// enginePackages decide: the run engine and what renders for the model, the prompts, the
// interrupts, the HTTP surface and the binaries.
var enginePackages = []string{"coordinator", "bridge", "hitl", "prompts", "server", "metrics", "cmd"}

// TestProtocolPackagesDoNotImportTheEngine fails when a non-test file of a protocol package
// (or a package below it) imports an engine package.
func TestProtocolPackagesDoNotImportTheEngine(t *testing.T) {
	for _, p := range protocolPackages {
		for _, v := range violations(t, filepath.Join("..", p)) {
			t.Errorf("%s imports the engine package %s: protocol packages report, the engine decides", v.file, v.imp)
		}
	}
}

// TestArchitectureCheckCanFail runs the check over a package that breaks the rule.
func TestArchitectureCheckCanFail(t *testing.T) {
	dir := t.TempDir()
	src := "package bad\n\nimport _ \"" + module + "coordinator\"\n"
	if err := writeFile(filepath.Join(dir, "bad.go"), src); err != nil {
		t.Fatal(err)
	}
	if err := writeFile(filepath.Join(dir, "bad_test.go"), "package bad\n\nimport _ \""+module+"bridge\"\n"); err != nil {
		t.Fatal(err)
	}
	v := violations(t, dir)
	if len(v) != 1 || v[0].imp != module+"coordinator" {
		t.Fatalf("want one violation (coordinator, not the test file's bridge), got %v", v)
	}
}

type violation struct{ file, imp string }

func violations(t *testing.T, root string) []violation {
	t.Helper()
	return forbiddenImports(t, root, enginePackages)
}

func writeFile(path, content string) error { return os.WriteFile(path, []byte(content), 0o600) }
