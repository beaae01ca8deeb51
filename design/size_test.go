package design

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// The engine stays small enough to read (issue 10): no non-test file of package
// coordinator over maxEngineFileLines lines, and no function in it over
// maxEngineFuncLines lines (from its func line to its closing brace).
const (
	maxEngineFileLines = 400
	maxEngineFuncLines = 80
)

func TestEngineFilesAndFunctionsStaySmall(t *testing.T) {
	files, err := filepath.Glob(filepath.Join("..", "coordinator", "*.go"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no coordinator sources found: %v", err)
	}
	fset := token.NewFileSet()
	for _, path := range files {
		if strings.HasSuffix(path, "_test.go") {
			continue
		}
		src, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		if n := strings.Count(string(src), "\n"); n > maxEngineFileLines {
			t.Errorf("%s has %d lines (at most %d): split it by mechanism", path, n, maxEngineFileLines)
		}
		f, err := parser.ParseFile(fset, path, src, 0)
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range f.Decls {
			fn, ok := d.(*ast.FuncDecl)
			if !ok || fn.Body == nil {
				continue
			}
			start, end := fset.Position(fn.Pos()).Line, fset.Position(fn.End()).Line
			if n := end - start; n > maxEngineFuncLines {
				t.Errorf("%s: func %s is %d lines (at most %d)", path, fn.Name.Name, n, maxEngineFuncLines)
			}
		}
	}
}
