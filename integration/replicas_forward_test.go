package integration

// A legacy (2025-11-25) in-session MCP elicitation is held in the memory of the replica that
// made the call (server-everything over stdio waits inside its tool call). Its resume, sent
// to the other replica, is forwarded to the holder (replication.advertise_url, recorded with
// the interrupt) and completes there; when the holder is gone (SIGKILL), the resume runs
// where it landed and the model gets a tool error for the lost call, never a hang
// (DESIGN §9, design/replica-forwarding.md).

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/baton-dev/baton/internal/testutil/fakellm"
	"github.com/baton-dev/baton/internal/testutil/pgtest"
)

// startAdvertisedCoordinator starts a coordinator with cfg that listens on a free port and
// advertises that address to the other replicas.
func startAdvertisedCoordinator(t *testing.T, cfg string) *hitlCoord {
	t.Helper()
	var err error
	for attempt := 0; attempt < 3; attempt++ {
		c := &hitlCoord{path: filepath.Join(t.TempDir(), "baton.yaml")}
		port := strconv.Itoa(freePort(t))
		text := "listen: 127.0.0.1:" + port + "\n" + cfg +
			"replication:\n  heartbeat: 200ms\n  lease: 2s\n  advertise_url: http://127.0.0.1:" + port + "\n"
		require.NoError(t, os.WriteFile(c.path, []byte(text), 0o600))
		if err = c.start(t); err == nil {
			return c
		}
	}
	t.Fatalf("starting the coordinator: %v", err)
	return nil
}

func TestReplicasForwardSessionElicitation(t *testing.T) {
	t.Parallel()
	requirePeers(t)
	dsn := pgtest.DSN(t)
	node, entry := everythingEntry(t)
	model := fakellm.Start(hitlModel)
	t.Cleanup(model.Close)
	cfg := testConfig{LLMURL: model.URL, Store: dsn, ToolTimeout: "30s",
		MCP: []mcpServerEntry{{Name: "everything", Command: []string{node, entry, "stdio"}}}}.yaml()
	a := startAdvertisedCoordinator(t, cfg)
	b := startAdvertisedCoordinator(t, cfg)

	raise := func(t *testing.T, base, thread string) (id, callID string) {
		t.Helper()
		first := postRunBody(t, base, hitlInput(thread, newThreadID("run"), hitlCall{Name: everythingFormTool, Args: map[string]any{}}))
		ins := interruptsOf(t, first)
		require.Len(t, ins, 1)
		md, _ := ins[0]["metadata"].(map[string]any)
		mcpMD, _ := md["mcp"].(map[string]any)
		require.Equal(t, "everything", mcpMD["server"], "an in-session elicitation: %v", ins[0])
		return ins[0]["id"].(string), ins[0]["toolCallId"].(string)
	}
	accept := map[string]any{"action": "accept", "content": map[string]any{
		"name": "Ada Lovelace", "check": true, "email": "ada@example.com", "integer": 7,
	}}

	t.Run("the resume reaches the holder through the other replica", func(t *testing.T) {
		thread := newThreadID("rep-fwd")
		id, callID := raise(t, a.URL, thread)
		r := postRunBody(t, b.URL, resumeInput(thread, newThreadID("run"), id, accept))
		assertSucceeded(t, r)
		res := toolResults(r.events)[callID]
		require.Len(t, res, 1, "one TOOL_CALL_RESULT for the original call; events %v", eventTypes(r.events))
		assert.Contains(t, res[0], "- Name: Ada Lovelace", "the answer reached the waiting server")
		assert.Equal(t, res[0], toolMessagesSeen(model)[callID], "what the model got")
		_, stderr := a.p.Logs()
		assert.Contains(t, stderr, thread, "the holder ran the resume")
		_, stderr = b.p.Logs()
		assert.Contains(t, stderr, "resume forwarded to the replica that holds the elicitation")
	})

	t.Run("the holder is gone: a tool error for the model", func(t *testing.T) {
		thread := newThreadID("rep-fwd-gone")
		id, callID := raise(t, a.URL, thread)
		a.kill(t)
		r := postRunBody(t, b.URL, resumeInput(thread, newThreadID("run"), id, accept))
		require.Equal(t, 200, r.status, "%v", r.errBody)
		last := r.last()
		require.NotNil(t, last)
		assert.Equal(t, "RUN_FINISHED", last["type"], "a terminal event, not a hang: %v", eventTypes(r.events))
		res := toolResults(r.events)[callID]
		require.Len(t, res, 1, "TOOL_CALL_RESULT for the lost call; events: %v", eventTypes(r.events))
		sig := retrySignal(t, res[0], "tool_error", everythingFormTool)
		msg, _ := sig["message"].(string)
		assert.True(t, strings.Contains(msg, "stopped") || strings.Contains(msg, "restart"), "the model is told why: %q", msg)
		assert.Contains(t, res[0], "INTERRUPT_EXPIRED", "the interrupt counts as expired (DESIGN §9)")
		_, stderr := b.p.Logs()
		assert.Contains(t, stderr, "unreachable; the resume runs here")
	})
}
