package design

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
)

// A default is defined once, in internal/config, so that the engine, the server and the
// configuration file cannot disagree on it. The engine's and the server's exported
// Default* constants are therefore defined from internal/config's (or alias another
// checked package's), unless listed below as their own.
var defaultsPackages = []string{"coordinator", "server", "failure", "hitl"}

// ownDefaults are Default* constants with no configuration key. Keys are
// "<package dir>.<Name>".
var ownDefaults = map[string]string{
	"coordinator.DefaultFollowerRenewal": "no configuration key",
	"server.DefaultBodyReadTimeout":      "no configuration key",
}

func TestDefaultsDefinedOnce(t *testing.T) {
	var found []string
	for _, p := range defaultsPackages {
		got, err := restatedDefaults(filepath.Join("..", p), p)
		if err != nil {
			t.Fatal(err)
		}
		found = append(found, got...)
	}
	seen := map[string]bool{}
	for _, name := range found {
		seen[name] = true
		if _, ok := ownDefaults[name]; !ok {
			t.Errorf("%s restates a default: define it from internal/config's constant (or list it in ownDefaults when no configuration key sets it)", name)
		}
	}
	for name := range ownDefaults {
		if !seen[name] {
			t.Errorf("ownDefaults lists %s, which is gone or now defined from internal/config: delete its entry", name)
		}
	}
}

// TestDefaultsCheckCanFail runs the check over a package with one restated default and one
// taken from internal/config.
func TestDefaultsCheckCanFail(t *testing.T) {
	dir := t.TempDir()
	src := "package p\n\nimport (\n\t\"time\"\n\n\t\"github.com/baton-dev/baton/internal/config\"\n)\n\n" +
		"const (\n\tDefaultA = 30 * time.Second\n\tDefaultB = time.Duration(config.DefaultLease)\n\tdefaultC = 3\n)\n\nconst DefaultD = 4\n"
	if err := os.WriteFile(filepath.Join(dir, "p.go"), []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "p_test.go"), []byte("package p\n\nconst DefaultE = 5\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	got, err := restatedDefaults(dir, "p")
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"p.DefaultA", "p.DefaultD"}; fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("restated = %v, want %v", got, want)
	}
}

// restatedDefaults returns the exported Default* constants of the package in dir (non-test
// files) whose value names no other package: a literal restated rather than taken from
// internal/config.
func restatedDefaults(dir, pkg string) ([]string, error) {
	files, err := filepath.Glob(filepath.Join(dir, "*.go"))
	if err != nil {
		return nil, err
	}
	var out []string
	fset := token.NewFileSet()
	for _, path := range files {
		if strings.HasSuffix(path, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, path, nil, parser.SkipObjectResolution)
		if err != nil {
			return nil, err
		}
		imported := map[string]bool{}
		for _, is := range f.Imports {
			name := strings.Trim(is.Path.Value, `"`)
			name = name[strings.LastIndex(name, "/")+1:]
			if is.Name != nil {
				name = is.Name.Name
			}
			if name != "time" {
				imported[name] = true
			}
		}
		for _, decl := range f.Decls {
			gd, ok := decl.(*ast.GenDecl)
			if !ok || gd.Tok != token.CONST {
				continue
			}
			for _, spec := range gd.Specs {
				vs := spec.(*ast.ValueSpec)
				for i, n := range vs.Names {
					if !strings.HasPrefix(n.Name, "Default") || i >= len(vs.Values) || namesPackage(vs.Values[i], imported) {
						continue
					}
					out = append(out, pkg+"."+n.Name)
				}
			}
		}
	}
	sort.Strings(out)
	return out, nil
}

// namesPackage reports whether e refers to a selector of one of the imported packages.
func namesPackage(e ast.Expr, imported map[string]bool) bool {
	found := false
	ast.Inspect(e, func(n ast.Node) bool {
		if sel, ok := n.(*ast.SelectorExpr); ok {
			if id, ok := sel.X.(*ast.Ident); ok && imported[id.Name] {
				found = true
			}
		}
		return !found
	})
	return found
}
