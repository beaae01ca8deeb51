package integration

import (
	"encoding/base64"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// startFilesPeer starts peers/a2a-files-peer.mjs, an A2A JS SDK agent that answers with file
// artifacts, and returns its base URL.
func startFilesPeer(t testing.TB) string {
	t.Helper()
	dir := requirePeers(t)
	node, _ := requireNode(t)
	var err error
	for attempt := 0; attempt < 3; attempt++ { // freePort can race with another listener
		var p *proc
		p, err = startProcErr(t, "a2a-files-peer", []string{node, filepath.Join(dir, "a2a-files-peer.mjs")},
			[]string{"PORT=" + strconv.Itoa(freePort(t))}, readyOnLine(`a2a files peer on (http://\S+)`))
		if err == nil {
			return p.Match[1]
		}
	}
	t.Fatal(err)
	return ""
}

// TestMCPServerFileArtifacts: an agent tool whose A2A task completes with file artifacts
// answers the official TypeScript client with them: an inline file as an embedded
// resource (text for a text/* type, a base64 blob otherwise), a file given by URL as a
// resource_link, and a file above the 1 MiB bound as a text item naming it and its size.
func TestMCPServerFileArtifacts(t *testing.T) {
	t.Parallel()
	peer := startFilesPeer(t)
	llm := startFakeLLM(t)
	cfg := testConfig{LLMURL: llm.URL, Agents: []agentEntry{{Name: "files", URL: peer}}}.yaml() +
		"mcp_server:\n  enabled: true\n"
	url := startCoordinator(t, cfg) + "/mcp"
	rep := runMCPClient(t, map[string]any{"url": url, "steps": []map[string]any{
		{"op": "call", "tool": "files", "args": map[string]any{"prompt": "files please"}},
		{"op": "call", "tool": "files", "args": map[string]any{"prompt": "link please"}},
		{"op": "call", "tool": "files", "args": map[string]any{"prompt": "bigfile please"}},
	}})
	s := rep.Steps

	require.Nil(t, s[0].Error, "%+v", s[0].Error)
	require.False(t, s[0].Result.IsError, s[0].text())
	c := s[0].Result.Content
	require.Len(t, c, 3, "the text, then one embedded resource per file: %+v", c)
	assert.Equal(t, "text", c[0].Type)
	assert.True(t, strings.HasPrefix(c[0].Text, "here are the files"), c[0].Text)
	require.Equal(t, "resource", c[1].Type)
	require.NotNil(t, c[1].Resource)
	assert.Equal(t, "text/plain", c[1].Resource.MimeType)
	assert.Equal(t, "hello from the file", c[1].Resource.Text)
	assert.True(t, strings.HasSuffix(c[1].Resource.URI, "/report.txt"), c[1].Resource.URI)
	require.Equal(t, "resource", c[2].Type)
	require.NotNil(t, c[2].Resource)
	assert.Equal(t, "application/octet-stream", c[2].Resource.MimeType)
	blob, err := base64.StdEncoding.DecodeString(c[2].Resource.Blob)
	require.NoError(t, err)
	require.Len(t, blob, 256)
	for i, b := range blob {
		require.Equal(t, byte(i), b, "byte %d", i)
	}

	require.Nil(t, s[1].Error, "%+v", s[1].Error)
	require.False(t, s[1].Result.IsError, s[1].text())
	c = s[1].Result.Content
	require.Len(t, c, 2, "%+v", c)
	assert.Equal(t, "resource_link", c[1].Type)
	assert.Equal(t, "https://example.com/big.pdf", c[1].URI)
	assert.Equal(t, "big.pdf", c[1].Name)
	assert.Equal(t, "application/pdf", c[1].MimeType)

	require.Nil(t, s[2].Error, "%+v", s[2].Error)
	require.False(t, s[2].Result.IsError, s[2].text())
	c = s[2].Result.Content
	require.Len(t, c, 2, "%+v", c)
	assert.Equal(t, "text", c[1].Type, "a file above the bound is named, not embedded")
	assert.Contains(t, c[1].Text, "big.bin")
	assert.Contains(t, c[1].Text, strconv.Itoa(1<<20+1)+" bytes")
	assert.Empty(t, llm.Requests(), "the agent tool never calls the model")
}
