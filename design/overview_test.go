package design

import (
	"os"
	"os/exec"
	"regexp"
	"strings"
	"testing"
)

// TestOverviewListsEveryPackage fails when a package of the module is missing from the layer
// table in overview.md, so a newcomer finds every package's place there. A package is listed
// by its path in backquotes (`internal/config`), or by its last element in the row that
// lists its parent (`pgtest` beside `internal/testutil`).
func TestOverviewListsEveryPackage(t *testing.T) {
	b, err := os.ReadFile("overview.md")
	if err != nil {
		t.Fatal(err)
	}
	rows := layerRows(string(b))
	if len(rows) < 3 {
		t.Fatalf("found %d rows in overview.md's layer table; want the table that starts with | layer | packages |", len(rows))
	}
	out, err := exec.Command("go", "list", "-f", "{{.ImportPath}}", "github.com/baton-dev/baton/...").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	var pkgs []string
	for _, p := range strings.Fields(string(out)) {
		p = strings.TrimPrefix(strings.TrimPrefix(p, "github.com/baton-dev/baton"), "/")
		if p != "" {
			pkgs = append(pkgs, p)
		}
	}
	if len(pkgs) < 10 {
		t.Fatalf("go list found %d packages: %q", len(pkgs), pkgs)
	}
	for _, p := range missingFromTable(pkgs, rows) {
		t.Errorf("package %s is not in design/overview.md's layer table: add it to its layer's row", p)
	}
}

// TestOverviewCheckCanFail checks the matching on a small table.
func TestOverviewCheckCanFail(t *testing.T) {
	rows := layerRows("| layer | packages | what |\n|---|---|---|\n| a | `store`, `internal/testutil` (`pgtest`) | x |\n\nafter\n| not | `web` | table |\n")
	got := missingFromTable([]string{"store", "internal/testutil", "internal/testutil/pgtest", "internal/testutil/fakellm", "pgtest", "web", "sto"}, rows)
	want := []string{"internal/testutil/fakellm", "web", "sto"}
	if strings.Join(got, " ") != strings.Join(want, " ") {
		t.Errorf("missing = %q, want %q", got, want)
	}
}

var backquoted = regexp.MustCompile("`([^`]+)`")

// layerRows returns, for each row of the layer table, the names it lists in backquotes.
func layerRows(md string) []map[string]bool {
	var rows []map[string]bool
	in := false
	for line := range strings.Lines(md) {
		line = strings.TrimSpace(line)
		switch {
		case strings.HasPrefix(line, "| layer | packages |"):
			in = true
		case in && !strings.HasPrefix(line, "|"):
			return rows
		case in && !strings.HasPrefix(line, "|---"):
			names := map[string]bool{}
			for _, m := range backquoted.FindAllStringSubmatch(line, -1) {
				names[m[1]] = true
			}
			rows = append(rows, names)
		}
	}
	return rows
}

// missingFromTable returns the packages no row lists, in the order given.
func missingFromTable(pkgs []string, rows []map[string]bool) []string {
	var missing []string
	for _, p := range pkgs {
		listed := false
		for _, row := range rows {
			parent, base, nested := strings.Cut(p, "/")
			if i := strings.LastIndex(p, "/"); i >= 0 {
				parent, base = p[:i], p[i+1:]
			}
			if row[p] || (nested && row[parent] && row[base]) {
				listed = true
				break
			}
		}
		if !listed {
			missing = append(missing, p)
		}
	}
	return missing
}
