package history

import (
	"strconv"
	"unicode/utf8"

	"github.com/baton-dev/baton/llm"
)

// DefaultMaxToolResultBytes is history.max_tool_result_bytes when it is not set.
const DefaultMaxToolResultBytes = 65536

// markerPrefix starts the marker that ends a cut tool result (DESIGN §5).
const markerPrefix = "[TRUNCATED:bytes="

// Marker is the line that ends a tool result of size bytes cut for the model.
func Marker(size int) string { return markerPrefix + strconv.Itoa(size) + "]" }

// Cut returns text as the model may read it: unchanged when it holds at most max bytes,
// else its start, cut at a UTF-8 character boundary, then a line break and
// [TRUNCATED:bytes=N] (N: len(text)), all of it within max bytes (when max leaves room for
// the marker; history.max_tool_result_bytes is at least 256). A text Cut returned is
// never cut again (Cut is idempotent), so applying it to a history that holds cut results
// changes nothing. max <= 0 means DefaultMaxToolResultBytes.
func Cut(text string, max int) string {
	if max <= 0 {
		max = DefaultMaxToolResultBytes
	}
	if len(text) <= max {
		return text
	}
	marker := "\n" + Marker(len(text))
	keep := max - len(marker)
	if keep < 0 {
		keep = 0
	}
	for keep > 0 && !utf8.RuneStart(text[keep]) {
		keep--
	}
	return text[:keep] + marker
}

// CutToolResults returns msgs with every tool result cut to max bytes (Cut). msgs is not
// changed: the slice is copied only when a result is cut.
func CutToolResults(msgs []llm.Message, max int) []llm.Message {
	var out []llm.Message
	for i, m := range msgs {
		if m.Role != llm.RoleTool {
			continue
		}
		c := Cut(m.Content, max)
		if len(c) == len(m.Content) {
			continue
		}
		if out == nil {
			out = append([]llm.Message(nil), msgs...)
		}
		out[i].Content = c
	}
	if out == nil {
		return msgs
	}
	return out
}
