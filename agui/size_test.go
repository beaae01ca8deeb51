package agui

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestSizeHint(t *testing.T) {
	t.Parallel()
	big := strings.Repeat("x", 10_000)
	// Text events count their text: what they hold while they wait.
	assert.GreaterOrEqual(t, SizeHint(&TextMessageContent{MessageID: "m", Delta: big}), len(big))
	assert.GreaterOrEqual(t, SizeHint(&ToolCallArgs{ToolCallID: "c", Delta: big}), len(big))
	assert.GreaterOrEqual(t, SizeHint(&ToolCallResult{MessageID: "m", ToolCallID: "c", Content: big}), len(big))
	assert.Equal(t, eventOverhead, SizeHint(&ToolCallEnd{ToolCallID: "c"}))
	// Free-form payloads and metadata are measured by encoding them.
	snap := &StateSnapshot{Snapshot: map[string]any{"k": big}}
	frame, err := appendFrame(nil, snap)
	assert.NoError(t, err)
	assert.Equal(t, len(frame), SizeHint(snap))
	withMeta := &ToolCallEnd{Base: Base{Metadata: map[string]any{"k": big}}, ToolCallID: "c"}
	assert.Greater(t, SizeHint(withMeta), len(big))
}
