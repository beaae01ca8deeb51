package durable

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/baton-dev/baton/agui"
)

// TestThreadTitleOfLongMessage: the title of a thread whose first message is megabytes
// long is its start, words joined and cut to maxTitleRunes, as for a short one.
func TestThreadTitleOfLongMessage(t *testing.T) {
	t.Parallel()
	content, _ := json.Marshal("hello")
	in := &agui.RunAgentInput{ThreadID: "title", RunID: "r-title", ProtocolVersion: "1.0",
		Messages: []agui.Message{{ID: "u1", Role: "user", Content: content}}}
	in.Messages[0].Content, _ = json.Marshal("  plan   the\ttrip " + strings.Repeat("é", 1<<20))
	title := threadTitle(in)
	assert.Equal(t, "plan the trip "+strings.Repeat("é", maxTitleRunes-len("plan the trip ")-1)+"…", title)
	in.Messages[0].Content, _ = json.Marshal(strings.Repeat("word ", 1<<18))
	assert.Equal(t, maxTitleRunes, len([]rune(threadTitle(in))))
}
