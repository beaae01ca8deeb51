package prompts

import (
	"bytes"
	_ "embed"
	"fmt"
	"strings"
	"text/template"
)

//go:embed lessons.tmpl
var lessonsText string

var lessonsTmpl = template.Must(template.New("lessons").Parse(lessonsText))

// Lesson is one recent failure of the run, of one kind (DESIGN §6: failure kinds such as
// "tool_error" or "loop_detected").
type Lesson struct {
	Kind string
	// Tool is the tool the failure concerns, "" if none.
	Tool string
	// Code is Baton's tag or retry code that revealed it ("RETRY:tool_error", "TIMEOUT"…),
	// "" if none.
	Code string
}

// Corrective is a one-shot corrective instruction (the narrow_scope action).
type Corrective struct {
	Kind string
	Tool string
	// Attempts is how many times the failure happened.
	Attempts int
}

// LessonsInput is what Lessons renders.
type LessonsInput struct {
	// Lessons are rendered in order; the caller keeps at most five distinct kinds.
	Lessons []Lesson
	// Corrective is rendered when not nil.
	Corrective *Corrective
}

// token keeps an identifier (a kind, a tool name, a code) to [A-Za-z0-9_.:=-], capped:
// lessons carry no free text, so nothing interpolated can open or close a block or start
// a line.
func token(s string) string {
	s = strings.Map(func(r rune) rune {
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9', strings.ContainsRune("_.:=-", r):
			return r
		}
		return '_'
	}, s)
	if len(s) > 80 {
		s = s[:80] + "…"
	}
	return s
}

// Lessons renders the <lessons_learned> block and the <corrective_instruction> block that
// go into the next LLM call, each only when it has content; "" when both are empty. The
// wording for each failure kind lives in lessons.tmpl.
func Lessons(in LessonsInput) (string, error) {
	clean := LessonsInput{}
	for _, l := range in.Lessons {
		clean.Lessons = append(clean.Lessons, Lesson{Kind: token(l.Kind), Tool: token(l.Tool), Code: token(l.Code)})
	}
	if c := in.Corrective; c != nil {
		clean.Corrective = &Corrective{Kind: token(c.Kind), Tool: token(c.Tool), Attempts: c.Attempts}
	}
	if len(clean.Lessons) == 0 && clean.Corrective == nil {
		return "", nil
	}
	var b bytes.Buffer
	if err := lessonsTmpl.Execute(&b, clean); err != nil {
		return "", fmt.Errorf("render lessons: %w", err)
	}
	return strings.TrimSpace(b.String()), nil
}
