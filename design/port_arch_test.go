package design

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"
)

// surfacePackages are the front doors: AG-UI (server), A2A (a2aserver) and MCP (mcpserver).
// They reach the engine through its one port (coordinator.Runs, in the runs package's
// vocabulary) and never the store or the engine itself, so that ownership, admission and
// following a run are decided once, inside the port (design/one-door.md).
var surfacePackages = []string{"server", "a2aserver", "mcpserver"}

// enginePortRules are the packages each rule keeps away from the engine's insides.
var enginePortRules = []struct {
	pkgs      []string
	forbidden []string
	why       string
}{
	{surfacePackages, []string{"store", "coordinator"}, "surfaces reach runs, threads and tasks through the engine's port (runs, coordinator.Runs)"},
	{[]string{"durable"}, []string{"coordinator"}, "durable declares what it needs of the engine; it never imports it"},
	{[]string{"dispatch"}, []string{"coordinator"}, "dispatch declares what it needs of a run (dispatch.Run); it never imports the engine"},
}

// TestSurfacesUseThePortOnly fails when a non-test file of a surface imports the store or
// the engine, or durable or dispatch imports the engine.
func TestSurfacesUseThePortOnly(t *testing.T) {
	for _, r := range enginePortRules {
		for _, p := range r.pkgs {
			for _, v := range forbiddenImports(t, filepath.Join("..", p), r.forbidden) {
				t.Errorf("%s imports %s: %s", v.file, v.imp, r.why)
			}
		}
	}
}

// TestPortCheckCanFail runs the import check over a surface-like package that imports the
// store (and a test file that imports the engine, which is allowed).
func TestPortCheckCanFail(t *testing.T) {
	dir := t.TempDir()
	if err := writeFile(filepath.Join(dir, "door.go"), "package door\n\nimport _ \""+module+"store\"\n"); err != nil {
		t.Fatal(err)
	}
	if err := writeFile(filepath.Join(dir, "door_test.go"), "package door\n\nimport _ \""+module+"coordinator\"\n"); err != nil {
		t.Fatal(err)
	}
	v := forbiddenImports(t, dir, []string{"store", "coordinator"})
	if len(v) != 1 || v[0].imp != module+"store" {
		t.Fatalf("want one violation (store, not the test file's coordinator), got %v", v)
	}
}

func forbiddenImports(t *testing.T, root string, forbidden []string) []violation {
	t.Helper()
	var out []violation
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (d.Name() == "testdata" || d.Name() == "node_modules") {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(token.NewFileSet(), path, nil, parser.ImportsOnly)
		if err != nil {
			return err
		}
		for _, is := range f.Imports {
			imp, _ := strconv.Unquote(is.Path.Value)
			for _, e := range forbidden {
				if imp == module+e || strings.HasPrefix(imp, module+e+"/") {
					out = append(out, violation{path, imp})
				}
			}
		}
		return nil
	})
	if err != nil {
		t.Fatalf("walk %s: %v", root, err)
	}
	return out
}

// maxMethodFiles is how many files a type's methods may spread over: a reader finds a type
// in the file named for it, and at most two more by concern.
const maxMethodFiles = 3

// spreadTypes are the types whose methods are in more than maxMethodFiles files today, with
// their file counts: a ratchet, as oversizeTypes. None is left: moving the engine-level
// durability into durable and tool dispatch into package dispatch took these entries down
// (toolCalls is gone), the per-run durability's mechanism moved too (durable.RunFence,
// RunSuspension, Checkpoint; its policy is functions of the run, durability is in one file),
// and Engine and Run reached three files when the concerns with state of their own became
// types (taskBook, taskCancels, toolCache's toolset) and the rest folded into the files of
// their core. Elsewhere a type keeps its core methods in the file named for it, a concern with
// state of its own is a type of its own, and a method that uses little of its receiver is a
// function. The check fails for a new type over the limit, an entry that grew, and one that
// shrank.
var spreadTypes = map[string]int{}

func TestTypeMethodsStayInFewFiles(t *testing.T) {
	got, err := methodFiles("..")
	if err != nil {
		t.Fatal(err)
	}
	if len(got) == 0 {
		t.Fatal("measured no types: the module was not found")
	}
	for _, p := range checkSpread(got, spreadTypes) {
		t.Error(p)
	}
}

// TestSpreadCheckCanFail: a type with methods in four files fails the check unless
// allowlisted at four; a grown or shrunk entry fails it too.
func TestSpreadCheckCanFail(t *testing.T) {
	dir := t.TempDir()
	for i := range 4 {
		src := fmt.Sprintf("package wide\n\ntype T struct{}\n\nfunc (T) M%d() {}\n", i)
		if i > 0 {
			src = fmt.Sprintf("package wide\n\nfunc (*T) M%d() {}\n", i)
		}
		if err := writeFile(filepath.Join(dir, fmt.Sprintf("f%d.go", i)), src); err != nil {
			t.Fatal(err)
		}
	}
	got, err := methodFiles(dir)
	if err != nil {
		t.Fatal(err)
	}
	key := filepath.Base(dir) + ".T"
	if got[key] != 4 {
		t.Fatalf("measured %v, want %s in 4 files", got, key)
	}
	if p := checkSpread(got, nil); len(p) != 1 {
		t.Errorf("no allowlist: problems %q, want 1", p)
	}
	if p := checkSpread(got, map[string]int{key: 4}); len(p) != 0 {
		t.Errorf("allowlisted as it is: problems %q", p)
	}
	if p := checkSpread(got, map[string]int{key: 6}); len(p) != 1 {
		t.Errorf("shrunk: problems %q, want 1", p)
	}
}

// backPointerTypes are the structs whose only field points back at another struct of
// their package, with the type each points at: a ratchet, as spreadTypes. Such a struct
// owns nothing; it is a second name for the other type's methods, spread by concern. None
// is left: the engine's (runMeter, historian, portStream) became functions over the run
// and the run's Stream itself (design/one-door.md). The check fails for a new one, and for
// an entry that is gone or points elsewhere.
var backPointerTypes = map[string]string{}

// TestNoBackPointerStructs fails when a struct's only field is a pointer (or an embedded
// pointer) to another named struct type declared in the same package, outside
// backPointerTypes. A value field or an embedded value is not a back pointer: the struct
// then owns a copy; nor is an interface, which the struct's user chose to depend on.
func TestNoBackPointerStructs(t *testing.T) {
	got, err := backPointers("..")
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range checkBackPointers(got, backPointerTypes) {
		t.Error(p)
	}
}

// TestBackPointerCheckCanFail: a struct whose only field is a pointer to a struct of its
// package fails the check, embedded or named; a value field, a pointer to itself, a
// second field and a test file's struct do not. A listed one that is gone fails too.
func TestBackPointerCheckCanFail(t *testing.T) {
	dir := t.TempDir()
	src := `package back

type big struct{ n int }
type iface interface{ M() }
type view struct{ b *big }
type embedded struct{ *big }
type value struct{ b big }
type self struct{ next *self }
type two struct {
	b *big
	n int
}
type toIface struct{ i iface }
type outside struct{ s *strings.Builder }
`
	if err := writeFile(filepath.Join(dir, "back.go"), src); err != nil {
		t.Fatal(err)
	}
	if err := writeFile(filepath.Join(dir, "back_test.go"), "package back\n\ntype fixture struct{ b *big }\n"); err != nil {
		t.Fatal(err)
	}
	got, err := backPointers(dir)
	if err != nil {
		t.Fatal(err)
	}
	pkg := filepath.Base(dir)
	want := map[string]string{pkg + ".view": "big", pkg + ".embedded": "big"}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("measured %v, want %v", got, want)
	}
	if p := checkBackPointers(got, nil); len(p) != 2 {
		t.Errorf("no allowlist: problems %q, want 2", p)
	}
	if p := checkBackPointers(got, want); len(p) != 0 {
		t.Errorf("allowlisted as they are: problems %q", p)
	}
	gone := map[string]string{pkg + ".view": "big", pkg + ".embedded": "big", pkg + ".old": "big"}
	if p := checkBackPointers(got, gone); len(p) != 1 {
		t.Errorf("an entry that is gone: problems %q, want 1", p)
	}
	moved := map[string]string{pkg + ".view": "big", pkg + ".embedded": "value"}
	if p := checkBackPointers(got, moved); len(p) != 1 {
		t.Errorf("an entry that points elsewhere: problems %q, want 1", p)
	}
}

// backPointers finds, in the module's non-test code, the structs whose only field is a
// pointer (or an embedded pointer) to another struct type of the same package; it maps
// "<package dir>.<Type>" (as methodFiles) to the type pointed at.
func backPointers(root string) (map[string]string, error) {
	type single struct{ name, target string }
	structs := map[string]map[string]bool{} // package dir → its struct types
	singles := map[string][]single{}        // package dir → its one-pointer structs
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (d.Name() == "testdata" || d.Name() == "node_modules" || strings.HasPrefix(d.Name(), ".")) && path != root {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(token.NewFileSet(), path, nil, parser.SkipObjectResolution)
		if err != nil {
			return err
		}
		dir, _ := filepath.Rel(root, filepath.Dir(path))
		if dir == "." {
			dir = filepath.Base(root)
		}
		dir = filepath.ToSlash(dir)
		if structs[dir] == nil {
			structs[dir] = map[string]bool{}
		}
		ast.Inspect(f, func(n ast.Node) bool {
			ts, ok := n.(*ast.TypeSpec)
			if !ok {
				return true
			}
			st, ok := ts.Type.(*ast.StructType)
			if !ok {
				return true
			}
			structs[dir][ts.Name.Name] = true
			if fs := st.Fields.List; len(fs) == 1 && len(fs[0].Names) <= 1 {
				if star, ok := fs[0].Type.(*ast.StarExpr); ok {
					if id, ok := typeIdent(star.X); ok && id != ts.Name.Name {
						singles[dir] = append(singles[dir], single{ts.Name.Name, id})
					}
				}
			}
			return true
		})
		return nil
	})
	out := map[string]string{}
	for dir, ss := range singles {
		for _, s := range ss {
			if structs[dir][s.target] {
				out[dir+"."+s.name] = s.target
			}
		}
	}
	return out, err
}

// typeIdent is the name of a type of the same package (type arguments off); false for a
// qualified (other package's) or unnamed type.
func typeIdent(e ast.Expr) (string, bool) {
	switch x := e.(type) {
	case *ast.Ident:
		return x.Name, true
	case *ast.IndexExpr:
		return typeIdent(x.X)
	case *ast.IndexListExpr:
		return typeIdent(x.X)
	}
	return "", false
}

func checkBackPointers(got, allowed map[string]string) []string {
	var out []string
	for k, target := range got {
		a, listed := allowed[k]
		switch {
		case !listed:
			out = append(out, fmt.Sprintf("%s's only field points back at %s of its package: give it the state it owns, merge it into %s, or make its methods functions", k, target, target))
		case a != target:
			out = append(out, fmt.Sprintf("%s is allowlisted as pointing at %s but points at %s", k, a, target))
		}
	}
	for k, a := range allowed {
		if _, ok := got[k]; !ok {
			out = append(out, fmt.Sprintf("%s is allowlisted as pointing back at %s but no longer does: delete its entry", k, a))
		}
	}
	sort.Strings(out)
	return out
}

// methodFiles counts, for every type of the module's non-test code, the files its methods
// are in; keys are "<package dir>.<Type>".
func methodFiles(root string) (map[string]int, error) {
	files := map[string]map[string]bool{}
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (d.Name() == "testdata" || d.Name() == "node_modules" || strings.HasPrefix(d.Name(), ".")) && path != root {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(token.NewFileSet(), path, nil, parser.SkipObjectResolution)
		if err != nil {
			return err
		}
		dir, _ := filepath.Rel(root, filepath.Dir(path))
		if dir == "." {
			dir = filepath.Base(root)
		}
		for _, decl := range f.Decls {
			fn, ok := decl.(*ast.FuncDecl)
			if !ok || fn.Recv == nil || len(fn.Recv.List) == 0 {
				continue
			}
			key := filepath.ToSlash(dir) + "." + receiverName(fn.Recv.List[0].Type)
			if files[key] == nil {
				files[key] = map[string]bool{}
			}
			files[key][filepath.Base(path)] = true
		}
		return nil
	})
	out := map[string]int{}
	for k, v := range files {
		out[k] = len(v)
	}
	return out, err
}

// receiverName is the type name of a method's receiver (pointer and type parameters off).
func receiverName(e ast.Expr) string {
	for {
		switch x := e.(type) {
		case *ast.StarExpr:
			e = x.X
		case *ast.IndexExpr:
			e = x.X
		case *ast.IndexListExpr:
			e = x.X
		case *ast.Ident:
			return x.Name
		default:
			return fmt.Sprintf("%T", e)
		}
	}
}

func checkSpread(got, allowed map[string]int) []string {
	var out []string
	for k, n := range got {
		a, listed := allowed[k]
		switch {
		case n > maxMethodFiles && !listed:
			out = append(out, fmt.Sprintf("%s has methods in %d files (at most %d): keep a type's methods in the file named for it", k, n, maxMethodFiles))
		case listed && n > a:
			out = append(out, fmt.Sprintf("%s has methods in %d files; it is allowlisted at %d", k, n, a))
		case listed && n < a:
			out = append(out, fmt.Sprintf("%s is allowlisted at %d files but is now in %d: lower its entry", k, a, n))
		}
	}
	for k, a := range allowed {
		if _, ok := got[k]; !ok {
			out = append(out, fmt.Sprintf("%s is allowlisted at %d but no longer exists: delete its entry", k, a))
		}
	}
	sort.Strings(out)
	return out
}
