package mcpserver

import (
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/baton-dev/baton/agui"
)

func TestFileContentBoundsWhatItEmbeds(t *testing.T) {
	t.Parallel()
	big := make([]byte, maxEmbeddedBytes-10)
	fs := files{ToolCallID: "c1", Agent: "a b", TaskID: "t1", Omitted: 2, Files: []file{
		{Name: "big.bin", MediaType: "application/octet-stream", ArtifactID: "x", Bytes: big, Size: int64(len(big))},
		{Name: "small.txt", MediaType: "text/plain", ArtifactID: "x", Bytes: []byte("0123456789ab"), Size: 12},
		{Name: "", MediaType: "text/plain", ArtifactID: "x", Bytes: []byte("hi"), Size: 2},
		{Name: "gone.bin", Size: 5 << 20},
		{Name: "doc.pdf", MediaType: "application/pdf", URI: "https://example.com/doc.pdf"},
	}}
	out := fileContent(fs)
	require.Len(t, out, 6)
	res, ok := out[0].(*mcp.EmbeddedResource)
	require.True(t, ok)
	assert.Len(t, res.Resource.Blob, len(big))
	assert.Equal(t, "a2a://a%20b/tasks/t1/artifacts/x/big.bin", res.Resource.URI)
	txt, ok := out[1].(*mcp.TextContent)
	require.True(t, ok, "the second file no longer fits in the bound: %T", out[1])
	assert.Contains(t, txt.Text, "small.txt (text/plain), 12 bytes")
	res, ok = out[2].(*mcp.EmbeddedResource)
	require.True(t, ok, "a smaller one still fits: %T", out[2])
	assert.Equal(t, "hi", res.Resource.Text)
	assert.True(t, strings.HasSuffix(res.Resource.URI, "/file-3"), res.Resource.URI)
	txt, ok = out[3].(*mcp.TextContent)
	require.True(t, ok)
	assert.Contains(t, txt.Text, "gone.bin (unknown type), 5242880 bytes")
	link, ok := out[4].(*mcp.ResourceLink)
	require.True(t, ok)
	assert.Equal(t, "https://example.com/doc.pdf", link.URI)
	txt, ok = out[5].(*mcp.TextContent)
	require.True(t, ok)
	assert.Equal(t, "[2 more files not included]", txt.Text)
}

func TestRelayAttachesFilesToTheirResultOnly(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name  string
		call  string
		files int
	}{{"same call", "c1", 1}, {"another call", "c2", 0}} {
		r := newRelay()
		r.event(customFiles(files{ToolCallID: "c1", Agent: "a", Files: []file{{Name: "f", URI: "https://x/f"}}}))
		r.event(toolResult(tc.call, "[COMPLETED]\nok"))
		res := r.outcome().result(tool{name: "a", agent: "a"})
		assert.Len(t, res.Content, 1+tc.files, tc.name)
	}
}

func customFiles(fs files) agui.Event { return &agui.Custom{Name: eventFiles, Value: fs} }

func toolResult(callID, content string) agui.Event {
	return &agui.ToolCallResult{ToolCallID: callID, Content: content}
}
