package failure

import (
	"github.com/baton-dev/baton/internal/toolname"

	"slices"

	"github.com/baton-dev/baton/llm"
	"github.com/baton-dev/baton/prompts"
)

// maxLessons is the number of distinct failure kinds rendered as <lessons_learned>.
const maxLessons = 5

// Lesson is the latest failure of one kind, as the model is told about it. It holds only
// Baton's own vocabulary (kind, sanitised tool name, tag or code), never outside text.
type Lesson struct {
	Kind Kind   `json:"kind"`
	Tool string `json:"tool,omitempty"`
	Code string `json:"code,omitempty"`
}

// Corrective is the pending one-shot corrective instruction of a narrow_scope decision.
type Corrective struct {
	Kind     Kind   `json:"kind"`
	Tool     string `json:"tool,omitempty"`
	Attempts int    `json:"attempts"`
}

// Learn records f as the latest lesson of its kind: the older lesson of the kind goes, and
// beyond five kinds the oldest kind goes. transient_provider teaches the model nothing (it
// cannot fix the provider) and is not recorded.
func (st *State) Learn(f Failure) {
	if f.Kind == KindTransientProvider || !f.Kind.Valid() {
		return
	}
	l := Lesson{Kind: f.Kind, Code: f.Code}
	if f.Tool != "" {
		l.Tool = toolname.Sanitize(f.Tool)
	}
	st.Lessons = slices.DeleteFunc(st.Lessons, func(o Lesson) bool { return o.Kind == f.Kind })
	st.Lessons = append(st.Lessons, l)
	if n := len(st.Lessons); n > maxLessons {
		st.Lessons = slices.Delete(st.Lessons, 0, n-maxLessons)
	}
}

// Addendum renders the <lessons_learned> block and the pending corrective instruction for
// the next LLM call, and consumes the corrective instruction (it is rendered once). Render
// it once per turn, before the model call, and reuse the request for transient retries.
// "" when there is nothing to say.
func (st *State) Addendum() (string, error) {
	in := prompts.LessonsInput{}
	for _, l := range st.Lessons {
		in.Lessons = append(in.Lessons, prompts.Lesson{Kind: string(l.Kind), Tool: l.Tool, Code: l.Code})
	}
	if c := st.Corrective; c != nil {
		in.Corrective = &prompts.Corrective{Kind: string(c.Kind), Tool: c.Tool, Attempts: c.Attempts}
	}
	out, err := prompts.Lessons(in)
	if err != nil {
		return "", err
	}
	st.Corrective = nil
	return out, nil
}

// WithAddendum returns msgs with addendum appended to the system prompt (msgs[0]), without
// touching msgs itself: the addendum belongs to one call, not to the history. It is added
// to the system prompt rather than sent as a trailing message because providers (and the
// scripted model) treat the last message as the turn to answer.
func WithAddendum(msgs []llm.Message, addendum string) []llm.Message {
	if addendum == "" {
		return msgs
	}
	out := slices.Clone(msgs)
	if len(out) > 0 && out[0].Role == llm.RoleSystem {
		out[0].Content += "\n\n" + addendum
		return out
	}
	return append([]llm.Message{{Role: llm.RoleSystem, Content: addendum}}, out...)
}
