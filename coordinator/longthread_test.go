package coordinator

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
)

// TestThreadTitleOfLongMessage: the title of a thread whose first message is megabytes
// long is its start, words joined and cut to maxTitleRunes, as for a short one.
func TestThreadTitleOfLongMessage(t *testing.T) {
	t.Parallel()
	in := input("title")
	in.Messages[0].Content, _ = json.Marshal("  plan   the\ttrip " + strings.Repeat("é", 1<<20))
	title := threadTitle(in)
	assert.Equal(t, "plan the trip "+strings.Repeat("é", maxTitleRunes-len("plan the trip ")-1)+"…", title)
	in.Messages[0].Content, _ = json.Marshal(strings.Repeat("word ", 1<<18))
	assert.Equal(t, maxTitleRunes, len([]rune(threadTitle(in))))
}
