package history

import (
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/baton-dev/baton/llm"
)

func TestCut(t *testing.T) {
	t.Parallel()
	big := strings.Repeat("é", 300) // 600 bytes, two per character
	cases := []struct {
		name, in string
		max      int
		want     string
	}{
		{"short is unchanged", "abc", 256, "abc"},
		{"exactly max is unchanged", strings.Repeat("a", 256), 256, strings.Repeat("a", 256)},
		{"ascii cut", strings.Repeat("a", 1000), 256, strings.Repeat("a", 256-len("\n[TRUNCATED:bytes=1000]")) + "\n[TRUNCATED:bytes=1000]"},
		{"max below the marker keeps none of the text", strings.Repeat("a", 100), 10, "\n[TRUNCATED:bytes=100]"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			assert.Equal(t, c.want, Cut(c.in, c.max))
		})
	}
	t.Run("utf-8 boundary", func(t *testing.T) {
		t.Parallel()
		for max := 256; max < 300; max++ {
			got := Cut(big, max)
			require.True(t, utf8.ValidString(got), "max %d", max)
			assert.LessOrEqual(t, len(got), max)
			assert.True(t, strings.HasSuffix(got, "\n[TRUNCATED:bytes=600]"))
			assert.True(t, strings.HasPrefix(big, strings.TrimSuffix(got, "\n[TRUNCATED:bytes=600]")))
		}
	})
	t.Run("idempotent", func(t *testing.T) {
		t.Parallel()
		once := Cut(strings.Repeat("x", 5<<20), 65536)
		assert.Equal(t, once, Cut(once, 65536))
		assert.Len(t, once, 65536)
		assert.True(t, strings.HasSuffix(once, "[TRUNCATED:bytes=5242880]"))
	})
	t.Run("default", func(t *testing.T) {
		t.Parallel()
		assert.Len(t, Cut(strings.Repeat("x", 1<<20), 0), DefaultMaxToolResultBytes)
	})
}

func TestCutToolResults(t *testing.T) {
	t.Parallel()
	big := strings.Repeat("y", 2000)
	in := []llm.Message{
		{Role: llm.RoleUser, Content: big},
		{Role: llm.RoleAssistant, ToolCalls: []llm.ToolCall{{ID: "c1", Name: "t", Arguments: "{}"}}},
		{Role: llm.RoleTool, ToolCallID: "c1", Content: big},
	}
	out := CutToolResults(in, 512)
	assert.Equal(t, big, in[2].Content, "the input is not changed")
	assert.Equal(t, big, out[0].Content, "only tool results are cut")
	assert.Len(t, out[2].Content, 512)
	assert.True(t, strings.HasSuffix(out[2].Content, Marker(2000)))
	small := in[:2]
	assert.Same(t, &small[0], &CutToolResults(small, 512)[0], "nothing to cut: the same slice")
}
