package durable

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/baton-dev/baton/agui"
)

// TestCompactionIsKeptMarked: a compaction's ACTIVITY_SNAPSHOT becomes one activity
// message of the thread, marked by its activityType, beside the messages it summarised;
// other activities (progress) and sub-agents' are not the thread's.
func TestCompactionIsKeptMarked(t *testing.T) {
	t.Parallel()
	var b messageBuilder
	b.add(&agui.TextMessageStart{MessageID: "m1", Role: "assistant"})
	b.add(&agui.TextMessageContent{MessageID: "m1", Delta: "hello"})
	b.add(&agui.ActivitySnapshot{MessageID: "c1", ActivityType: "compaction", Content: map[string]any{"summary": "S", "replaces": []string{"u:1"}}})
	b.add(&agui.ActivitySnapshot{MessageID: "p1", ActivityType: "progress", Content: map[string]any{"progress": 1}})
	b.add(&agui.ActivitySnapshot{MessageID: "c2", ActivityType: "compaction", SubagentRunID: "sub", Content: map[string]any{"summary": "x"}})
	msgs := b.build()
	require.Len(t, msgs, 2)
	var m agui.Message
	require.NoError(t, json.Unmarshal(msgs[1].Data, &m))
	assert.Equal(t, "c1", m.ID)
	assert.Equal(t, agui.RoleActivity, m.Role)
	assert.Equal(t, "compaction", m.ActivityType)
	assert.JSONEq(t, `{"summary":"S","replaces":["u:1"]}`, string(m.Content))
}

// TestBuiltTextIsEncodedAsJoined: a message's text, encoded from its deltas into the
// stored message, is byte for byte what encoding the message with the joined text gives,
// also where deltas cut a rune in two, hold invalid bytes or characters JSON escapes.
func TestBuiltTextIsEncodedAsJoined(t *testing.T) {
	t.Parallel()
	cases := [][]string{
		{"hello", " world"},
		{"a<b>&c", "\u2028\u2029", "\"quoted\"\\\n\t"},
		{"caf\xc3", "\xa9", " \xe2\x82", "\xac", "\xf0\x9f", "\x98\x80", "!"},
		{"\xe2\x80", "a", "\xff\xfe", "\x80\x80", "end\xf0\x9f\x98"},
		{"\xf0", "\x9f", "\x98", "\x80"},
		{"\xe2"},
	}
	for _, parts := range cases {
		var b messageBuilder
		b.add(&agui.TextMessageStart{MessageID: "m<1>", Role: "assistant"})
		for _, p := range parts {
			b.add(&agui.TextMessageContent{MessageID: "m<1>", Delta: p})
		}
		b.add(&agui.ToolCallStart{ToolCallID: "c1", ToolCallName: "t", ParentMessageID: "m<1>"})
		b.add(&agui.ToolCallArgs{ToolCallID: "c1", Delta: `{"content":""}`})
		msgs := b.build()
		require.Len(t, msgs, 1)
		joined := ""
		for _, p := range parts {
			joined += p
		}
		content, err := json.Marshal(joined)
		require.NoError(t, err)
		want, err := json.Marshal(&agui.Message{ID: "m<1>", Role: "assistant", Content: content,
			ToolCalls: []agui.ToolCall{{ID: "c1", Type: "function", Function: agui.FunctionCall{Name: "t", Arguments: `{"content":""}`}}}})
		require.NoError(t, err)
		assert.Equal(t, string(want), string(msgs[0].Data), "%q", parts)
	}
}
