package mcpclient

import (
	"context"
	"encoding/json"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/baton-dev/baton/internal/testutil"
)

// A server that never answers initialize does not hold New: with StartWait, New returns
// while the first attempt is still running, and the server's tools answer [UNREACHABLE].
func TestMCPStartWaitDoesNotBlock(t *testing.T) {
	leakCheck(t)
	// sleep never reads the initialize request, let alone answers it.
	r := newRegistry(t, []ServerConfig{{Name: "mute", Command: []string{"sleep", "300"}}, demoStdio()}, Options{StartWait: 1})
	st := r.Status()
	require.Len(t, st, 2)
	assert.False(t, st[0].Connected)
	assert.Empty(t, st[0].LastError, "the first attempt is still running: New did not wait for it")
	res, err := r.Call(context.Background(), "mute__anything", json.RawMessage(`{}`), CallOptions{})
	require.NoError(t, err)
	assert.Equal(t, Result{Status: StatusUnreachable, Tool: "mute__anything", Server: "mute", ToolName: "anything", Message: "The server is not connected."}, res)
	// The other server still connects in the background and offers its tools.
	require.Eventually(t, func() bool { return r.Status()[1].Connected }, 30*time.Second, 20*time.Millisecond)
}

// A stdio server that fails to start gets its first stderr lines logged at warn, where
// the cause is (here: what npx prints for a package that does not exist).
func TestMCPStdioStartFailureLogsStderr(t *testing.T) {
	leakCheck(t)
	var logs testutil.SyncBuffer
	log := slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelWarn}))
	script := `echo "npm error 404 Not Found - GET https://registry.npmjs.org/mcp-server-everything" >&2; ` +
		`echo "npm error 404 'mcp-server-everything@*' is not in this registry." >&2; exit 1`
	r := newRegistry(t, []ServerConfig{{Name: "broken", Command: []string{"sh", "-c", script}}}, Options{Logger: log})
	assert.False(t, r.Status()[0].Connected)
	out := logs.String()
	assert.Contains(t, out, "level=WARN msg=\"mcp server failed to start")
	assert.Contains(t, out, "is not in this registry")
	assert.Contains(t, out, "npm error 404 Not Found")
}

// The env of a stdio server never reaches the log, even at debug level.
func TestMCPStdioEnvNotLogged(t *testing.T) {
	leakCheck(t)
	var logs testutil.SyncBuffer
	log := slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	fe := newFaultEnv(t)
	cfg := fe.server("f")
	cfg.Env["SERVICE_TOKEN"] = "tok-ABCDEF-123"
	r := newRegistry(t, []ServerConfig{cfg}, Options{Logger: log})
	out := mustCall(t, r, "f__getenv", `{"text":"SERVICE_TOKEN"}`)
	assert.Contains(t, out, "value=tok-ABCDEF-123", "the child got it")
	require.NoError(t, r.Close())
	assert.NotEmpty(t, logs.String())
	assert.False(t, strings.Contains(logs.String(), "tok-ABCDEF-123"), "the value was logged")
}
