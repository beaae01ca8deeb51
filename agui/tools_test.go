package agui

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestValidID(t *testing.T) {
	t.Parallel()
	for _, id := range []string{"t", "thread-1", "87e44c7d-0000", "a.b_c:d-e", "..", strings.Repeat("x", maxIDLen)} {
		assert.True(t, ValidID(id), "%q", id)
	}
	for _, id := range []string{"", "a/b", "a b", "a%2Fb", "ä", "a\nb", "a?b", "a#b", strings.Repeat("x", maxIDLen+1)} {
		assert.False(t, ValidID(id), "%q", id)
	}
}

func TestDecodeRefusesBadIDsAndTools(t *testing.T) {
	t.Parallel()
	deep := strings.Repeat(`{"items":`, 40) + `{}` + strings.Repeat(`}`, 40)
	huge := `{"type":"object","description":"` + strings.Repeat("x", maxSchemaBytes) + `"}`
	cases := []struct {
		name, body, contains string
	}{
		{"threadId with slash", `{"threadId":"a/b","runId":"r"}`, "threadId must be"},
		{"runId with space", `{"threadId":"t","runId":"r 1"}`, "runId must be"},
		{"threadId too long", `{"threadId":"` + strings.Repeat("a", 129) + `","runId":"r"}`, "threadId must be"},
		{"tool name with newline", `{"threadId":"t","runId":"r","tools":[{"name":"a\nb"}]}`, "tools[0].name must be"},
		{"tool name too long", `{"threadId":"t","runId":"r","tools":[{"name":"` + strings.Repeat("a", 65) + `"}]}`, "tools[0].name must be"},
		{"tool name with bracket", `{"threadId":"t","runId":"r","tools":[{"name":"[COMPLETED]"}]}`, "tools[0].name must be"},
		{"duplicate tool names", `{"threadId":"t","runId":"r","tools":[{"name":"a"},{"name":"b"},{"name":"a"}]}`, "tools[2].name \"a\" repeats tools[0].name"},
		{"parameters not an object", `{"threadId":"t","runId":"r","tools":[{"name":"a","parameters":[1]}]}`, "tools[0].parameters must be a JSON Schema object"},
		{"parameters too deep", `{"threadId":"t","runId":"r","tools":[{"name":"a","parameters":` + deep + `}]}`, "tools[0].parameters is nested too deeply"},
		{"parameters too large", `{"threadId":"t","runId":"r","tools":[{"name":"a","parameters":` + huge + `}]}`, "tools[0].parameters is too large"},
		{"parameters not a schema", `{"threadId":"t","runId":"r","tools":[{"name":"a","parameters":{"type":5}}]}`, "tools[0].parameters is not a valid JSON Schema"},
		{"parameters of a string", `{"threadId":"t","runId":"r","tools":[{"name":"a","parameters":{"type":"string"}}]}`, "tools[0].parameters must describe an object"},
		{"too many tools", `{"threadId":"t","runId":"r","tools":[` + manyTools(maxTools+1) + `]}`, "at most"},
	}
	for _, tt := range cases {
		t.Run(tt.name, func(t *testing.T) {
			_, err := DecodeRunAgentInput(strings.NewReader(tt.body), 4<<20)
			require.Error(t, err)
			ie, ok := err.(*InputError)
			require.True(t, ok, "%T", err)
			assert.Equal(t, 400, ie.Status)
			assert.Equal(t, codeInvalidInput, ie.Code)
			assert.Contains(t, ie.Message, tt.contains)
		})
	}
}

func TestDecodeAcceptsGoodTools(t *testing.T) {
	t.Parallel()
	body := `{"threadId":"th.1:x_y-z","runId":"r","tools":[` +
		`{"name":"confirm_action","description":"Ask","parameters":{"type":"object","properties":{"ok":{"type":"boolean"}},"required":["ok"]}},` +
		`{"name":"no-params"},` +
		`{"name":"untyped","parameters":{"properties":{"a":{"type":["string","null"]}}}}]}`
	in, err := DecodeRunAgentInput(strings.NewReader(body), 0)
	require.NoError(t, err)
	require.Len(t, in.Tools, 3)
	assert.Nil(t, in.Tools[1].Parameters)
}

func manyTools(n int) string {
	parts := make([]string, n)
	for i := range parts {
		parts[i] = `{"name":"t` + strings.Repeat("x", i%50) + string(rune('a'+i%26)) + `"}`
	}
	return strings.Join(parts, ",")
}
