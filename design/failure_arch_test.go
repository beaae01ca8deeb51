package design

import (
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// TestFailurePackageDoesNotImportTheEngine fails when package failure (the failure model)
// reaches the run engine through its imports, directly or through any package of the module
// it imports: the model knows nothing of Run, the engine uses it.
func TestFailurePackageDoesNotImportTheEngine(t *testing.T) {
	deps := moduleDeps(t, "..", "failure")
	if len(deps) == 0 {
		t.Fatal("package failure has no files")
	}
	for _, e := range []string{"coordinator", "server", "cmd"} {
		for _, d := range deps {
			if d == e || strings.HasPrefix(d, e+"/") {
				t.Errorf("package failure depends on the engine package %s", d)
			}
		}
	}
}

// TestFailureDepsCheckCanFail runs the dependency walk over packages where the engine is
// reached only indirectly.
func TestFailureDepsCheckCanFail(t *testing.T) {
	root := t.TempDir()
	for dir, src := range map[string]string{
		"a":           "package a\n\nimport _ \"" + module + "b\"\n",
		"b":           "package b\n\nimport _ \"" + module + "coordinator\"\n",
		"coordinator": "package coordinator\n",
	} {
		if err := os.MkdirAll(filepath.Join(root, dir), 0o700); err != nil {
			t.Fatal(err)
		}
		if err := writeFile(filepath.Join(root, dir, dir+".go"), src); err != nil {
			t.Fatal(err)
		}
	}
	if deps := moduleDeps(t, root, "a"); !slices.Contains(deps, "coordinator") {
		t.Fatalf("want coordinator among a's dependencies, got %v", deps)
	}
}

// moduleDeps returns pkg and the module packages its non-test files import, transitively,
// as paths relative to the module root.
func moduleDeps(t *testing.T, root, pkg string) []string {
	t.Helper()
	seen := map[string]bool{}
	queue := []string{pkg}
	for len(queue) > 0 {
		p := queue[0]
		queue = queue[1:]
		if seen[p] {
			continue
		}
		seen[p] = true
		files, err := filepath.Glob(filepath.Join(root, p, "*.go"))
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range files {
			if strings.HasSuffix(f, "_test.go") {
				continue
			}
			ast, err := parser.ParseFile(token.NewFileSet(), f, nil, parser.ImportsOnly)
			if err != nil {
				t.Fatalf("parse %s: %v", f, err)
			}
			for _, is := range ast.Imports {
				imp, _ := strconv.Unquote(is.Path.Value)
				if rel, ok := strings.CutPrefix(imp, module); ok {
					queue = append(queue, rel)
				}
			}
		}
	}
	if len(seen) == 1 {
		if files, _ := filepath.Glob(filepath.Join(root, pkg, "*.go")); len(files) == 0 {
			return nil
		}
	}
	out := make([]string, 0, len(seen))
	for p := range seen {
		out = append(out, p)
	}
	slices.Sort(out)
	return out
}
