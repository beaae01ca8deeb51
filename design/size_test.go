package design

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
)

// A type's methods are what a reader must hold in mind to change it, and a function is read
// in one go: no type in the module's non-test code has more than maxTypeMethods methods, and
// no function or method more than maxFuncLines lines (from its func line to its closing
// brace). Files may be as long as the one type they hold needs.
const (
	maxTypeMethods = 40
	maxFuncLines   = 80
)

// oversizeTypes are the types over maxTypeMethods, with their method counts: a ratchet, not
// a permission. It is empty: the run is split by concern (Run its loop, toolCalls the tool
// dispatch, durability suspension/resume/journal/takeover/fencing, Stream the delivery,
// runTrace the telemetry), the engine's jobs are services (jobs), and the stores are
// composed of one type per capability. The check fails when a type goes over the limit, when
// an entry grows, and when an entry shrinks (lower it, so the gain cannot be given back); an
// entry back under the limit is deleted. Keys are "<package dir>.<Type>".
var oversizeTypes = map[string]int{}

// oversizeFuncs are the functions over maxFuncLines lines, with their lengths; the same
// ratchet as oversizeTypes. Keys are "<package dir>.<func>" or "<package dir>.<Type>.<method>".
var oversizeFuncs = map[string]int{
	"agui.appendEvent":                   207, // the hand encoder of every event type
	"mcpclient.call.run":                 126,
	"llm/anthropic.Model.Stream":         111,
	"signin.serviceHandler.Authorize":    105,
	"signin.Handler.Authorize":           103,
	"cmd/mcp-conformance-client.runAuth": 92,
	"agui.Sequencer.apply":               85,
	"hitl.Validate":                      82,
}

func TestTypesAndFunctionsStaySmall(t *testing.T) {
	got, err := measure("..")
	if err != nil {
		t.Fatal(err)
	}
	if len(got.methods) == 0 || len(got.funcs) == 0 {
		t.Fatalf("measured %d types and %d functions: the module was not found", len(got.methods), len(got.funcs))
	}
	for _, p := range got.check(oversizeTypes, oversizeFuncs) {
		t.Error(p)
	}
}

// TestSizeCheckCanFail runs the check over a package with a type and a function over the
// limits, with and without allowlists: a new offender, an allowlisted one that grew, one that
// shrank and a stale entry each fail it.
func TestSizeCheckCanFail(t *testing.T) {
	dir := t.TempDir()
	var b strings.Builder
	b.WriteString("package big\n\ntype T[K any] struct{}\n\ntype U struct{}\n\n")
	for i := range maxTypeMethods + 2 {
		fmt.Fprintf(&b, "func (*T[K]) M%d() {}\n", i)
	}
	for i := range 3 {
		fmt.Fprintf(&b, "func (U) M%d() {}\n", i)
	}
	b.WriteString("\nfunc long() {\n" + strings.Repeat("\t_ = 0\n", maxFuncLines) + "}\n")
	if err := os.MkdirAll(filepath.Join(dir, "big"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "big", "big.go"), []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	// A test file is not measured.
	if err := os.WriteFile(filepath.Join(dir, "big", "big_test.go"), []byte("package big\n\nfunc (U) X() {}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	got, err := measure(dir)
	if err != nil {
		t.Fatal(err)
	}
	if got.methods["big.T"] != maxTypeMethods+2 || got.methods["big.U"] != 3 || got.funcs["big.long"] != maxFuncLines+1 {
		t.Fatalf("measured T at %d methods, U at %d, long at %d lines; want %d, 3 and %d",
			got.methods["big.T"], got.methods["big.U"], got.funcs["big.long"], maxTypeMethods+2, maxFuncLines+1)
	}
	for _, tt := range []struct {
		name         string
		types, funcs map[string]int
		want         []string
	}{
		{"no allowlist", nil, nil, []string{"big.T has 42 methods", "big.long is 81 lines"}},
		{"grown and stale", map[string]int{"big.T": 41, "big.U": 45}, map[string]int{"big.long": 81},
			[]string{"big.T has 42 methods (at most 40): split it by concern; it is allowlisted at 41", "big.U is allowlisted at 45 but is now 3"}},
		{"shrunk", map[string]int{"big.T": 50}, map[string]int{"big.long": 90},
			[]string{"big.T is allowlisted at 50 but is now 42: lower its entry to 42", "big.long is allowlisted at 90 but is now 81: lower its entry to 81"}},
		{"allowlisted as they are", map[string]int{"big.T": 42}, map[string]int{"big.long": 81}, nil},
	} {
		problems := got.check(tt.types, tt.funcs)
		if len(problems) != len(tt.want) {
			t.Errorf("%s: problems %q, want %d", tt.name, problems, len(tt.want))
			continue
		}
		for i, w := range tt.want {
			if !strings.Contains(problems[i], w) {
				t.Errorf("%s: problem %d = %q, want it to say %q", tt.name, i, problems[i], w)
			}
		}
	}
}

type sizes struct {
	methods map[string]int // "<dir>.<Type>" -> method count
	funcs   map[string]int // "<dir>.<func>" or "<dir>.<Type>.<method>" -> lines
}

// measure walks the Go module under root and counts every type's methods and every
// function's lines in non-test files.
func measure(root string) (sizes, error) {
	s := sizes{methods: map[string]int{}, funcs: map[string]int{}}
	fset := token.NewFileSet()
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			name := d.Name()
			if path != root && (name == "testdata" || name == "node_modules" || name == "vendor" || strings.HasPrefix(name, ".")) {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(fset, path, nil, parser.SkipObjectResolution)
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(root, filepath.Dir(path))
		if err != nil {
			return err
		}
		pkg := filepath.ToSlash(rel)
		for _, decl := range f.Decls {
			fn, ok := decl.(*ast.FuncDecl)
			if !ok {
				continue
			}
			name := pkg + "." + fn.Name.Name
			if fn.Recv != nil && len(fn.Recv.List) == 1 {
				typ := pkg + "." + receiverType(fn.Recv.List[0].Type)
				s.methods[typ]++
				name = typ + "." + fn.Name.Name
			}
			if fn.Body == nil {
				continue
			}
			n := fset.Position(fn.End()).Line - fset.Position(fn.Pos()).Line
			s.funcs[name] = max(s.funcs[name], n)
		}
		return nil
	})
	return s, err
}

// receiverType is the name of a method's receiver type: T for T, *T, T[K] and *T[K, V].
func receiverType(e ast.Expr) string {
	for {
		switch x := e.(type) {
		case *ast.StarExpr:
			e = x.X
		case *ast.ParenExpr:
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

// check returns, sorted, what breaks the limits given the allowlists: a new offender, an
// allowlisted one that grew, an allowlisted one that shrank (its entry must be lowered), and
// an allowlisted one back under the limit (its entry is stale).
func (s sizes) check(types, funcs map[string]int) []string {
	var out []string
	out = append(out, over(s.methods, types, maxTypeMethods, "has %d methods (at most %d): split it by concern")...)
	out = append(out, over(s.funcs, funcs, maxFuncLines, "is %d lines (at most %d): split it into named steps")...)
	sort.Strings(out)
	return out
}

func over(measured, allowed map[string]int, limit int, format string) []string {
	var out []string
	for name, n := range measured {
		was, listed := allowed[name]
		switch {
		case !listed && n > limit:
			out = append(out, name+" "+fmt.Sprintf(format, n, limit))
		case listed && n > limit && n > was:
			out = append(out, fmt.Sprintf("%s %s; it is allowlisted at %d and may only shrink",
				name, fmt.Sprintf(format, n, limit), was))
		case listed && n > limit && n < was:
			out = append(out, fmt.Sprintf("%s is allowlisted at %d but is now %d: lower its entry to %d so the gain is kept",
				name, was, n, n))
		}
	}
	for name, was := range allowed {
		if n := measured[name]; n <= limit {
			out = append(out, fmt.Sprintf("%s is allowlisted at %d but is now %d, within the limit of %d: delete its entry so it cannot grow back",
				name, was, n, limit))
		}
	}
	return out
}
