package integration

// Two coordinator processes on one PostgreSQL database (DESIGN §9, §9b), with the
// @a2a-js/sdk peer and the demo MCP server over stateless HTTP: an A2A input-required
// interrupt and an MRTR (2026-07-28) elicitation raised on one replica are resumed through
// the other, and the answer reaches the sub-agent once; the same resume sent to both
// replicas at the same moment is delivered once; a reconnect through the replica that does
// not execute the run follows it to its end, nothing missing or repeated, and under
// server.on_disconnect: detach it holds the run past the owner's grace; interrupts that
// expire are swept by one replica, and each parked task gets one CancelTask.
//
// Design note: one topology (two replicas, peer, demo MCP, fake model) serves every subtest
// of TestReplicasResumeAndReconnect; the requests are raw HTTP from Go, so that a test can
// pick the replica of each request and send two at the same moment.

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/baton-dev/baton/internal/testutil/fakellm"
	"github.com/baton-dev/baton/internal/testutil/pgtest"
)

// replicaPair is two coordinators on one database with the peers they call.
type replicaPair struct {
	a, b  *hitlCoord
	peer  string
	model *fakellm.Server
}

// startReplicaPair starts the JS peer, the demo MCP server, the HITL fake model and two
// coordinators on a fresh PostgreSQL database. cfg adjusts the config (TTL, detach).
func startReplicaPair(t *testing.T, cfg testConfig) *replicaPair {
	t.Helper()
	requirePeers(t)
	dsn := pgtest.DSN(t)
	p := &replicaPair{peer: startA2APeerEnv(t)}
	demo := startDemoMCPHTTP(t)
	p.model = fakellm.Start(hitlModel)
	t.Cleanup(p.model.Close)
	cfg.LLMURL, cfg.Store = p.model.URL, dsn
	cfg.Agents = []agentEntry{{Name: "peer", URL: p.peer}}
	cfg.InputRequired = "ask_user"
	cfg.MCP = []mcpServerEntry{{Name: "demo", URL: demo}}
	cfg.ToolTimeout = "30s"
	text := cfg.yaml() + "replication:\n  heartbeat: 200ms\n  lease: 2s\n"
	p.a = startHITLCoordinator(t, text)
	p.b = startHITLCoordinator(t, text)
	return p
}

// streamed is one POST /agui or reconnect response, read to its end.
type streamed struct {
	status int
	// errBody is the body of a non-200 response.
	errBody map[string]any
	frames  []sseFrame
	events  []map[string]any
}

// last is the stream's last event (nil when it has none).
func (s streamed) last() map[string]any {
	if len(s.events) == 0 {
		return nil
	}
	return s.events[len(s.events)-1]
}

// readStreamed reads a response to its end.
func readStreamed(t *testing.T, resp *http.Response) streamed {
	t.Helper()
	defer resp.Body.Close()
	out := streamed{status: resp.StatusCode}
	if resp.StatusCode != http.StatusOK {
		raw, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
		_ = json.Unmarshal(raw, &out.errBody)
		return out
	}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 16<<20)
	out.frames = readFrames(t, sc, func(sseFrame) bool { return false })
	for _, f := range out.frames {
		var ev map[string]any
		require.NoError(t, json.Unmarshal([]byte(f.Data), &ev), "frame %q", f.Data)
		out.events = append(out.events, ev)
	}
	return out
}

// postRunBody POSTs a RunAgentInput to base and reads the whole response.
func postRunBody(t *testing.T, base string, in map[string]any) streamed {
	t.Helper()
	b, err := json.Marshal(in)
	require.NoError(t, err)
	return readStreamed(t, postJSON(t, base+"/agui", string(b)))
}

// hitlInput is a 1.0 RunAgentInput on thread whose user text makes the HITL model call
// calls.
func hitlInput(thread, runID string, calls ...hitlCall) map[string]any {
	return runInput(thread, runID, hitlText(calls...))
}

// expiryScanEvery is how often the coordinator looks for expired interrupts with
// interrupts.ttl 1s (cmd/coordinator: expiryInterval).
const expiryScanEvery = time.Second

// resumeInput answers interrupt id with payload, on thread, with no new message.
func resumeInput(thread, runID, id string, payload map[string]any) map[string]any {
	in := runInput(thread, runID, "")
	in["messages"] = []any{}
	in["resume"] = []any{resumeEntry(id, resolved(payload))}
	return in
}

// interruptsOf returns the interrupts of a stream's RUN_FINISHED{outcome: interrupt}.
func interruptsOf(t *testing.T, s streamed) []map[string]any {
	t.Helper()
	last := s.last()
	require.NotNil(t, last, "an empty stream (HTTP %d %v)", s.status, s.errBody)
	require.Equal(t, "RUN_FINISHED", last["type"], "events: %v", eventTypes(s.events))
	outcome, _ := last["outcome"].(map[string]any)
	require.Equal(t, "interrupt", outcome["type"], "outcome: %v", outcome)
	var out []map[string]any
	list, _ := outcome["interrupts"].([]any)
	for _, in := range list {
		m, _ := in.(map[string]any)
		out = append(out, m)
	}
	return out
}

// assertSucceeded asserts that a stream ended with RUN_FINISHED{success}.
func assertSucceeded(t *testing.T, s streamed) {
	t.Helper()
	require.Equal(t, http.StatusOK, s.status, "HTTP status; body %v", s.errBody)
	last := s.last()
	require.NotNil(t, last)
	assert.Equal(t, "RUN_FINISHED", last["type"], "events: %v; last %v", eventTypes(s.events), last)
	assert.Equal(t, map[string]any{"type": "success"}, last["outcome"])
}

// peerFollowUps returns how many follow-up messages reached each parked task of the peer.
func peerFollowUps(t *testing.T, peer string) map[string]int {
	t.Helper()
	resp, err := http.Get(peer + "/test/log")
	require.NoError(t, err)
	defer resp.Body.Close()
	var log struct {
		FollowUps map[string]int `json:"followUps"`
	}
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&log))
	return log.FollowUps
}

// count returns how often s occurs in list.
func count(list []string, s string) int {
	n := 0
	for _, x := range list {
		if x == s {
			n++
		}
	}
	return n
}

// raiseA2AInput runs, on base, a delegation that the peer parks in input-required and
// returns the interrupt and its tool call id.
func raiseA2AInput(t *testing.T, base, thread string) (in map[string]any, callID string) {
	t.Helper()
	first := postRunBody(t, base, hitlInput(thread, newThreadID("run"), hitlCall{Name: "peer", Args: map[string]any{"prompt": "input please"}}))
	ins := interruptsOf(t, first)
	require.Len(t, ins, 1)
	in = ins[0]
	require.Equal(t, "input_required", in["reason"])
	require.NotEmpty(t, a2aTaskOf(in), "metadata.a2a.taskId")
	callID, _ = in["toolCallId"].(string)
	return in, callID
}

func TestReplicasResumeAndReconnect(t *testing.T) {
	t.Parallel()
	p := startReplicaPair(t, testConfig{OnDisconnect: "detach", ReconnectGrace: "1500ms"})

	t.Run("A2A input-required resumed through the other replica", func(t *testing.T) {
		thread := newThreadID("rep-a2a")
		in, callID := raiseA2AInput(t, p.a.URL, thread)
		task := a2aTaskOf(in)

		r := postRunBody(t, p.b.URL, resumeInput(thread, newThreadID("run"), in["id"].(string), map[string]any{"text": "blue"}))
		assertSucceeded(t, r)
		res := toolResults(r.events)[callID]
		require.Len(t, res, 1, "one TOOL_CALL_RESULT for the original call; events %v", eventTypes(r.events))
		assert.True(t, strings.HasPrefix(res[0], "[COMPLETED]\n"), "result %q", res[0])
		assert.Contains(t, res[0], "done: blue", "the answer reached the task")
		assert.Equal(t, 1, peerFollowUps(t, p.peer)[task], "the answer reached the sub-agent once")
		_, tasks := peerLog(t, p.peer)
		assert.Equal(t, "TASK_STATE_COMPLETED", tasks[task])
	})

	t.Run("MRTR elicitation resumed through the other replica", func(t *testing.T) {
		thread := newThreadID("rep-mrtr")
		first := postRunBody(t, p.b.URL, hitlInput(thread, newThreadID("run"), hitlCall{Name: "demo__deploy", Args: map[string]any{"service": "api"}}))
		ins := interruptsOf(t, first)
		require.Len(t, ins, 1)
		in := ins[0]
		md, _ := in["metadata"].(map[string]any)
		assert.Equal(t, map[string]any{"server": "demo", "tool": "deploy", "mode": "form"}, md["mcp"], "an MRTR form elicitation")
		callID, _ := in["toolCallId"].(string)

		r := postRunBody(t, p.a.URL, resumeInput(thread, newThreadID("run"), in["id"].(string),
			map[string]any{"action": "accept", "content": map[string]any{"environment": "staging"}}))
		assertSucceeded(t, r)
		res := toolResults(r.events)[callID]
		require.Len(t, res, 1, "one TOOL_CALL_RESULT for the original call; events %v", eventTypes(r.events))
		assert.Equal(t, "[OK]\nDeployed api (latest) to staging. (Demo: nothing was deployed.)", res[0])
		assert.Equal(t, res[0], toolMessagesSeen(p.model)[callID], "what the model got")

		// The same resume again, through the first replica: nothing is delivered twice.
		dup := postRunBody(t, p.b.URL, resumeInput(thread, newThreadID("run"), in["id"].(string),
			map[string]any{"action": "accept", "content": map[string]any{"environment": "staging"}}))
		require.Equal(t, http.StatusOK, dup.status)
		assert.Empty(t, toolResults(dup.events)[callID], "a duplicate resume delivers nothing")
	})

	t.Run("the same resume on both replicas at once is delivered once", func(t *testing.T) {
		for i := range 3 { // a few rounds: the race goes either way
			thread := newThreadID(fmt.Sprintf("rep-dup%d", i))
			in, callID := raiseA2AInput(t, p.a.URL, thread)
			task := a2aTaskOf(in)
			runID := newThreadID("run") // the same request, byte for byte, to both
			body := resumeInput(thread, runID, in["id"].(string), map[string]any{"text": "blue"})

			var wg sync.WaitGroup
			start := make(chan struct{})
			got := make([]streamed, 2)
			for j, base := range []string{p.a.URL, p.b.URL} {
				wg.Go(func() {
					<-start
					got[j] = postRunBody(t, base, body)
				})
			}
			close(start)
			wg.Wait()

			delivered := 0
			for j, s := range got {
				switch s.status {
				case http.StatusOK:
					last := s.last()
					require.NotNil(t, last, "replica %d: an empty stream", j)
					assert.Contains(t, []any{"RUN_FINISHED", "RUN_ERROR"}, last["type"],
						"replica %d: a stream that ends with a terminal event: %v", j, eventTypes(s.events))
					delivered += len(toolResults(s.events)[callID])
				case http.StatusConflict:
					assert.NotEmpty(t, s.errBody["error"], "replica %d: a 409 says why: %v", j, s.errBody)
				default:
					t.Errorf("replica %d: HTTP %d %v; want 200 or 409", j, s.status, s.errBody)
				}
			}
			for j, s := range got {
				t.Logf("round %d, replica %d: HTTP %d %v events %v", i, j, s.status, s.errBody, eventTypes(s.events))
			}
			assert.Equal(t, 1, delivered, "round %d: the original call's result streamed once in all", i)
			assert.Equal(t, 1, peerFollowUps(t, p.peer)[task], "round %d: the peer got the answer once", i)
			_, tasks := peerLog(t, p.peer)
			assert.Equal(t, "TASK_STATE_COMPLETED", tasks[task])
		}
	})

	t.Run("reconnect through the other replica follows the run; detach holds it past the grace", func(t *testing.T) {
		thread := newThreadID("rep-reconnect")
		runID := "run-" + thread
		in := hitlInput(thread, runID, hitlCall{Name: "peer", Args: map[string]any{"prompt": "slow work"}})
		b, err := json.Marshal(in)
		require.NoError(t, err)
		live := postJSON(t, p.a.URL+"/agui", string(b))
		require.Equal(t, http.StatusOK, live.StatusCode)
		sc := bufio.NewScanner(live.Body)
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		// Mid-delegation: two progress steps of the sub-agent (its task exists at the peer).
		steps := 0
		before := readFrames(t, sc, func(f sseFrame) bool {
			if strings.Contains(f.Data, `"TEXT_MESSAGE_CONTENT"`) && strings.Contains(f.Data, `"subagentRunId"`) {
				steps++
			}
			return steps == 2
		})
		require.Equal(t, 2, steps, "the sub-agent's progress")
		live.Body.Close() // dropped: under detach the run goes on
		lastID := before[len(before)-1].ID
		_, tasks := peerLog(t, p.peer)
		known := map[string]bool{}
		for id := range tasks {
			known[id] = true
		}

		req, err := http.NewRequest(http.MethodGet, p.b.URL+"/agui/threads/"+thread+"/runs/"+runID+"/events", nil)
		require.NoError(t, err)
		req.Header.Set("Last-Event-ID", fmt.Sprint(lastID))
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		after := readStreamed(t, resp) // the slow task runs ~10 s: many graces of 1.5 s
		require.Equal(t, http.StatusOK, after.status, "%v", after.errBody)

		// Restated frames (the open run and message) carry the client's id; the rest
		// continue the numbering without a gap.
		var next []sseFrame
		for _, f := range after.frames {
			if f.ID <= lastID {
				assert.Equal(t, lastID, f.ID, "a restated frame carries the client's id")
				assert.Regexp(t, `"type":"(RUN_STARTED|TEXT_MESSAGE_START|TOOL_CALL_START|SUBAGENT_STARTED|STEP_STARTED|ACTIVITY_SNAPSHOT|STATE_SNAPSHOT|MESSAGES_SNAPSHOT)"`, f.Data, "only start events are restated")
				continue
			}
			next = append(next, f)
		}
		require.NotEmpty(t, next)
		for i, f := range next {
			assert.Equal(t, lastID+int64(i)+1, f.ID, "ids continue without gap or repeat")
		}
		last := after.last()
		assert.Equal(t, "RUN_FINISHED", last["type"], "followed to the end: %v", eventTypes(after.events))
		assert.Equal(t, map[string]any{"type": "success"}, last["outcome"], "the run completed: the owner did not cancel it")

		// The whole log, read through the owner, is exactly the two parts.
		req, err = http.NewRequest(http.MethodGet, p.a.URL+"/agui/threads/"+thread+"/runs/"+runID+"/events", nil)
		require.NoError(t, err)
		resp, err = http.DefaultClient.Do(req)
		require.NoError(t, err)
		whole := readStreamed(t, resp)
		want := framesData(whole.frames)
		assert.Equal(t, want, append(framesData(before), framesData(next)...), "before + after = the whole log")

		cancels, _ := peerLog(t, p.peer)
		for id := range known {
			assert.NotContains(t, cancels, id, "no CancelTask for a followed run")
		}
		sub := delegationsOf(t, whole.events)
		require.Len(t, sub, 1)
		require.Len(t, sub[0].Results, 1)
		assert.Contains(t, sub[0].Results[0], "[COMPLETED]", "the delegation completed")
	})
}

// TestReplicasExpiryOnce: interrupts raised on both replicas expire (interrupts.ttl 1s);
// both replicas sweep (every second with this TTL), each parked task gets exactly one
// CancelTask, and a resume that arrives after the sweep, through either replica, gets
// INTERRUPT_EXPIRED and cancels nothing again.
func TestReplicasExpiryOnce(t *testing.T) {
	t.Parallel()
	p := startReplicaPair(t, testConfig{TTL: "1s"})
	var tasks, threads []string
	var ins []map[string]any
	for i := range 6 {
		base := []string{p.a.URL, p.b.URL}[i%2]
		thread := newThreadID(fmt.Sprintf("rep-exp%d", i))
		in, _ := raiseA2AInput(t, base, thread)
		tasks = append(tasks, a2aTaskOf(in))
		threads = append(threads, thread)
		ins = append(ins, in)
	}
	expired := time.Now().Add(time.Second)
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		_, states := peerLog(t, p.peer)
		for _, id := range tasks {
			assert.Equal(c, "TASK_STATE_CANCELED", states[id], "task %s", id)
		}
	}, eventualWait, 100*time.Millisecond, "every parked task cancelled on expiry")
	// Each replica has scanned at least once since the interrupts expired: still one
	// CancelTask per task.
	time.Sleep(time.Until(expired.Add(2 * expiryScanEvery)))
	for i := range 2 {
		base := []string{p.b.URL, p.a.URL}[i] // the replica that did not raise it
		r := postRunBody(t, base, resumeInput(threads[i], newThreadID("run"), ins[i]["id"].(string), map[string]any{"text": "blue"}))
		require.Equal(t, http.StatusOK, r.status, "%v", r.errBody)
		assert.Equal(t, []string{"RUN_STARTED", "RUN_ERROR"}, eventTypes(r.events))
		assert.Equal(t, "INTERRUPT_EXPIRED", r.last()["code"], "a resume after the sweep: %v", r.last())
	}
	cancels, _ := peerLog(t, p.peer)
	for _, id := range tasks {
		assert.Equal(t, 1, count(cancels, id), "CancelTask for task %s", id)
	}
	assert.Empty(t, peerFollowUps(t, p.peer), "no answer reached an expired task")
}
