package coordinator

import "strings"

// textParts is text as a model streams it: its deltas, joined once when the turn is over.
// A growing buffer would hold up to twice the text while it grows, beside the deltas that
// the run's events hold anyway, and appending to a string costs the square of its length.
type textParts struct {
	parts []string
	n     int
}

// add appends a delta.
func (t *textParts) add(s string) {
	if s != "" {
		t.parts = append(t.parts, s)
		t.n += len(s)
	}
}

// Len is the text's length in bytes.
func (t *textParts) Len() int { return t.n }

// String is the whole text.
func (t *textParts) String() string { return strings.Join(t.parts, "") }
