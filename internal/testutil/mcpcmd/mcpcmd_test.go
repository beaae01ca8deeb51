package mcpcmd

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func testCommand() Command {
	return Command{Name: "testmcp", HTTPUsage: "[--listen ADDR]", Server: func(*EventLog) *mcp.Server {
		return mcp.NewServer(&mcp.Implementation{Name: "testmcp", Version: "0.0.1"}, nil)
	}}
}

func TestRunRejectsBadCommandLines(t *testing.T) {
	t.Parallel()
	log := filepath.Join(t.TempDir(), "events.log")
	assert.ErrorIs(t, testCommand().Run(nil), ErrUsage, "no --log")
	assert.ErrorIs(t, testCommand().Run([]string{"--log", log}), ErrUsage, "no mode")
	err := testCommand().Run([]string{"--log", log, "carrier-pigeon"})
	require.Error(t, err)
	assert.Contains(t, err.Error(), `unknown mode "carrier-pigeon"`)
}

func TestEventLogAppendsLines(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "events.log")
	l := &EventLog{Path: path, Name: "testmcp"}
	l.Add("start 1")
	l.Add("call echo")
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	assert.Equal(t, "start 1\ncall echo\n", string(b))
}
