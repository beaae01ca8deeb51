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
