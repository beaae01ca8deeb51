package integration

// Real A2A agents that ask or answer in ways beyond the plain JSON-RPC streaming path:
// Google ADK's long-running function calls (peers/adk-peer.mjs, written from
// shared/reference/adk-a2a.md on the @a2a-js/sdk server), and agents whose card does not
// stream (peers/a2a-peer.mjs with A2A_STREAMING=0), whose tasks a disconnect or a stop
// must still cancel.

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/baton-dev/baton/internal/testutil/fakellm"
	"github.com/baton-dev/baton/subagent"
)

// startADKPeer starts peers/adk-peer.mjs on a free port and returns its base URL.
func startADKPeer(t testing.TB) string {
	t.Helper()
	dir := requirePeers(t)
	node, _ := requireNode(t)
	var err error
	for attempt := 0; attempt < 3; attempt++ {
		var p *proc
		p, err = startProcErr(t, "adk-peer", []string{node, filepath.Join(dir, "adk-peer.mjs")},
			[]string{"PORT=" + strconv.Itoa(freePort(t))}, readyOnLine(`adk peer on (http://\S+)`))
		if err == nil {
			return p.Match[1]
		}
	}
	t.Fatal(err)
	return ""
}

// adkLog is the ADK peer's /test/log.
type adkLog struct {
	Answers []struct {
		TaskID   string         `json:"taskId"`
		ID       string         `json:"id"`
		Name     string         `json:"name"`
		Response map[string]any `json:"response"`
	} `json:"answers"`
	Refused int               `json:"refused"`
	Tasks   map[string]string `json:"tasks"`
}

func readADKLog(t *testing.T, base string) adkLog {
	t.Helper()
	resp, err := http.Get(base + "/test/log")
	require.NoError(t, err)
	defer resp.Body.Close()
	var l adkLog
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&l))
	return l
}

// TestADKConventionPeer: Baton's A2A client against the ADK-convention peer on both wires:
// the question is shown as text (never the JSON of the parts), one answer goes back as a
// function_response with the call's id and name and the task completes; a second question
// in the same task is answered the same way. ADK refused nothing.
func TestADKConventionPeer(t *testing.T) {
	t.Parallel()
	peer := startADKPeer(t)
	for _, proto := range []string{subagent.Protocol10, subagent.Protocol03} {
		t.Run(proto, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			agent, err := subagent.Resolve(ctx, subagent.AgentConfig{Name: "adk", URL: peer, Protocol: proto}, subagent.Options{})
			require.NoError(t, err)
			t.Cleanup(func() { _ = agent.Close() })

			var seen strings.Builder
			first, err := agent.Send(ctx, subagent.Request{Prompt: "ask me"}, subagent.Observer{Text: func(s string) { seen.WriteString(s) }})
			require.NoError(t, err)
			require.Equal(t, subagent.StateInputRequired, first.State)
			assert.Equal(t, "which colour?", first.Text, "the question as text")
			assert.NotContains(t, seen.String(), `"adk_type"`, "no part JSON reached the user")
			assert.NotContains(t, seen.String(), `{"`, "no part JSON reached the user")

			done, err := agent.Send(ctx, subagent.Request{Prompt: "blue", TaskID: first.TaskID, ContextID: first.ContextID}, subagent.Observer{})
			require.NoError(t, err)
			assert.Equal(t, subagent.StateCompleted, done.State, done.Text)
			assert.Contains(t, done.Text, "adk got: blue")

			two, err := agent.Send(ctx, subagent.Request{Prompt: "ask2 me"}, subagent.Observer{})
			require.NoError(t, err)
			require.Equal(t, subagent.StateInputRequired, two.State)
			again, err := agent.Send(ctx, subagent.Request{Prompt: "red", TaskID: two.TaskID, ContextID: two.ContextID}, subagent.Observer{})
			require.NoError(t, err)
			require.Equal(t, subagent.StateInputRequired, again.State, again.Text)
			assert.Equal(t, two.TaskID, again.TaskID, "the second question is in the same task")
			assert.Equal(t, "which size?", again.Text)
			end, err := agent.Send(ctx, subagent.Request{Prompt: "large", TaskID: two.TaskID, ContextID: two.ContextID}, subagent.Observer{})
			require.NoError(t, err)
			assert.Equal(t, subagent.StateCompleted, end.State, end.Text)
			assert.Contains(t, end.Text, "adk got: red, large")

			l := readADKLog(t, peer)
			assert.Zero(t, l.Refused, "ADK refused an answer")
			var mine []string
			for _, a := range l.Answers {
				if a.TaskID == first.TaskID || a.TaskID == two.TaskID {
					assert.Equal(t, "ask_human", a.Name, "the answer carries the call's name")
					mine = append(mine, a.ID+"="+a.Response["answer"].(string))
				}
			}
			assert.Equal(t, []string{"call-ask-1=blue", "call-ask-1=red", "call-ask-2=large"}, mine)
			assert.Equal(t, "TASK_STATE_COMPLETED", l.Tasks[first.TaskID])
			assert.Equal(t, "TASK_STATE_COMPLETED", l.Tasks[two.TaskID])
		})
	}
}

// TestHITLADKPeer: through the coordinator and the official AG-UI client, the ADK peer's
// question becomes an interrupt whose message is the question as text; the user's answer
// completes the original tool call.
func TestHITLADKPeer(t *testing.T) {
	t.Parallel()
	requirePeers(t)
	peer := startADKPeer(t)
	model := fakellm.Start(hitlModel)
	t.Cleanup(model.Close)
	coord := startHITLCoordinator(t, hitlEnv{llmURL: model.URL, agents: []agentEntry{{Name: "adk", URL: peer}}}.yaml())
	for _, lane := range lanes {
		t.Run(lane, func(t *testing.T) {
			job := hitlJobOn(newThreadID("hitl-adk-"+lane), newThreadID("run"), hitlText(hitlCall{Name: "adk", Args: map[string]any{"prompt": "ask please"}}))
			job["resumeAnswers"] = map[string]any{"*": resolved(map[string]any{"text": "green"})}
			res := runHITLClient(t, lane, coord.URL, job)
			require.Len(t, res.Runs, 2, "an interrupted run and its resume run; first: %v", eventTypes(res.Runs[0].Events))
			first := res.Runs[0]
			assertRun(t, first, "interrupt")
			require.Len(t, first.Interrupts, 1)
			in := first.Interrupts[0]
			callID := checkInterrupt(t, first, in, wantInterrupt{reason: "input_required", message: "which colour?", tool: "adk", a2aAgent: "adk"})
			msg, _ := in["message"].(string)
			assert.NotContains(t, msg, "adk_type", "the interrupt shows the question, not the parts' JSON")
			assert.NotContains(t, msg, `{"`, "the interrupt shows the question, not the parts' JSON")

			second := res.Runs[1]
			assertRun(t, second, "success")
			got := checkResumed(t, second, model, callID)
			assert.True(t, strings.HasPrefix(got, "[COMPLETED]\n"), "result %q", got)
			assert.Contains(t, got, "adk got: green")
			l := readADKLog(t, peer)
			assert.Equal(t, "TASK_STATE_COMPLETED", l.Tasks[a2aTaskOf(in)])
		})
	}
}

// nonStreamingWires are JS peers whose card does not stream or offers only HTTP+JSON.
var nonStreamingWires = []struct {
	name string
	env  []string
}{
	{"a2a-1.0/no-stream", []string{"A2A_LEGACY=0", "A2A_STREAMING=0"}},
	{"a2a-0.3/no-stream", []string{"A2A_ONLY_V03=1", "A2A_STREAMING=0"}},
	{"http+json", []string{"A2A_ONLY_REST=1", "A2A_LEGACY=0"}},
	{"http+json/no-stream", []string{"A2A_ONLY_REST=1", "A2A_LEGACY=0", "A2A_STREAMING=0"}},
}

// TestCancelNonStreamingJSPeer: a delegation to an agent whose card does not stream (both
// wires), or that offers only HTTP+JSON, is cancelled like a streaming one: a disconnect of
// the AG-UI client and a stop each reach the agent as CancelTask, and the task ends
// CANCELED. Before, a non-streaming send blocked without a task id and the task ran on.
func TestCancelNonStreamingJSPeer(t *testing.T) {
	t.Parallel()
	dir := requirePeers(t)
	node, _ := requireNode(t)
	for _, wire := range nonStreamingWires {
		t.Run(wire.name, func(t *testing.T) {
			peer := startA2APeerEnv(t, wire.env...)
			model := startCancelLLM(t)
			b := startBatonForCancel(t, cancelConfig{LLMURL: model.URL, Agents: []agentEntry{{Name: "peer", URL: peer}}})
			// /readyz agrees that the agent is usable (an HTTP+JSON-only card was "down").
			assert.EventuallyWithT(t, func(c *assert.CollectT) {
				var rep struct {
					Checks struct {
						Agents map[string]struct {
							Status string `json:"status"`
							Error  string `json:"error"`
						} `json:"agents"`
					} `json:"checks"`
				}
				resp, err := http.Get(b.URL + "/readyz")
				if !assert.NoError(c, err) {
					return
				}
				defer resp.Body.Close()
				if assert.NoError(c, json.NewDecoder(resp.Body).Decode(&rep)) {
					assert.Equal(c, "up", rep.Checks.Agents["peer"].Status, "readyz agent check: %+v", rep.Checks.Agents["peer"])
				}
			}, eventualWait, 100*time.Millisecond)

			t.Run("disconnect", func(t *testing.T) {
				before, _ := peerTasks(t, peer)
				job := userJob("abort-nostream", "peer: slow please")
				job["abortOnEvent"] = "SUBAGENT_STARTED"
				r := runAGUIClient(t, "v1", b.URL+"/agui", job)
				assertAborted(t, r)
				id := assertPeerCancelled(t, peer, before)
				thread := job["threadId"].(string)
				assertRunEndedBy(t, b, thread, reasonClientGone)
				recs := b.logRecords("cancelled downstream", thread)
				if assert.Len(t, recs, 1, "cancelled downstream lines") {
					assert.Equal(t, id, recs[0]["task_id"])
					assert.Equal(t, "confirmed", recs[0]["result"])
				}
			})
			t.Run("stop", func(t *testing.T) {
				before, _ := peerTasks(t, peer)
				job := userJob("stop-nostream", "peer: slow until stopped")
				thread, run := job["threadId"].(string), job["runId"].(string)
				ctx, cancel := context.WithTimeout(context.Background(), aguiClientTimeout)
				defer cancel()
				done := make(chan error, 1)
				go func() {
					_, _, err := runAGUIClientCtx(ctx, node, dir, "v1", b.URL+"/agui", job)
					done <- err
				}()
				assert.EventuallyWithT(t, func(c *assert.CollectT) {
					tasks, _ := peerTasks(c, peer)
					ids := newKeys(before, tasks)
					if assert.Len(c, ids, 1, "new tasks at the peer") {
						assert.Equal(c, "TASK_STATE_WORKING", tasks[ids[0]])
					}
				}, eventualWait, 50*time.Millisecond)
				status, body := postStop(t, b.URL, thread, run)
				require.Equal(t, http.StatusAccepted, status, "stop: %v", body)
				require.NoError(t, <-done)
				assertPeerCancelled(t, peer, before)
				assertRunEndedBy(t, b, thread, "cancelled: stop requested")
				recs := b.logRecords("cancelled downstream", thread)
				if assert.Len(t, recs, 1) {
					assert.Equal(t, "confirmed", recs[0]["result"])
				}
			})
		})
	}
}

// BenchmarkNonStreamingCancel measures "disconnect → the sub-agent sees CancelTask" and
// "stop → the sub-agent sees CancelTask" for an agent whose card does not stream (the JS peer
// with A2A_STREAMING=0), on the A2A 1.0 JSON-RPC wire, the 0.3 wire and the HTTP+JSON
// binding: from the moment the AG-UI client drops its stream, or the stop request is sent
// (once the peer's task is working, so that the coordinator may know its id), to the arrival
// of CancelTask at the peer's request handler (its clock: same machine). Each iteration is
// one run of the coordinator binary delegating to the peer's slow task; the next starts once
// that task is canceled. p50 and p99 in milliseconds (target: p99 < 100 ms). The last wire
// is a baseline: the same peer whose card streams.
//
//	go test -run XXX -bench NonStreamingCancel -benchtime 20x ./integration/
func BenchmarkNonStreamingCancel(b *testing.B) {
	requirePeers(b)
	for _, wire := range []struct {
		name string
		env  []string
	}{
		{"a2a-1.0", []string{"A2A_LEGACY=0", "A2A_STREAMING=0"}},
		{"a2a-0.3", []string{"A2A_ONLY_V03=1", "A2A_STREAMING=0"}},
		{"http+json", []string{"A2A_ONLY_REST=1", "A2A_LEGACY=0", "A2A_STREAMING=0"}},
		// Baseline: the same peer and harness with a card that streams.
		{"a2a-1.0-streaming-baseline", []string{"A2A_LEGACY=0"}},
	} {
		b.Run(wire.name, func(b *testing.B) {
			peer := startA2APeerEnv(b, wire.env...)
			model := startCancelLLM(b)
			coord := startBatonForCancel(b, cancelConfig{LLMURL: model.URL, Agents: []agentEntry{{Name: "peer", URL: peer}}})
			for _, way := range []string{"disconnect", "stop"} {
				b.Run(way, func(b *testing.B) {
					benchNonStreamingCancel(b, coord.URL, peer, way == "stop")
				})
			}
		})
	}
}

func benchNonStreamingCancel(b *testing.B, coord, peer string, stop bool) {
	tr := &http.Transport{}
	defer tr.CloseIdleConnections()
	client := &http.Client{Transport: tr}

	lat := make([]time.Duration, 0, b.N)
	b.ResetTimer()
	for i := range b.N {
		d, err := nonStreamingCancelOnce(client, coord, peer, i, stop)
		if err != nil {
			b.Fatalf("run %d: %v", i, err)
		}
		lat = append(lat, d)
	}
	b.StopTimer()
	slices.Sort(lat)
	ms := func(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
	b.ReportMetric(ms(percentile(lat, 50)), "p50-ms")
	b.ReportMetric(ms(percentile(lat, 99)), "p99-ms")
	b.ReportMetric(ms(lat[len(lat)-1]), "max-ms")
}

// peerCancelLog is the part of the JS peer's /test/log the benchmark reads.
type peerCancelLog struct {
	Cancels  []string          `json:"cancels"`
	CancelAt []float64         `json:"cancelAt"`
	Tasks    map[string]string `json:"tasks"`
}

func readPeerCancelLog(client *http.Client, peer string) (peerCancelLog, error) {
	var l peerCancelLog
	resp, err := client.Get(peer + "/test/log")
	if err != nil {
		return l, err
	}
	defer resp.Body.Close()
	return l, json.NewDecoder(resp.Body).Decode(&l)
}

// nonStreamingCancelOnce starts one run, waits until the peer's new task works, drops the
// stream (or, with stop, asks the stop endpoint to stop the run) and returns the time until
// the peer received CancelTask for that task.
func nonStreamingCancelOnce(client *http.Client, base, peer string, i int, stop bool) (time.Duration, error) {
	before, err := readPeerCancelLog(client, peer)
	if err != nil {
		return 0, err
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	thread, run := newThreadID("bench-nostream"), newThreadID("run")
	body, _ := json.Marshal(runInput(thread, run, fmt.Sprintf("peer: slow bench %d", i)))
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, base+"/agui", bytes.NewReader(body))
	if err != nil {
		return 0, err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "text/event-stream")
	resp, err := client.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	go func() { _, _ = io.Copy(io.Discard, resp.Body) }()
	var task string
	deadline := time.Now().Add(20 * time.Second)
	for task == "" {
		if time.Now().After(deadline) {
			return 0, fmt.Errorf("no working task at the peer")
		}
		l, err := readPeerCancelLog(client, peer)
		if err != nil {
			return 0, err
		}
		for id, st := range l.Tasks {
			if _, old := before.Tasks[id]; !old && st == "TASK_STATE_WORKING" {
				task = id
			}
		}
		time.Sleep(5 * time.Millisecond)
	}
	start := time.Now()
	if stop {
		resp, err := client.Post(fmt.Sprintf("%s/agui/threads/%s/runs/%s/stop", base, thread, run), "application/json", nil)
		if err != nil {
			return 0, err
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusAccepted {
			return 0, fmt.Errorf("stop: status %d", resp.StatusCode)
		}
	} else {
		cancel()
	}
	for time.Now().Before(deadline.Add(10 * time.Second)) {
		l, err := readPeerCancelLog(client, peer)
		if err != nil {
			return 0, err
		}
		for j, id := range l.Cancels {
			if id == task && j < len(l.CancelAt) {
				at := time.UnixMicro(int64(l.CancelAt[j] * 1000))
				for l.Tasks[task] != "TASK_STATE_CANCELED" && time.Now().Before(deadline.Add(10*time.Second)) {
					time.Sleep(10 * time.Millisecond)
					if l, err = readPeerCancelLog(client, peer); err != nil {
						return 0, err
					}
				}
				return at.Sub(start), nil
			}
		}
		time.Sleep(5 * time.Millisecond)
	}
	return 0, fmt.Errorf("no CancelTask for task %s reached the peer", task)
}
