package integration

// server.on_disconnect: detach (DESIGN §4, §10) through the coordinator binary and
// the @a2a-js/sdk peer: a client that drops and reconnects within reconnect_grace loses
// nothing and cancels nothing; one that stays away longer gets its run cancelled exactly as a
// cancel-mode disconnect, and the peer records CancelTask.

import (
	"bufio"
	"context"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// sseFrame is one SSE frame: its id and its data.
type sseFrame struct {
	ID   int64
	Data string
}

// readFrames reads SSE frames from sc until stop returns true for one (included) or the
// stream ends.
func readFrames(t *testing.T, sc *bufio.Scanner, stop func(sseFrame) bool) []sseFrame {
	t.Helper()
	var out []sseFrame
	var cur sseFrame
	for sc.Scan() {
		line := sc.Text()
		switch {
		case strings.HasPrefix(line, "id: "):
			id, err := strconv.ParseInt(strings.TrimPrefix(line, "id: "), 10, 64)
			require.NoError(t, err)
			cur.ID = id
		case strings.HasPrefix(line, "data: "):
			cur.Data = strings.TrimPrefix(line, "data: ")
		case line == "" && cur.Data != "":
			out = append(out, cur)
			if stop(cur) {
				return out
			}
			cur = sseFrame{}
		}
	}
	return out
}

func frameIs(typ string) func(sseFrame) bool {
	return func(f sseFrame) bool { return strings.Contains(f.Data, `"type":"`+typ+`"`) }
}

// openSSE sends req and returns its response and a scanner over its body.
func openSSE(t *testing.T, req *http.Request) (*http.Response, *bufio.Scanner) {
	t.Helper()
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	return resp, sc
}

// postDetachRun starts a run of thread with the user's text; ctx ends the request.
func postDetachRun(t *testing.T, ctx context.Context, base, thread, text string) (*http.Response, *bufio.Scanner) {
	t.Helper()
	body := `{"threadId":"` + thread + `","runId":"run-` + thread + `","protocolVersion":"1.0","messages":[{"id":"u1","role":"user","content":"` + text + `"}]}`
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, base+"/agui", strings.NewReader(body))
	require.NoError(t, err)
	req.Header.Set("Content-Type", "application/json")
	return openSSE(t, req)
}

// runEvents opens the reconnect stream of the run after the event id after (0: from the
// start).
func runEvents(t *testing.T, base, thread string, after int64) (*http.Response, *bufio.Scanner) {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, base+"/agui/threads/"+thread+"/runs/run-"+thread+"/events", nil)
	require.NoError(t, err)
	if after > 0 {
		req.Header.Set("Last-Event-ID", strconv.FormatInt(after, 10))
	}
	return openSSE(t, req)
}

// waitLog waits for the coordinator's log line msg for the thread.
func waitLog(t *testing.T, b *baton, msg, thread string) {
	t.Helper()
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		assert.NotEmpty(c, b.logRecords(msg, thread), "log line %q", msg)
	}, eventualWait, 20*time.Millisecond)
}

// A connection dropped mid-delegation for less than the grace: the run goes on, the
// reconnect stream (Last-Event-ID) replays what was missed and follows the rest live, the
// live part and the reconnect together are exactly the run's whole stream, the sub-agent's
// task completes and nobody sent CancelTask.
func TestDetachReconnectWithinGrace(t *testing.T) {
	t.Parallel()
	requirePeers(t)
	peer := startA2APeerEnv(t)
	model := startCancelLLM(t)
	b := startBatonForCancel(t, cancelConfig{LLMURL: model.URL, Agents: []agentEntry{{Name: "peer", URL: peer}},
		OnDisconnect: "detach", ReconnectGrace: "10m"})
	before, _ := peerTasks(t, peer)
	thread := "detach-short"

	ctx, drop := context.WithCancel(context.Background())
	defer drop()
	live, sc := postDetachRun(t, ctx, b.URL, thread, "peer: slow please")
	got := readFrames(t, sc, frameIs("TEXT_MESSAGE_CONTENT"))
	require.NotEmpty(t, got)
	require.True(t, frameIs("TEXT_MESSAGE_CONTENT")(got[len(got)-1]), "the live stream ended before the sub-agent streamed")
	last := got[len(got)-1].ID
	drop()
	_ = live.Body.Close()
	waitLog(t, b, "client gone; run detached, waiting for a reconnect", thread)

	resp, sc2 := runEvents(t, b.URL, thread, last)
	rest := readFrames(t, sc2, frameIs("RUN_FINISHED"))
	_ = resp.Body.Close()
	require.NotEmpty(t, rest)
	require.True(t, frameIs("RUN_FINISHED")(rest[len(rest)-1]), "the reconnect stream did not end with RUN_FINISHED")
	// Frames that restate the open state at the reconnection point carry its id.
	var after []sseFrame
	for _, f := range rest {
		if f.ID > last {
			after = append(after, f)
		}
	}

	// The whole stream, read from the start once the run has ended.
	resp, sc3 := runEvents(t, b.URL, thread, 0)
	whole := readFrames(t, sc3, frameIs("RUN_FINISHED"))
	_ = resp.Body.Close()
	assert.Equal(t, whole, append(got, after...), "live part + reconnect differ from the run's stream")
	assert.Contains(t, strings.Join(framesData(whole), "\n"), "step 20", "the sub-agent's last step is missing")

	assert.EventuallyWithT(t, func(c *assert.CollectT) {
		tasks, cancelled := peerTasks(c, peer)
		ids := newKeys(before, tasks)
		if assert.Len(c, ids, 1, "new tasks at the peer") {
			assert.False(c, cancelled[ids[0]], "the peer got CancelTask for a detached run")
			assert.Equal(c, "TASK_STATE_COMPLETED", tasks[ids[0]])
		}
	}, eventualWait, 100*time.Millisecond)
	recs := b.logRecords("run ended", thread)
	if assert.Len(t, recs, 1) {
		assert.False(t, strings.HasPrefix(recs[0]["reason"], "cancelled"), "run ended: %s", recs[0]["reason"])
	}
	assert.Empty(t, b.logRecords("cancelled downstream", thread))
}

// Nobody reconnects within the grace: the run is cancelled as for a cancel-mode disconnect,
// and the peer records CancelTask for the task, which ends canceled. A reconnect stream that
// comes and goes again restarts the grace, it does not end it.
func TestDetachGraceExpiresCancels(t *testing.T) {
	t.Parallel()
	requirePeers(t)
	peer := startA2APeerEnv(t)
	model := startCancelLLM(t)
	b := startBatonForCancel(t, cancelConfig{LLMURL: model.URL, Agents: []agentEntry{{Name: "peer", URL: peer}},
		OnDisconnect: "detach", ReconnectGrace: "500ms"})
	for _, reconnect := range []bool{false, true} {
		name := "gone"
		if reconnect {
			name = "reconnect-then-gone"
		}
		t.Run(name, func(t *testing.T) {
			before, _ := peerTasks(t, peer)
			thread := "detach-long-" + name
			ctx, drop := context.WithCancel(context.Background())
			defer drop()
			live, sc := postDetachRun(t, ctx, b.URL, thread, "peer: slow please")
			got := readFrames(t, sc, frameIs("TEXT_MESSAGE_CONTENT"))
			require.True(t, len(got) > 0 && frameIs("TEXT_MESSAGE_CONTENT")(got[len(got)-1]), "the live stream ended before the sub-agent streamed")
			drop()
			_ = live.Body.Close()
			if reconnect {
				resp, sc2 := runEvents(t, b.URL, thread, got[len(got)-1].ID)
				readFrames(t, sc2, frameIs("TEXT_MESSAGE_CONTENT"))
				_ = resp.Body.Close()
			}
			assertPeerCancelled(t, peer, before)
			assertRunEndedBy(t, b, thread, reasonClientGone)
			assert.NotEmpty(t, b.logRecords("no reconnect within the grace period; cancelling the run", thread))
		})
	}
}

func framesData(fs []sseFrame) []string {
	out := make([]string, len(fs))
	for i, f := range fs {
		out[i] = f.Data
	}
	return out
}
