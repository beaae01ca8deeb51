package design

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestEveryNoteIsIndexed fails when a note in design/ has no entry in README.md, so the index
// stays the map of the directory: a new note is added to it with a summary and a status.
func TestEveryNoteIsIndexed(t *testing.T) {
	index, err := os.ReadFile("README.md")
	if err != nil {
		t.Fatalf("design/README.md: %v", err)
	}
	notes, err := filepath.Glob("*.md")
	if err != nil {
		t.Fatal(err)
	}
	if len(notes) < 2 {
		t.Fatalf("found %d notes in design/; expected the notes beside README.md", len(notes))
	}
	for _, note := range notes {
		if note == "README.md" {
			continue
		}
		if !strings.Contains(string(index), "]("+note+")") {
			t.Errorf("design/%s is not listed in design/README.md: add a line with a one-line summary and its status", note)
		}
	}
	for _, p := range indexRowProblems(string(index)) {
		t.Error(p)
	}
}

// indexRowProblems checks each row of the index's tables: a linked note, a summary, and a
// status that says current or superseded by another note.
func indexRowProblems(index string) []string {
	var out []string
	for line := range strings.Lines(index) {
		line = strings.TrimSpace(line)
		if !strings.HasPrefix(line, "| [") {
			continue
		}
		cells := strings.Split(strings.Trim(line, "|"), "|")
		if len(cells) != 3 {
			out = append(out, fmt.Sprintf("design/README.md row %q: want | note | summary | status |", line))
			continue
		}
		summary, status := strings.TrimSpace(cells[1]), strings.TrimSpace(cells[2])
		if summary == "" {
			out = append(out, fmt.Sprintf("design/README.md row %q has no summary", line))
		}
		if !strings.HasPrefix(status, "current") && !strings.HasPrefix(status, "superseded by [") {
			out = append(out, fmt.Sprintf("design/README.md row %q: the status must start with \"current\" or \"superseded by [note](note.md)\"", line))
		}
	}
	return out
}

// TestIndexRowCheckCanFail checks the row check on rows with and without a status.
func TestIndexRowCheckCanFail(t *testing.T) {
	got := indexRowProblems("| [a.md](a.md) | does a | current |\n| [b.md](b.md) | does b | superseded by [a.md](a.md) |\n" +
		"| [c.md](c.md) | does c | maybe |\n| [d.md](d.md) |  | current |\n| [e.md](e.md) | two cells |\n")
	if len(got) != 3 || !strings.Contains(got[0], "c.md") || !strings.Contains(got[1], "no summary") || !strings.Contains(got[2], "e.md") {
		t.Errorf("problems = %q; want c.md's status, d.md's summary and e.md's cells", got)
	}
}
