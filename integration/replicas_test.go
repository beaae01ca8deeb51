package integration

// Two coordinator processes on one PostgreSQL database: a busy thread is busy on
// both, a stop through the replica that does not stream the run reaches the one that does
// (and the JS peer records CancelTask), and the run's events replay through either. A
// replica killed mid-delegation: takeover_test.go.

import (
	"bufio"
	"encoding/json"
	"io"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/baton-dev/baton/internal/testutil/pgtest"
)

func TestReplicasOnPostgres(t *testing.T) {
	t.Parallel()
	requirePeers(t)
	dsn := pgtest.DSN(t)
	peer := startA2APeerEnv(t)
	model := startFakeLLM(t)
	cfg := testConfig{LLMURL: model.URL, Agents: []agentEntry{{Name: "peer", URL: peer}}, Store: dsn}.yaml()
	a := startCoordinator(t, cfg)
	b := startCoordinator(t, cfg)

	thread := newThreadID("replicas")
	body := `{"threadId":"` + thread + `","runId":"r1","protocolVersion":"1.0","messages":[{"id":"u1","role":"user","content":"peer: slow work"}]}`
	live := postJSON(t, a+"/agui", body)
	defer live.Body.Close()
	require.Equal(t, http.StatusOK, live.StatusCode)

	// Read until the sub-agent has streamed progress: its task exists at the peer.
	sc := bufio.NewScanner(live.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	var seen []string
	for sc.Scan() {
		data, ok := strings.CutPrefix(sc.Text(), "data: ")
		if !ok {
			continue
		}
		var ev map[string]any
		require.NoError(t, json.Unmarshal([]byte(data), &ev))
		typ, _ := ev["type"].(string)
		seen = append(seen, typ)
		if typ == "TEXT_MESSAGE_CONTENT" && ev["subagentRunId"] != nil {
			break
		}
	}
	require.Contains(t, seen, "SUBAGENT_STARTED", "events: %v", seen)

	busy := postJSON(t, b+"/agui", strings.Replace(body, `"r1"`, `"r2"`, 1))
	assert.Equal(t, http.StatusConflict, busy.StatusCode, "the thread is busy on the other replica too")
	busy.Body.Close()

	var doc struct {
		Run *struct {
			RunID  string `json:"runId"`
			Status string `json:"status"`
		} `json:"run"`
	}
	resp, err := http.Get(b + "/agui/threads/" + thread)
	require.NoError(t, err)
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&doc))
	resp.Body.Close()
	require.NotNil(t, doc.Run, "the other replica sees the running run")
	assert.Equal(t, "r1", doc.Run.RunID)

	stop := postJSON(t, b+"/agui/threads/"+thread+"/runs/r1/stop", "{}")
	assert.Equal(t, http.StatusAccepted, stop.StatusCode)
	stop.Body.Close()

	// The stream on A ends with the cancelled outcome.
	var last map[string]any
	for sc.Scan() {
		if data, ok := strings.CutPrefix(sc.Text(), "data: "); ok {
			last = nil
			require.NoError(t, json.Unmarshal([]byte(data), &last))
		}
	}
	require.NotNil(t, last)
	assert.Equal(t, "RUN_FINISHED", last["type"])
	assert.Equal(t, map[string]any{"type": "cancelled"}, last["outcome"])

	// The peer got CancelTask (the cancellation runs beside the stream's end: wait for it,
	// bounded).
	deadline := time.Now().Add(15 * time.Second)
	for {
		cancels, _ := peerLog(t, peer)
		if len(cancels) > 0 {
			break
		}
		require.True(t, time.Now().Before(deadline), "the peer never received CancelTask")
		time.Sleep(50 * time.Millisecond)
	}

	// The whole run replays through the other replica, ending with the same terminal event.
	replay, err := http.Get(b + "/agui/threads/" + thread + "/runs/r1/events")
	require.NoError(t, err)
	raw, err := io.ReadAll(replay.Body)
	replay.Body.Close()
	require.NoError(t, err)
	var types []string
	for line := range strings.SplitSeq(string(raw), "\n") {
		if data, ok := strings.CutPrefix(line, "data: "); ok {
			var ev map[string]any
			require.NoError(t, json.Unmarshal([]byte(data), &ev))
			types = append(types, ev["type"].(string))
		}
	}
	require.NotEmpty(t, types)
	assert.Equal(t, "RUN_STARTED", types[0])
	assert.Equal(t, "RUN_FINISHED", types[len(types)-1])
	assert.True(t, slices.Contains(types, "SUBAGENT_STARTED"))

	// The thread is free on both replicas.
	next := postJSON(t, b+"/agui", strings.Replace(strings.Replace(body, `"r1"`, `"r3"`, 1), "peer: slow work", "peer: complete it", 1))
	assert.Equal(t, http.StatusOK, next.StatusCode)
	_, _ = io.Copy(io.Discard, next.Body)
	next.Body.Close()
}

func postJSON(t *testing.T, url, body string) *http.Response {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, url, strings.NewReader(body))
	require.NoError(t, err)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	return resp
}
