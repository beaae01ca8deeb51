package failure

import (
	"testing"

	"github.com/baton-dev/baton/llm"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestLessonsKeepLatestOfFiveKinds(t *testing.T) {
	t.Parallel()
	f := func(k Kind, tool, code string) Failure { return Failure{Kind: k, Tool: tool, Code: code} }
	tests := []struct {
		name string
		in   []Failure
		want []Lesson
	}{
		{"none", nil, nil},
		{"transient failures teach nothing", []Failure{f(KindTransientProvider, "", "")}, nil},
		{"unknown kinds are not rendered", []Failure{f("mystery", "", "")}, nil},
		{"latest of a kind replaces the older and moves last", []Failure{
			f(KindToolError, "a", "ERROR"), f(KindNoProgress, "", "stall"), f(KindToolError, "b", "TIMEOUT"),
		}, []Lesson{{Kind: KindNoProgress, Code: "stall"}, {Kind: KindToolError, Tool: "b", Code: "TIMEOUT"}}},
		{"at most five kinds, the oldest goes", []Failure{
			f(KindToolError, "a", ""), f(KindNoProgress, "", ""), f(KindLoopDetected, "a", ""),
			f(KindCapabilityGap, "c", ""), f(KindPolicyViolation, "d", ""), f(KindOutputTruncated, "", ""),
		}, []Lesson{
			{Kind: KindNoProgress}, {Kind: KindLoopDetected, Tool: "a"}, {Kind: KindCapabilityGap, Tool: "c"},
			{Kind: KindPolicyViolation, Tool: "d"}, {Kind: KindOutputTruncated},
		}},
		{"tool names are sanitised", []Failure{f(KindToolError, "x\n</lessons_learned>", "")}, []Lesson{{Kind: KindToolError, Tool: "x___lessons_learned_"}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var st State
			for _, x := range tt.in {
				st.Learn(x)
			}
			assert.Equal(t, tt.want, st.Lessons)
		})
	}
}

func TestAddendumThroughThePolicy(t *testing.T) {
	t.Parallel()
	p := fixedPolicy()
	var st State
	text, err := st.Addendum()
	require.NoError(t, err)
	assert.Empty(t, text, "nothing to say")

	p.Decide(Failure{Kind: KindNoProgress, Code: "empty_turn", Explanation: "x."}, &st)
	text, err = st.Addendum()
	require.NoError(t, err)
	assert.Equal(t, "<lessons_learned>\n"+
		"What went wrong earlier in this run; do not repeat it:\n"+
		"- A step made no progress. Every reply must either call a tool or answer the user.\n"+
		"</lessons_learned>\n\n"+
		"<corrective_instruction>\n"+
		"You are not making progress. In your next reply, either call one tool with arguments that fix what went wrong, or answer the user with what you have and say what is missing. Do not reply with nothing.\n"+
		"</corrective_instruction>", text)
	text, err = st.Addendum()
	require.NoError(t, err)
	assert.NotContains(t, text, "corrective_instruction", "the corrective instruction is rendered once")
	assert.Contains(t, text, "<lessons_learned>")
}

func TestWithAddendum(t *testing.T) {
	t.Parallel()
	msgs := []llm.Message{{Role: llm.RoleSystem, Content: "system"}, {Role: llm.RoleUser, Content: "hi"}}
	got := WithAddendum(msgs, "<lessons_learned>x</lessons_learned>")
	assert.Equal(t, []llm.Message{{Role: llm.RoleSystem, Content: "system\n\n<lessons_learned>x</lessons_learned>"}, {Role: llm.RoleUser, Content: "hi"}}, got)
	assert.Equal(t, "system", msgs[0].Content, "the history is not touched")

	assert.Equal(t, msgs, WithAddendum(msgs, ""))

	noSystem := []llm.Message{{Role: llm.RoleUser, Content: "hi"}}
	assert.Equal(t, []llm.Message{{Role: llm.RoleSystem, Content: "a"}, {Role: llm.RoleUser, Content: "hi"}}, WithAddendum(noSystem, "a"))
	assert.Len(t, noSystem, 1)
}
