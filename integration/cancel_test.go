package integration

// End-to-end tests of cancellation (DESIGN §10): a frontend disconnect becomes A2A
// CancelTask and MCP cancellation, the producer-side stop endpoint, and graceful shutdown,
// with the coordinator binary, the official AG-UI clients and real sub-agents and MCP
// servers. What was cancelled is always checked on the far side.

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	sdk "github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/baton-dev/baton/internal/demomcp"
)

// reasonClientGone is the coordinator's "run ended" reason after a disconnect.
const reasonClientGone = "cancelled: client disconnected"

// assertAborted checks the client side of an abortRun(): the abort fired and the client
// reported no failure and printed no warning.
func assertAborted(t *testing.T, r aguiResult) {
	t.Helper()
	assert.True(t, r.Aborted, "the client's abortRun() did not fire; events: %v", eventTypes(r.Events))
	assert.Nil(t, r.Failed, "the client failed")
	assert.Empty(t, r.Warnings, "client warnings")
	assert.Empty(t, eventsOfType(r.Events, "RUN_FINISHED"), "the run finished before the abort: %v", eventTypes(r.Events))
}

// assertRunEndedBy waits for the coordinator's "run ended" line of the thread and checks its
// reason.
func assertRunEndedBy(t *testing.T, b *baton, threadID, reason string) {
	t.Helper()
	assert.EventuallyWithT(t, func(c *assert.CollectT) {
		recs := b.logRecords("run ended", threadID)
		if assert.Len(c, recs, 1, "run ended lines of thread %s", threadID) {
			assert.Equal(c, reason, recs[0]["reason"])
		}
	}, eventualWait, 50*time.Millisecond)
}

// assertPeerCancelled waits until the JS peer has exactly one task that is not in before,
// and checks that it received CancelTask for it and that the task ended canceled. It
// returns the task id.
func assertPeerCancelled(t *testing.T, peer string, before map[string]string) string {
	t.Helper()
	var id string
	assert.EventuallyWithT(t, func(c *assert.CollectT) {
		tasks, cancelled := peerTasks(c, peer)
		ids := newKeys(before, tasks)
		if !assert.Len(c, ids, 1, "new tasks at the peer") {
			return
		}
		id = ids[0]
		assert.True(c, cancelled[id], "the peer got no CancelTask for task %s", id)
		assert.Equal(c, "TASK_STATE_CANCELED", tasks[id], "final state of task %s", id)
	}, eventualWait, 100*time.Millisecond)
	return id
}

// TestCancelAbortRunJSPeer: @ag-ui/client abortRun() while a delegation to the @a2a-js/sdk
// peer's slow task streams: the peer gets CancelTask for that task and the task ends
// canceled. The abort comes either as soon as the delegation starts (the task id may not be
// known yet) or once the sub-agent's text streams (the id is known).
func TestCancelAbortRunJSPeer(t *testing.T) {
	t.Parallel()
	requirePeers(t)
	peer := startA2APeerEnv(t)
	model := startCancelLLM(t)
	b := startBatonForCancel(t, cancelConfig{LLMURL: model.URL, Agents: []agentEntry{{Name: "peer", URL: peer}}})
	for _, lane := range lanes {
		for _, on := range []string{"SUBAGENT_STARTED", "TEXT_MESSAGE_CONTENT"} {
			t.Run(lane+"/"+on, func(t *testing.T) {
				before, _ := peerTasks(t, peer)
				job := userJob("abort-peer", "peer: slow please")
				job["abortOnEvent"] = on
				r := runAGUIClient(t, lane, b.URL+"/agui", job)
				assertAborted(t, r)
				require.NotEmpty(t, eventsOfType(r.Events, "SUBAGENT_STARTED"), "no delegation before the abort")
				id := assertPeerCancelled(t, peer, before)
				thread := job["threadId"].(string)
				assertRunEndedBy(t, b, thread, reasonClientGone)
				recs := b.logRecords("cancelled downstream", thread)
				if assert.Len(t, recs, 1, "cancelled downstream lines") {
					assert.Equal(t, "a2a_task", recs[0]["kind"])
					assert.Equal(t, "peer", recs[0]["name"])
					assert.Equal(t, id, recs[0]["task_id"])
					assert.Equal(t, "confirmed", recs[0]["result"])
				}
			})
		}
	}
}

// TestCancelAbortRunDemoAgent: the same against cmd/demo-agent's research agent in slow
// mode. The demo agent has no test log: the coordinator's log names the task it cancelled,
// and GetTask on the agent shows that task canceled.
func TestCancelAbortRunDemoAgent(t *testing.T) {
	t.Parallel()
	requirePeers(t)
	research := startDemoAgent(t, "research")
	model := startCancelLLM(t)
	b := startBatonForCancel(t, cancelConfig{LLMURL: model.URL, Agents: []agentEntry{{Name: "research", URL: research}}})
	for _, lane := range lanes {
		for _, on := range []string{"SUBAGENT_STARTED", "TEXT_MESSAGE_CONTENT"} {
			t.Run(lane+"/"+on, func(t *testing.T) {
				job := userJob("abort-demo", "research: slow survey of tides")
				job["abortOnEvent"] = on
				r := runAGUIClient(t, lane, b.URL+"/agui", job)
				assertAborted(t, r)
				thread := job["threadId"].(string)
				assertRunEndedBy(t, b, thread, reasonClientGone)
				recs := b.logRecords("cancelled downstream", thread)
				require.Len(t, recs, 1, "cancelled downstream lines")
				assert.Equal(t, "a2a_task", recs[0]["kind"])
				assert.Equal(t, "research", recs[0]["name"])
				assert.Equal(t, "confirmed", recs[0]["result"])
				id := recs[0]["task_id"]
				require.NotEmpty(t, id, "the log names no task id: %v", recs[0])
				ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
				defer cancel()
				state, err := demoTaskState(ctx, research, id)
				require.NoError(t, err)
				assert.Equal(t, sdk.TaskStateCanceled, state, "the demo agent's state of task %s", id)
			})
		}
	}
}

// TestDisconnectBeforeFirstTaskEvent: the peer's "delay" verb sends nothing (not even the
// SSE headers) for 1.5 s, so the coordinator does not know the task id when the client
// disconnects; the cancel is held until the id arrives, and the task is still cancelled.
func TestDisconnectBeforeFirstTaskEvent(t *testing.T) {
	requirePeers(t)
	peer := startA2APeerEnv(t, "DELAY_MS=1500")
	model := startCancelLLM(t)
	b := startBatonForCancel(t, cancelConfig{LLMURL: model.URL, Agents: []agentEntry{{Name: "peer", URL: peer}}})
	for _, tc := range []struct {
		name  string
		lane  string
		abort map[string]any
	}{
		{name: "v1/on-SUBAGENT_STARTED", lane: "v1", abort: map[string]any{"abortOnEvent": "SUBAGENT_STARTED"}},
		{name: "legacy/on-SUBAGENT_STARTED", lane: "legacy", abort: map[string]any{"abortOnEvent": "SUBAGENT_STARTED"}},
		// A timed abort while the coordinator waits for the task id: timed from the
		// delegation's start, not the run's, which on a loaded machine may come later than 300 ms.
		{name: "v1/300ms-after-SUBAGENT_STARTED", lane: "v1", abort: map[string]any{"abortOnEvent": "SUBAGENT_STARTED", "abortDelayMs": 300}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before, _ := peerTasks(t, peer)
			job := userJob("abort-delay", "peer: delay then stream")
			for k, v := range tc.abort {
				job[k] = v
			}
			r := runAGUIClient(t, tc.lane, b.URL+"/agui", job)
			assertAborted(t, r)
			require.NotEmpty(t, eventsOfType(r.Events, "SUBAGENT_STARTED"), "the abort came before the delegation started")
			id := assertPeerCancelled(t, peer, before)
			thread := job["threadId"].(string)
			assertRunEndedBy(t, b, thread, reasonClientGone)
			recs := b.logRecords("cancelled downstream", thread)
			if assert.Len(t, recs, 1) {
				assert.Equal(t, id, recs[0]["task_id"], "the held cancel names the task that arrived later")
				assert.Equal(t, "confirmed", recs[0]["result"])
				t.Logf("held cancel of task %s: latency_ms=%s", id, recs[0]["latency_ms"])
			}
		})
	}
}

// TestCancelMCPCall: a disconnect during an MCP call cancels it, and the server sees the
// cancellation: demo count_slowly over stateless HTTP stops (demomcp's OnCancelled hook),
// and over stdio gets notifications/cancelled for its request; so does server-everything's
// trigger-long-running-operation over stdio and over streamable HTTP. The stdio servers run
// behind a tee that records their stdin; the HTTP server-everything behind a recording proxy.
func TestCancelMCPCall(t *testing.T) {
	t.Parallel()
	dir := requirePeers(t)
	node, _ := requireNode(t)
	bins := buildBinaries(t)
	everything := filepath.Join(dir, "node_modules", "@modelcontextprotocol", "server-everything", "dist", "index.js")

	// demo count_slowly over stateless HTTP, in process, to observe the handler stopping.
	stopped := make(chan string, 16)
	mux := http.NewServeMux()
	mux.Handle("/mcp", demomcp.Handler(demomcp.NewServer(demomcp.Options{
		OnCancelled: func(tool string) { stopped <- tool },
	}), slog.New(slog.DiscardHandler)))
	demoHTTP := httptest.NewServer(mux)
	t.Cleanup(func() {
		demoHTTP.CloseClientConnections()
		demoHTTP.Close()
	})

	logs := t.TempDir()
	demoStdin := filepath.Join(logs, "demo-mcp.stdin")
	everythingStdin := filepath.Join(logs, "everything.stdin")

	// server-everything over streamable HTTP, behind a recording proxy.
	var everythingHTTP *recordingProxy
	for attempt := 0; ; attempt++ {
		port := freePort(t)
		_, err := startProcErr(t, "everything-http", []string{node, everything, "streamableHttp"},
			[]string{"PORT=" + strconv.Itoa(port)}, readyOnURL(fmt.Sprintf("http://127.0.0.1:%d/mcp", port)))
		if err == nil {
			everythingHTTP = startRecordingProxy(t, fmt.Sprintf("http://127.0.0.1:%d", port))
			break
		}
		require.Less(t, attempt, 2, "server-everything (HTTP): %v", err)
	}

	model := startCancelLLM(t)
	b := startBatonForCancel(t, cancelConfig{LLMURL: model.URL, MCP: []mcpEntry{
		{Name: "dhttp", URL: demoHTTP.URL + "/mcp"},
		{Name: "dstdio", Command: teeCommand(t, demoStdin, bins["demo-mcp"], "stdio")},
		{Name: "evstdio", Command: teeCommand(t, everythingStdin, node, everything, "stdio")},
		{Name: "evhttp", URL: everythingHTTP.URL + "/mcp"},
	}})

	const (
		countArgs = `{"to": 200, "interval_ms": 100}`
		longArgs  = `{"duration": 30, "steps": 30}`
	)
	stdinOf := func(path string) func() []map[string]any {
		return func() []map[string]any {
			raw, _ := os.ReadFile(path)
			return jsonRPCMessages(raw)
		}
	}
	for _, tc := range []struct {
		name, tool, args string
		// sawCancel reports what the server received; nil when checked through stopped.
		received func() []map[string]any
	}{
		{name: "count_slowly/stateless-http", tool: "dhttp__count_slowly", args: countArgs},
		{name: "count_slowly/stdio", tool: "dstdio__count_slowly", args: countArgs, received: stdinOf(demoStdin)},
		{name: "everything/stdio", tool: "evstdio__trigger-long-running-operation", args: longArgs, received: stdinOf(everythingStdin)},
		{name: "everything/http", tool: "evhttp__trigger-long-running-operation", args: longArgs, received: everythingHTTP.Messages},
	} {
		t.Run(tc.name, func(t *testing.T) {
			job := userJob("abort-mcp", tc.tool+": "+tc.args)
			job["abortOnEvent"] = "ACTIVITY_SNAPSHOT" // the first progress: the call is running
			r := runAGUIClient(t, "v1", b.URL+"/agui", job)
			assertAborted(t, r)
			require.NotEmpty(t, eventsOfType(r.Events, "ACTIVITY_SNAPSHOT"), "no progress before the abort")
			thread := job["threadId"].(string)
			assertRunEndedBy(t, b, thread, reasonClientGone)
			recs := b.logRecords("cancelled downstream", thread)
			if assert.Len(t, recs, 1, "cancelled downstream lines") {
				assert.Equal(t, "mcp_call", recs[0]["kind"])
				assert.Equal(t, tc.tool, recs[0]["name"])
				assert.Equal(t, "cancelled", recs[0]["result"])
			}
			if tc.received == nil {
				select {
				case tool := <-stopped:
					assert.Equal(t, demomcp.ToolCountSlowly, tool)
				case <-time.After(eventualWait):
					t.Fatal("count_slowly did not stop: the server never saw the cancellation")
				}
				return
			}
			remote := tc.tool[strings.Index(tc.tool, "__")+2:]
			assert.EventuallyWithT(t, func(c *assert.CollectT) {
				calls, cancelled := cancelledCalls(tc.received(), remote)
				assert.Equal(c, 1, calls, "tools/call %s requests the server got", remote)
				assert.Equal(c, 1, cancelled, "notifications/cancelled for that request")
			}, eventualWait, 100*time.Millisecond)
		})
	}
}

// postStop POSTs the stop endpoint of a run and returns the status and the JSON body.
func postStop(t testing.TB, base, threadID, runID string) (int, map[string]any) {
	t.Helper()
	u := fmt.Sprintf("%s/agui/threads/%s/runs/%s/stop", base, url.PathEscape(threadID), url.PathEscape(runID))
	resp, err := http.Post(u, "application/json", nil)
	require.NoError(t, err)
	defer resp.Body.Close()
	var body map[string]any
	_ = json.NewDecoder(resp.Body).Decode(&body)
	return resp.StatusCode, body
}

// TestStopEndpoint: POST /agui/threads/{t}/runs/{r}/stop while a delegation to the peer's
// slow task streams. The 1.0 client sees RUN_FINISHED with the cancelled outcome, the 0.0.59
// client RUN_ERROR{code:"CANCELLED"}, both without client errors or warnings; the peer gets
// CancelTask and the task ends canceled. Stopping the finished run is a 409, an unknown run
// a 404.
func TestStopEndpoint(t *testing.T) {
	t.Parallel()
	dir := requirePeers(t)
	node, _ := requireNode(t)
	peer := startA2APeerEnv(t)
	model := startCancelLLM(t)
	b := startBatonForCancel(t, cancelConfig{LLMURL: model.URL, Agents: []agentEntry{{Name: "peer", URL: peer}}})

	for _, lane := range lanes {
		t.Run(lane, func(t *testing.T) {
			before, _ := peerTasks(t, peer)
			job := userJob("stop", "peer: slow until stopped")
			thread, run := job["threadId"].(string), job["runId"].(string)

			type outcome struct {
				res    aguiResult
				stderr string
				err    error
			}
			ctx, cancel := context.WithTimeout(context.Background(), aguiClientTimeout)
			done := make(chan outcome, 1)
			go func() {
				res, stderr, err := runAGUIClientCtx(ctx, node, dir, lane, b.URL+"/agui", job)
				done <- outcome{res, stderr, err}
			}()
			var out outcome
			finished := false
			defer func() { // the client process ends before the test does
				cancel()
				if !finished {
					<-done
				}
			}()

			// Underway: the peer's task is working.
			assert.EventuallyWithT(t, func(c *assert.CollectT) {
				tasks, _ := peerTasks(c, peer)
				ids := newKeys(before, tasks)
				if assert.Len(c, ids, 1, "new tasks at the peer") {
					assert.Equal(c, "TASK_STATE_WORKING", tasks[ids[0]])
				}
			}, eventualWait, 50*time.Millisecond)

			status, body := postStop(t, b.URL, thread, "no-such-run")
			assert.Equal(t, http.StatusNotFound, status, "stop of an unknown run of an active thread: %v", body)
			status, body = postStop(t, b.URL, thread, run)
			require.Equal(t, http.StatusAccepted, status, "stop: %v", body)

			out = <-done
			finished = true
			require.NoError(t, out.err, "agui-client stderr:\n%s", out.stderr)
			r := out.res
			assert.Nil(t, r.Failed, "the client failed")
			assert.Empty(t, r.Warnings, "client warnings")
			assert.True(t, r.Terminal, "no terminal event: %v", eventTypes(r.Events))
			assert.False(t, r.Aborted)
			switch lane {
			case "v1":
				assert.Nil(t, r.RunError, "RUN_ERROR")
				if assert.NotNil(t, r.Outcome, "no RUN_FINISHED: %v", eventTypes(r.Events)) {
					assert.Equal(t, "cancelled", *r.Outcome)
				}
			case "legacy":
				assert.Nil(t, r.Outcome, "RUN_FINISHED on a pre-1.0 stream")
				if assert.NotNil(t, r.RunError, "no RUN_ERROR: %v", eventTypes(r.Events)) {
					assert.Equal(t, "CANCELLED", r.RunError["code"])
				}
			}
			assertPeerCancelled(t, peer, before)
			assertRunEndedBy(t, b, thread, "cancelled: stop requested")
			recs := b.logRecords("cancelled downstream", thread)
			if assert.Len(t, recs, 1) {
				assert.Equal(t, "confirmed", recs[0]["result"])
			}

			status, body = postStop(t, b.URL, thread, run)
			assert.Equal(t, http.StatusConflict, status, "stop of a finished run: %v", body)
			assert.Equal(t, "RUN_FINISHED", body["error"])
		})
	}
	t.Run("unknown thread", func(t *testing.T) {
		status, body := postStop(t, b.URL, newThreadID("never-started"), "run-1")
		assert.Equal(t, http.StatusNotFound, status)
		assert.Equal(t, "RUN_NOT_FOUND", body["error"])
	})
}

// stormRun is one run of a storm: its thread and the events its client read.
type stormRun struct {
	ThreadID string
	Events   []map[string]any
	// Err is a request or read error other than the storm's own disconnect.
	Err error
}

// storm is a set of concurrent AG-UI runs over raw HTTP (1.0 input).
type storm struct {
	Runs []*stormRun

	cancel context.CancelFunc
	tr     *http.Transport
	wg     sync.WaitGroup
}

// startStorm starts n runs with the user text text(i) on base and returns once every
// stream has delivered an event of type ready. Each client keeps reading until its stream
// ends or Disconnect is called.
func startStorm(t testing.TB, base string, n int, text func(i int) string, ready string) *storm {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	s := &storm{cancel: cancel, tr: &http.Transport{MaxIdleConnsPerHost: n}}
	client := &http.Client{Transport: s.tr}
	var readyWG sync.WaitGroup
	readyWG.Add(n)
	for i := range n {
		run := &stormRun{ThreadID: newThreadID("storm")}
		s.Runs = append(s.Runs, run)
		s.wg.Go(func() {
			signalled := false
			signal := func() {
				if !signalled {
					signalled = true
					readyWG.Done()
				}
			}
			defer signal() // a run that fails before ready must not block the storm
			body, _ := json.Marshal(runInput(run.ThreadID, newThreadID("run"), text(i)))
			req, err := http.NewRequestWithContext(ctx, http.MethodPost, base+"/agui", bytes.NewReader(body))
			if err != nil {
				run.Err = err
				return
			}
			req.Header.Set("Content-Type", "application/json")
			req.Header.Set("Accept", "text/event-stream")
			resp, err := client.Do(req)
			if err != nil {
				run.Err = err
				return
			}
			defer resp.Body.Close()
			if resp.StatusCode != http.StatusOK {
				run.Err = fmt.Errorf("POST /agui: HTTP %d", resp.StatusCode)
				return
			}
			run.Events, err = readSSE(resp.Body, func(ev map[string]any) {
				if ev["type"] == ready {
					signal()
				}
			})
			if err != nil && ctx.Err() == nil {
				run.Err = err
			}
		})
	}
	allReady := make(chan struct{})
	go func() { readyWG.Wait(); close(allReady) }()
	select {
	case <-allReady:
	case <-time.After(2 * eventualWait):
		s.Disconnect()
		<-allReady
		t.Fatalf("not every run of the storm reached %s", ready)
	}
	for i, r := range s.Runs {
		if r.Err != nil {
			s.Disconnect()
			t.Fatalf("storm run %d: %v", i, r.Err)
		}
	}
	return s
}

// Disconnect drops every client at once and waits for the clients to return.
func (s *storm) Disconnect() {
	s.cancel()
	s.Wait()
}

// Wait waits for every client to return (stream ended or dropped).
func (s *storm) Wait() {
	s.wg.Wait()
	s.tr.CloseIdleConnections()
}

// assertStormEnded checks the coordinator's log: every run of the storm ended with reason,
// and every one cancelled exactly one sub-agent task successfully.
func assertStormEnded(t *testing.T, b *baton, s *storm, reason string) {
	t.Helper()
	assert.EventuallyWithT(t, func(c *assert.CollectT) {
		ended := map[string]string{}
		for _, rec := range b.logRecords("run ended", "") {
			ended[rec["thread_id"]] = rec["reason"]
		}
		cancelled := map[string]int{}
		for _, rec := range b.logRecords("cancelled downstream", "") {
			if rec["kind"] == "a2a_task" && rec["result"] == "confirmed" {
				cancelled[rec["thread_id"]]++
			}
		}
		bad := 0
		for _, r := range s.Runs {
			if ended[r.ThreadID] != reason || cancelled[r.ThreadID] != 1 {
				bad++
			}
		}
		assert.Zero(c, bad, "runs not ended with %q after exactly one cancelled task", reason)
	}, eventualWait, 200*time.Millisecond)
}

// assertPeerCancelledAll waits until the peer has n tasks not in before, every one of them
// with a CancelTask received and the state canceled.
func assertPeerCancelledAll(t *testing.T, peer string, before map[string]string, n int) {
	t.Helper()
	assert.EventuallyWithT(t, func(c *assert.CollectT) {
		tasks, cancelled := peerTasks(c, peer)
		ids := newKeys(before, tasks)
		assert.Len(c, ids, n, "new tasks at the peer")
		notCancelled, notCanceled := 0, map[string]int{}
		for _, id := range ids {
			if !cancelled[id] {
				notCancelled++
			}
			if tasks[id] != "TASK_STATE_CANCELED" {
				notCanceled[tasks[id]]++
			}
		}
		assert.Zero(c, notCancelled, "tasks without a CancelTask")
		assert.Empty(c, notCanceled, "tasks not canceled, by state")
	}, eventualWait, 250*time.Millisecond)
}

// TestDisconnect200Concurrent: 200 runs delegating to the peer's slow task are disconnected
// at once; the peer gets CancelTask for every task and every task ends canceled. (Some
// clients drop before their task id is known: those cancels are held.) The goroutine side
// of this test is TestDisconnect200InProcess, since the binary has no debug endpoint.
func TestDisconnect200Concurrent(t *testing.T) {
	requirePeers(t)
	const n = 200
	peer := startA2APeerEnv(t)
	model := startCancelLLM(t)
	b := startBatonForCancel(t, cancelConfig{LLMURL: model.URL, Agents: []agentEntry{{Name: "peer", URL: peer}}})
	before, _ := peerTasks(t, peer)

	s := startStorm(t, b.URL, n, func(i int) string { return fmt.Sprintf("peer: slow number %d", i) }, "SUBAGENT_STARTED")
	s.Disconnect()
	for i, r := range s.Runs {
		assert.Empty(t, eventsOfType(r.Events, "RUN_FINISHED"), "run %d finished before the disconnect", i)
	}
	assertPeerCancelledAll(t, peer, before, n)
	assertStormEnded(t, b, s, reasonClientGone)
	logCancelLatencies(t, b, s)
}

// logCancelLatencies logs the spread of the coordinator's cancellation latencies for the
// storm (latency_ms: from the start of the run's cancellation to the agent's answer).
func logCancelLatencies(t *testing.T, b *baton, s *storm) {
	threads := map[string]bool{}
	for _, r := range s.Runs {
		threads[r.ThreadID] = true
	}
	var lat []time.Duration
	for _, rec := range b.logRecords("cancelled downstream", "") {
		if ms, err := strconv.Atoi(rec["latency_ms"]); err == nil && threads[rec["thread_id"]] {
			lat = append(lat, time.Duration(ms)*time.Millisecond)
		}
	}
	slices.Sort(lat)
	t.Logf("%d cancellations acknowledged; latency p50 %v, p99 %v, max %v",
		len(lat), percentile(lat, 50), percentile(lat, 99), percentile(lat, 100))
}

// TestShutdownCancelsRuns: SIGTERM with runs in flight. New runs get 503 during the grace
// period (2 s); then the runs are cancelled: their streams end with the cancelled outcome,
// the peer gets CancelTask for every task, and the process exits 0.
func TestShutdownCancelsRuns(t *testing.T) {
	t.Parallel()
	requirePeers(t)
	const n = 5
	peer := startA2APeerEnv(t)
	model := startCancelLLM(t)
	b := startBatonForCancel(t, cancelConfig{LLMURL: model.URL, Grace: "2s", Agents: []agentEntry{{Name: "peer", URL: peer}}})
	before, _ := peerTasks(t, peer)

	// Ready once the sub-agent's text streams: the task is running at the peer.
	s := startStorm(t, b.URL, n, func(i int) string { return fmt.Sprintf("peer: slow shutdown %d", i) }, "TEXT_MESSAGE_CONTENT")
	defer s.Disconnect()

	exit := make(chan int, 1)
	go func() { exit <- b.P.Stop() }()

	// During the grace period the coordinator refuses new runs.
	assert.EventuallyWithT(t, func(c *assert.CollectT) {
		assert.NotEmpty(c, b.logRecords("shutting down", ""), "no shutting down line yet")
	}, eventualWait, 10*time.Millisecond)
	var refused int
	for deadline := time.Now().Add(time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		body, _ := json.Marshal(runInput(newThreadID("late"), "run-late", "no tool: just text"))
		resp, err := postAGUI(context.Background(), b.URL, body)
		if err != nil {
			break
		}
		refused = resp.StatusCode
		resp.Body.Close()
		if refused == http.StatusServiceUnavailable {
			break
		}
	}
	assert.Equal(t, http.StatusServiceUnavailable, refused, "a new run during the grace period")

	select {
	case code := <-exit:
		assert.Equal(t, 0, code, "exit code after SIGTERM")
	case <-time.After(2 * stopGrace):
		t.Fatal("the coordinator did not exit")
	}
	s.Wait()
	for i, r := range s.Runs {
		assert.NoError(t, r.Err, "run %d", i)
		fin := eventsOfType(r.Events, "RUN_FINISHED")
		if assert.Len(t, fin, 1, "run %d: RUN_FINISHED; events %v", i, eventTypes(r.Events)) {
			outcome, _ := fin[0]["outcome"].(map[string]any)
			assert.Equal(t, "cancelled", outcome["type"], "run %d: outcome", i)
		}
	}
	assertPeerCancelledAll(t, peer, before, n)
	assertStormEnded(t, b, s, "cancelled: coordinator shutdown")

	// The runs had the whole grace period before they were cancelled (a lower bound that the
	// coordinator guarantees, not a speed: log times are truncated to the millisecond).
	down := b.logRecords("shutting down", "")
	require.Len(t, down, 1)
	assert.Equal(t, "2s", down[0]["grace"])
	t0, err := time.Parse(time.RFC3339Nano, down[0]["time"])
	require.NoError(t, err)
	for i, r := range s.Runs {
		for _, rec := range b.logRecords("run ended", r.ThreadID) {
			t1, err := time.Parse(time.RFC3339Nano, rec["time"])
			require.NoError(t, err)
			assert.GreaterOrEqual(t, t1.Sub(t0), 2*time.Second-2*time.Millisecond, "run %d was cancelled before the grace period ended", i)
		}
	}
}

// TestDisconnectAfterInterruptKeepsTask: a task that waits for the user (input-required on
// an ask_user agent: the run ends with an interrupt and the stream ends normally) is not
// cancelled when the client then goes away (DESIGN §10): the peer gets no CancelTask and the
// task stays input-required, ready for the resume.
func TestDisconnectAfterInterruptKeepsTask(t *testing.T) {
	t.Parallel()
	requirePeers(t)
	peer := startA2APeerEnv(t)
	model := startCancelLLM(t)
	b := startBatonForCancel(t, cancelConfig{LLMURL: model.URL,
		Agents: []agentEntry{{Name: "peer", URL: peer, InputRequired: "ask_user"}}})
	before, _ := peerTasks(t, peer)
	job := userJob("interrupt-kept", "peer: input please")
	r := runAGUIClient(t, "v1", b.URL+"/agui", job) // the client exits: its connection is gone
	assert.Nil(t, r.Failed, "the client failed")
	assert.Empty(t, r.Warnings, "client warnings")
	require.NotNil(t, r.Outcome, "no RUN_FINISHED: %v", eventTypes(r.Events))
	require.Equal(t, "interrupt", *r.Outcome)

	thread := job["threadId"].(string)
	assert.EventuallyWithT(t, func(c *assert.CollectT) {
		assert.Len(c, b.logRecords("run ended", thread), 1, "run ended lines")
	}, eventualWait, 50*time.Millisecond)
	assert.Empty(t, b.logRecords("cancelled downstream", thread), "the parked task was cancelled")
	tasks, cancelled := peerTasks(t, peer)
	ids := newKeys(before, tasks)
	require.Len(t, ids, 1, "new tasks at the peer")
	assert.False(t, cancelled[ids[0]], "the peer got CancelTask for the parked task")
	assert.Equal(t, "TASK_STATE_INPUT_REQUIRED", tasks[ids[0]])
}

// TestCancelLLMStream: a disconnect while the model streams its answer cancels the LLM
// request: the model server sees its client go away, and the coordinator logs the
// cancellation of the llm_request.
func TestCancelLLMStream(t *testing.T) {
	t.Parallel()
	requirePeers(t)
	model := startCancelLLM(t)
	watch := startDropWatch(t, strings.TrimSuffix(model.URL, "/v1"))
	b := startBatonForCancel(t, cancelConfig{LLMURL: watch.URL + "/v1"})
	job := userJob("abort-llm", slowTextPrefix+" please")
	job["abortOnEvent"] = "TEXT_MESSAGE_CONTENT"
	r := runAGUIClient(t, "v1", b.URL+"/agui", job)
	assertAborted(t, r)
	thread := job["threadId"].(string)
	assertRunEndedBy(t, b, thread, reasonClientGone)
	recs := b.logRecords("cancelled downstream", thread)
	if assert.Len(t, recs, 1, "cancelled downstream lines") {
		assert.Equal(t, "llm_request", recs[0]["kind"])
		assert.Equal(t, "cancelled", recs[0]["result"])
	}
	assert.EventuallyWithT(t, func(c *assert.CollectT) {
		assert.Equal(c, int64(1), watch.Dropped(), "LLM requests dropped by the coordinator")
	}, eventualWait, 50*time.Millisecond)
}

// TestCancelParallelDelegations: one turn delegates to the JS peer and to the demo agent at
// once; a disconnect while both stream cancels both tasks.
func TestCancelParallelDelegations(t *testing.T) {
	t.Parallel()
	requirePeers(t)
	peer := startA2APeerEnv(t)
	research := startDemoAgent(t, "research")
	model := startCancelLLM(t)
	b := startBatonForCancel(t, cancelConfig{LLMURL: model.URL,
		Agents: []agentEntry{{Name: "peer", URL: peer}, {Name: "research", URL: research}}})
	before, _ := peerTasks(t, peer)

	// Raw client: the stream is dropped once both sub-agents have streamed text.
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	thread := newThreadID("parallel")
	body, _ := json.Marshal(runInput(thread, newThreadID("run"), "peer,research: slow two at once"))
	resp, err := postAGUI(ctx, b.URL, body)
	require.NoError(t, err)
	defer resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)
	streaming := map[string]bool{}
	evs, _ := readSSEWhile(resp.Body, func(ev map[string]any) bool {
		if id, ok := ev["subagentRunId"].(string); ok && ev["type"] == "TEXT_MESSAGE_CONTENT" {
			streaming[id] = true
		}
		return len(streaming) < 2
	})
	require.Len(t, streaming, 2, "sub-agents streaming before the disconnect; events %v", eventTypes(evs))
	cancel()

	peerTask := assertPeerCancelled(t, peer, before)
	assertRunEndedBy(t, b, thread, reasonClientGone)
	byAgent := map[string]logRecord{}
	for _, rec := range b.logRecords("cancelled downstream", thread) {
		byAgent[rec["name"]] = rec
	}
	require.Len(t, byAgent, 2, "cancelled downstream lines by agent")
	assert.Equal(t, peerTask, byAgent["peer"]["task_id"])
	for _, rec := range byAgent {
		assert.Equal(t, "confirmed", rec["result"], "%v", rec)
	}
	sctx, scancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer scancel()
	state, err := demoTaskState(sctx, research, byAgent["research"]["task_id"])
	require.NoError(t, err)
	assert.Equal(t, sdk.TaskStateCanceled, state)
}
