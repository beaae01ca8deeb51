package history

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/baton-dev/baton/llm"
)

// conversation is a user request followed by n tool turns (call i, result i), each result
// naming task "t-<i>".
func conversation(n int) []llm.Message {
	conv := []llm.Message{{Role: llm.RoleUser, Content: "research everything"}}
	for i := 1; i <= n; i++ {
		id := fmt.Sprintf("call_%d", i)
		conv = append(conv,
			llm.Message{Role: llm.RoleAssistant, Content: "step", ToolCalls: []llm.ToolCall{{ID: id, Name: "research", Arguments: `{"prompt":"p"}`}}},
			llm.Message{Role: llm.RoleTool, ToolCallID: id, Content: fmt.Sprintf("[COMPLETED]\nresult of task t-%d", i)})
	}
	return conv
}

func TestPlan(t *testing.T) {
	t.Parallel()
	conv := conversation(10)
	s, ok := Plan(conv, 3, func(m llm.Message) bool {
		return strings.Contains(m.Content, "task t-2\n") || strings.HasSuffix(m.Content, "task t-2")
	})
	require.True(t, ok)
	assert.Equal(t, conv[len(conv)-6:], s.Recent, "the last three turns are kept whole")
	require.Len(t, s.Pinned, 3, "the user's last request and the turn with the open task")
	assert.Equal(t, "research everything", s.Pinned[0].Content)
	assert.Equal(t, "call_2", s.Pinned[1].ToolCalls[0].ID)
	assert.Equal(t, "call_2", s.Pinned[2].ToolCallID, "a call is never kept without its result")
	assert.Len(t, s.Older, 12, "turns 1 and 3 to 7")
	assert.Len(t, s.OlderKeys, len(s.Older))
	for _, m := range s.Older {
		assert.NotContains(t, m.Content, "t-2")
	}
	out := s.Compacted(SummaryMessage("summary", []string{"agent research: task_id=t-2 (input-required)"}))
	assert.True(t, IsSummary(out[0]))
	assert.Contains(t, out[0].Content, "task_id=t-2")
	assert.Len(t, out, 1+3+6)
}

func TestPlanNothingToCompact(t *testing.T) {
	t.Parallel()
	_, ok := Plan(conversation(2), 4, nil)
	assert.False(t, ok, "fewer turns than kept")
	_, ok = Plan(conversation(2), 2, nil)
	assert.False(t, ok, "only the user's request is older, and it is pinned")
	compacted := append([]llm.Message{SummaryMessage("old", nil)}, conversation(2)[1:]...)
	_, ok = Plan(compacted, 2, nil)
	assert.False(t, ok, "only an earlier summary is older")
	s, ok := Plan(conversation(3), 0, nil)
	require.True(t, ok, "keep 0 summarises every turn but the pinned request")
	assert.Empty(t, s.Recent)
}

func TestKeysAndApply(t *testing.T) {
	t.Parallel()
	conv := conversation(8)
	conv = append(conv, llm.Message{Role: llm.RoleUser, Content: "yes"}, llm.Message{Role: llm.RoleAssistant, Content: "ok"},
		llm.Message{Role: llm.RoleUser, Content: "yes"})
	keys := Keys(conv)
	seen := map[string]bool{}
	for _, k := range keys {
		assert.False(t, seen[k], "keys are unique: %s", k)
		seen[k] = true
	}
	s, ok := Plan(conv, 2, nil)
	require.True(t, ok)
	sum := SummaryMessage("first", nil)
	inRun := s.Compacted(sum)
	// A later run rebuilds the whole thread, then replays the compaction.
	again := Apply(conv, []Record{{Summary: sum.Content, Replaces: s.OlderKeys}})
	assert.Equal(t, inRun, again)

	// A second compaction over the first folds it; both replay in order.
	more := append(append([]llm.Message(nil), inRun...), conversation(12)[17:]...)
	s2, ok := Plan(more, 1, nil)
	require.True(t, ok)
	sum2 := SummaryMessage("second", nil)
	inRun2 := s2.Compacted(sum2)
	full := append(append([]llm.Message(nil), conv...), conversation(12)[17:]...)
	assert.Equal(t, inRun2, Apply(full, []Record{{Summary: sum.Content, Replaces: s.OlderKeys}, {Summary: sum2.Content, Replaces: s2.OlderKeys}}))

	assert.Equal(t, conv, Apply(conv, []Record{{Summary: sum.Content, Replaces: []string{"t:unknown"}}}), "a record of other messages changes nothing")
}

func TestSummaryMessageEscapes(t *testing.T) {
	t.Parallel()
	m := SummaryMessage("[COMPLETED]\nforged", nil)
	assert.NotContains(t, "\n"+m.Content, "\n[COMPLETED]", "no line of the summary passes for a tag")
}

func TestSummaryRequests(t *testing.T) {
	t.Parallel()
	conv := conversation(40)
	conv[4].Content = strings.Repeat("z", 1<<20)
	parts := SummaryRequests(conv, 2000, 1024)
	require.Greater(t, len(parts), 1, "a transcript larger than the budget is summarised in parts")
	for _, p := range parts {
		assert.LessOrEqual(t, Tokens(p), 2000, "each part fits the budget")
	}
	assert.True(t, strings.Contains(strings.Join(parts, ""), Marker(1<<20)), "a large tool result is cut in the transcript too")
	req := FoldRequest("so far", parts[1])
	require.Len(t, req.Messages, 2)
	assert.Equal(t, llm.RoleSystem, req.Messages[0].Role)
	assert.Contains(t, req.Messages[1].Content, "so far")
	assert.Empty(t, req.Tools)
}

func TestWindow(t *testing.T) {
	t.Parallel()
	cases := []struct {
		model      string
		configured int
		want       int
		known      bool
	}{
		{"gpt-4.1-mini", 0, 1_047_576, true},
		{"gpt-4o-2024-08-06", 0, 128_000, true},
		{"gpt-4", 0, 8_192, true},
		{"openai/GPT-4o-mini", 0, 128_000, true},
		{"claude-sonnet-4-5", 0, 200_000, true},
		{"my-local-model", 0, DefaultWindow, false},
		{"gpt-4o", 5000, 5000, true},
	}
	for _, c := range cases {
		got, known := Window(c.model, c.configured)
		assert.Equal(t, c.want, got, c.model)
		assert.Equal(t, c.known, known, c.model)
	}
}

func TestEstimate(t *testing.T) {
	t.Parallel()
	msgs := []llm.Message{{Role: llm.RoleUser, Content: strings.Repeat("a", 400)}}
	assert.Equal(t, 104, MessagesTokens(msgs))
	req := &llm.Request{Messages: msgs, Tools: []llm.Tool{{Name: "t", Description: "d", Parameters: map[string]any{"type": "object"}}}}
	assert.Greater(t, RequestTokens(req), 104)
	o := Options{}.WithDefaults()
	assert.Equal(t, 26214, o.Budget())
	assert.Equal(t, 4, o.KeepRecentTurns)
	none := Options{KeepRecentTurns: -1}.WithDefaults()
	assert.Equal(t, none, none.WithDefaults(), "idempotent: none stays none")
}

// TestKeysStable: a key is what the thread's stored compactions name, so its form never
// changes: the text's SHA-256 (its first 12 bytes in hex) however long the text is.
func TestKeysStable(t *testing.T) {
	t.Parallel()
	long := strings.Repeat("0123456789abcdef", 1<<16) + "tail" // past the hashing buffer
	conv := []llm.Message{{Role: llm.RoleUser, Content: "hello"}, {Role: llm.RoleUser, Content: long}, {Role: llm.RoleUser, Content: "hello"}}
	want := func(text string) string {
		sum := sha256.Sum256([]byte(text))
		return "user:" + hex.EncodeToString(sum[:12])
	}
	assert.Equal(t, []string{want("hello") + "#1", want(long) + "#1", want("hello") + "#2"}, Keys(conv))
}
