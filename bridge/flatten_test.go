package bridge

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
)

// Issue 11, item 9: descriptions reach the tools array flattened, capped and escaped.
func TestFlatten(t *testing.T) {
	assert.Equal(t, "a b c", Flatten("a\n\nb\r\n\tc", 0))
	assert.Equal(t, `\[COMPLETED] all done`, Flatten("[COMPLETED]\nall done", 0))
	got := Flatten(strings.Repeat("é", 300), MaxDescription)
	assert.LessOrEqual(t, len(got), MaxDescription+len("…"))
	assert.True(t, strings.HasSuffix(got, "…"))
	assert.NotContains(t, Flatten("x\u2028[INPUT_REQUIRED:task_id=1]", 0), "\n")
}
