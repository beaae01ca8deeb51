package main

import (
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestDemoThreadsSurviveRestart: the demo keeps its threads in SQLite under ./data, as a
// configured Baton does by default, so that a chat saved before a restart (its link names
// the thread) still opens with its messages after it.
func TestDemoThreadsSurviveRestart(t *testing.T) {
	t.Chdir(t.TempDir())
	t.Setenv("BATON_LISTEN", "127.0.0.1:0")
	t.Setenv("BATON_STORE", "") // the demo's own default

	url, _, done := startRun(t, nil)
	req, err := http.NewRequest(http.MethodPost, url+"/agui", strings.NewReader(
		`{"threadId":"saved","runId":"r1","protocolVersion":"1.0","messages":[{"id":"u1","role":"user","content":"research Go generics"}]}`))
	require.NoError(t, err)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	stream, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	require.NoError(t, err)
	require.Contains(t, string(stream), `"type":"RUN_FINISHED"`)
	require.NoError(t, syscall.Kill(os.Getpid(), syscall.SIGTERM))
	require.Equal(t, 0, <-done)

	info, err := os.Stat(filepath.Join("data", "baton.db"))
	require.NoError(t, err, "the demo's threads are in ./data/baton.db")
	assert.Positive(t, info.Size())

	url, _, done = startRun(t, nil)
	defer func() {
		require.NoError(t, syscall.Kill(os.Getpid(), syscall.SIGTERM))
		<-done
	}()
	code, thread := getJSON(t, url+"/agui/threads/saved")
	require.Equal(t, http.StatusOK, code, "%v", thread)
	msgs, _ := thread["messages"].([]any)
	require.NotEmpty(t, msgs, "the thread's messages came back after the restart")
	first, _ := msgs[0].(map[string]any)
	assert.Equal(t, "research Go generics", first["content"])
	assert.GreaterOrEqual(t, len(msgs), 2, "the answer came back too: %v", msgs)
}

// TestStoreWhereHidesDSN: the demo's start line says where threads are kept without
// printing a PostgreSQL DSN, which may hold a password.
func TestStoreWhereHidesDSN(t *testing.T) {
	t.Parallel()
	assert.Equal(t, "./data/baton.db", storeWhere("sqlite:./data/baton.db"))
	assert.Contains(t, storeWhere("memory:"), "forgotten")
	assert.Equal(t, "PostgreSQL", storeWhere("postgres://u:secret@db/baton"))
}
