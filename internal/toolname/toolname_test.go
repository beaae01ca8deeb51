package toolname

import (
	"strings"
	"testing"
)

func TestSanitizeReadable(t *testing.T) {
	t.Parallel()
	cases := map[string]string{
		"search":       "search",
		"café":         "caf_",
		"web search!":  "web_search_",
		"日本":           "__",
		"a-b_C9":       "a-b_C9",
		"tab\tnewline": "tab_newline",
	}
	for in, want := range cases {
		if got := Sanitize(in); got != want {
			t.Errorf("Sanitize(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestLongNamesHashedStable(t *testing.T) {
	t.Parallel()
	long := strings.Repeat("x", 70)
	a, b := Sanitize(long), Sanitize(long+"y")
	if len(a) != Max || len(b) != Max {
		t.Fatalf("lengths %d %d, want %d", len(a), len(b), Max)
	}
	if a == b {
		t.Fatalf("two long names collide: %q", a)
	}
	if a != Sanitize(long) {
		t.Fatal("not stable")
	}
	server, tool := "files", strings.Repeat("t", 70)
	m := MCP(server, tool)
	if len(m) != Max || !strings.HasPrefix(m, "files__ttt") {
		t.Fatalf("MCP(%q, 70 chars) = %q", server, m)
	}
	if m != MCP(server, tool) {
		t.Fatal("MCP not stable")
	}
	if got := MCP("fs", "read_file"); got != "fs__read_file" {
		t.Fatalf("short MCP name changed: %q", got)
	}
	if got := MCP("café", "lire"); got != "caf___lire" {
		t.Fatalf("MCP(café) = %q", got)
	}
}

func TestDisambiguate(t *testing.T) {
	t.Parallel()
	a := Disambiguate("caf_", "café")
	b := Disambiguate("caf_", "caf?")
	if a == b || !strings.HasPrefix(a, "caf__") || len(a) != len("caf_")+suffixLen {
		t.Fatalf("Disambiguate: %q %q", a, b)
	}
	long := Disambiguate(strings.Repeat("z", Max), "raw")
	if len(long) != Max {
		t.Fatalf("len %d", len(long))
	}
	if !Exact("ok_name-1") || Exact("café") || Exact("") || Exact(strings.Repeat("a", 65)) {
		t.Fatal("Exact")
	}
}
