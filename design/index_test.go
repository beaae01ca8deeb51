package design

import (
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
}
