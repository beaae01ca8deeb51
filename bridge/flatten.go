package bridge

import (
	"fmt"
	"strings"
	"unicode"
)

// MaxDescription caps a description from outside (agent cards, MCP tools) wherever the
// model reads it: the system prompt and the descriptions in the tools array.
const MaxDescription = 400

// Flatten makes outside text that lands on one line of model-visible text (an agent
// card's description and skills, an MCP tool's description, in the system prompt and in
// the tools array) safe: line breaks and control characters become spaces, runs of space
// collapse, the result is capped at max bytes (cut on a character boundary, "…" marks the
// cut; max <= 0: no cap), and a line that could be read as a tag is escaped like
// [Untrusted] does.
func Flatten(s string, max int) string {
	s = strings.Map(func(r rune) rune {
		if unicode.IsControl(r) || r == '\u2028' || r == '\u2029' || r == '\u0085' {
			return ' '
		}
		return r
	}, s)
	s = strings.Join(strings.Fields(s), " ")
	if max > 0 && len(s) > max {
		cut := max
		for cut > 0 && s[cut]&0xC0 == 0x80 {
			cut--
		}
		s = s[:cut] + "…"
	}
	return UntrustedN(s, 0)
}

// ContinuationNote is the line added to the outcome of a task continued with the user's
// answer, so that the model's history shows the exchange: the task id (encoded as in a
// tag), the agent's question and the user's answer, each from outside and each escaped
// here, on one line.
func ContinuationNote(taskID, question, answer string) string {
	id := strings.TrimPrefix(TaskArg(taskID), "task_id=")
	return UntrustedN(fmt.Sprintf("(continuation of task %s: the agent asked %q; the user answered %q)",
		id, capRunes(question, 500), capRunes(answer, 500)), 0)
}
