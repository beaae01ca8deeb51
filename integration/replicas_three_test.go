package integration

// Three coordinator processes on one PostgreSQL database behind a round-robin
// reverse proxy without stickiness: the client never picks a replica. A run with a slow
// delegation makes a second POST on its thread 409 (on each replica), is followed mid-run
// by a reconnect (exactly the log), and is stopped (the stream ends cancelled, the JS peer
// records CancelTask); A2A input-required interrupts are raised and resumed (the answer
// reaches the peer once).
//
// Then resumes are cut (design/takeover-resume.md), each on a replica the test picks:
// kill -9 while the resumed task's continuation streams (the survivor follows the task,
// the model gets its [COMPLETED] result, the run finishes), kill -9 during the model's
// final turn (the survivor asks again and the whole answer streams), kill -9 after the
// answer reached the agent but before the task moved on (never sent twice: the question is
// raised again, and its answer takes the first one's outcome), and SIGTERM with hand-off
// while the continuation streams. The peer counts follow-ups: each answer arrives once.
//
// One topology serves every subtest; the cuts come last because the proxy would route some
// requests to a dead replica afterwards.

import (
	"bufio"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/baton-dev/baton/internal/testutil/fakellm"
	"github.com/baton-dev/baton/internal/testutil/pgtest"
)

// getEvents opens GET …/runs/{run}/events on base, after lastID when it is positive.
func getEvents(t *testing.T, base, thread, runID string, lastID int64) *http.Response {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, base+"/agui/threads/"+thread+"/runs/"+runID+"/events", nil)
	require.NoError(t, err)
	if lastID > 0 {
		req.Header.Set("Last-Event-ID", fmt.Sprint(lastID))
	}
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	return resp
}

// isSubagentProgress reports whether a frame is text streamed by a sub-agent.
func isSubagentProgress(f sseFrame) bool {
	return strings.Contains(f.Data, `"TEXT_MESSAGE_CONTENT"`) && strings.Contains(f.Data, `"subagentRunId"`)
}

// slowFinalText is the model's final answer after a resumed task answered "done: finalslow":
// streamed a word every slowFinalDelay, so that a test can kill its replica mid-turn.
const (
	slowFinalText  = "the final answer arrives word by word so that its replica can be killed in the middle of the turn"
	slowFinalDelay = 250 * time.Millisecond
)

// threeModel is hitlModel, except for the slow final turn after a "finalslow" answer.
func threeModel(req fakellm.Request) fakellm.Reply {
	if last := req.Last(); last.Role == "tool" && strings.Contains(last.Content, "done: finalslow") {
		return fakellm.Reply{Text: slowFinalText, Delay: slowFinalDelay}
	}
	return hitlModel(req)
}

// openLive posts body to base's /agui and returns the run's live stream (closed when the
// test ends) and a scanner on it.
func openLive(t *testing.T, base, body string) (*http.Response, *bufio.Scanner) {
	t.Helper()
	live := postJSON(t, base+"/agui", body)
	t.Cleanup(func() { live.Body.Close() })
	require.Equal(t, http.StatusOK, live.StatusCode)
	sc := bufio.NewScanner(live.Body)
	sc.Buffer(make([]byte, 1<<20), 16<<20)
	return live, sc
}

// resumeOn posts to base the resume of thread as run r1 (what followRun reads), answering
// interrupt in with text, and returns its live stream.
func resumeOn(t *testing.T, base, thread string, in map[string]any, text string) (*http.Response, *bufio.Scanner) {
	t.Helper()
	return openLive(t, base, string(mustJSON(t, resumeInput(thread, "r1", in["id"].(string), map[string]any{"text": text}))))
}

// readProgress reads sc up to the second frame of sub-agent progress; what names that
// progress in the failure message.
func readProgress(t *testing.T, sc *bufio.Scanner, what string) []sseFrame {
	t.Helper()
	steps := 0
	before := readFrames(t, sc, func(f sseFrame) bool {
		if isSubagentProgress(f) {
			steps++
		}
		return steps == 2
	})
	require.Equal(t, 2, steps, "%s: %v", what, eventTypesOf(before))
	return before
}

// followToSuccess follows run r1 of thread on a survivor after lastID to its end, which
// must be a success; what says why the run must go on.
func followToSuccess(t *testing.T, base, thread string, lastID int64, what string) []takeoverFrame {
	t.Helper()
	frames := followRun(t, base, thread, lastID, 45*time.Second)
	last := frames[len(frames)-1].Event
	require.Equal(t, "RUN_FINISHED", last["type"], "%s: %v; last %v", what, frameTypes(frames), last)
	assert.Equal(t, map[string]any{"type": "success"}, last["outcome"])
	return frames
}

// assertOfficialReplay checks that the official client accepts the stream of run r1 after
// lastID without a warning; what names the stream.
func assertOfficialReplay(t *testing.T, base, thread string, lastID int64, what string) aguiResult {
	t.Helper()
	res := officialReplay(t, base, thread, lastID)
	require.Nil(t, res.Failed, "the official client rejected the %s", what)
	assert.Empty(t, res.Warnings, "the official client warned about the %s", what)
	return res
}

// assertModelGotResult checks that the model got the task's [COMPLETED] result for
// callID, containing want.
func assertModelGotResult(t *testing.T, model *fakellm.Server, callID, want string) {
	t.Helper()
	seen := toolMessagesSeen(model)[callID]
	assert.True(t, strings.HasPrefix(seen, "[COMPLETED]\n"), "the model got the task's result: %q", seen)
	assert.Contains(t, seen, want)
}

// assertSentOnce checks that the answer starting with answer reached the peer's task once
// and returns the peer's call log.
func assertSentOnce(t *testing.T, peer, task, answer string) peerCalls {
	t.Helper()
	calls := peerCallLog(t, peer)
	assert.Equal(t, 1, peerFollowUps(t, peer)[task], "the answer reached the sub-agent exactly once")
	assert.Equal(t, 1, countOf(calls.Sends, task+":"+answer), "the answer was sent once: %v", calls.Sends)
	return calls
}

func TestThreeReplicasBehindProxy(t *testing.T) {
	t.Parallel()
	top := t // a replica restarted inside a subtest belongs to the whole test
	requirePeers(t)
	dsn := pgtest.DSN(t)
	peer := startA2APeerEnv(t, "DELAY_MS=5000")
	demo := startDemoMCPHTTP(t)
	model := fakellm.Start(threeModel)
	t.Cleanup(model.Close)
	cfg := testConfig{LLMURL: model.URL, Store: dsn, Agents: []agentEntry{{Name: "peer", URL: peer}},
		InputRequired: "ask_user", MCP: []mcpServerEntry{{Name: "demo", URL: demo}}, ToolTimeout: "30s", Grace: "1s"}.yaml() +
		"replication:\n  heartbeat: 200ms\n  lease: 1s\n"
	reps := []*hitlCoord{startHITLCoordinator(t, cfg), startHITLCoordinator(t, cfg), startHITLCoordinator(t, cfg)}
	proxy := startRoundRobin(t, reps[0].URL, reps[1].URL, reps[2].URL)

	t.Run("busy thread, reconnect mid-run and stop, all through the proxy", func(t *testing.T) {
		thread := newThreadID("three-slow")
		runID := "run-" + thread
		b, err := json.Marshal(hitlInput(thread, runID, hitlCall{Name: "peer", Args: map[string]any{"prompt": "slow work"}}))
		require.NoError(t, err)
		_, tasksBefore := peerLog(t, peer)
		_, sc := openLive(t, proxy, string(b))
		before := readProgress(t, sc, "the sub-agent's progress")
		lastID := before[len(before)-1].ID

		// A second run on the thread, through the proxy (so on another replica than the
		// first request's, whichever that was): 409 each time.
		for i := range 3 {
			busy := postJSON(t, proxy+"/agui", strings.Replace(string(b), runID, fmt.Sprintf("%s-busy%d", runID, i), 1))
			assert.Equal(t, http.StatusConflict, busy.StatusCode, "attempt %d: the thread is busy on every replica", i)
			busy.Body.Close()
		}

		// A reconnect through the proxy, mid-run, followed to the run's end.
		reconnected := make(chan streamed, 1)
		resp := getEvents(t, proxy, thread, runID, lastID)
		require.Equal(t, http.StatusOK, resp.StatusCode)
		go func() { reconnected <- readStreamed(t, resp) }()

		stop := postJSON(t, proxy+"/agui/threads/"+thread+"/runs/"+runID+"/stop", "{}")
		assert.Equal(t, http.StatusAccepted, stop.StatusCode)
		stop.Body.Close()

		rest := readFrames(t, sc, func(sseFrame) bool { return false })
		require.NotEmpty(t, rest)
		var last map[string]any
		require.NoError(t, json.Unmarshal([]byte(rest[len(rest)-1].Data), &last))
		assert.Equal(t, "RUN_FINISHED", last["type"], "live stream: %v", eventTypesOf(rest))
		assert.Equal(t, map[string]any{"type": "cancelled"}, last["outcome"])

		var after streamed
		select {
		case after = <-reconnected:
		case <-time.After(30 * time.Second):
			t.Fatal("the reconnected stream did not end after the stop")
		}
		var next []sseFrame
		for _, f := range after.frames {
			if f.ID <= lastID {
				assert.Equal(t, lastID, f.ID, "a restated frame carries the client's id")
				continue
			}
			next = append(next, f)
		}
		require.NotEmpty(t, next)
		for i, f := range next {
			assert.Equal(t, lastID+int64(i)+1, f.ID, "ids continue without gap or repeat")
		}
		assert.Equal(t, last, after.last(), "the reconnect ends with the live stream's terminal event")

		// The whole log, through the proxy (another replica again), is the two parts.
		whole := readStreamed(t, getEvents(t, proxy, thread, runID, 0))
		assert.Equal(t, framesData(whole.frames), append(framesData(before), framesData(next)...), "before + reconnect = the whole log")
		assert.Equal(t, framesData(whole.frames), append(framesData(before), framesData(rest)...), "the live stream = the whole log")

		// The peer's task of this run got CancelTask (beside the stream's end: bounded wait).
		require.EventuallyWithT(t, func(c *assert.CollectT) {
			cancels, tasks := peerLog(t, peer)
			var mine []string
			for id := range tasks {
				if _, old := tasksBefore[id]; !old {
					mine = append(mine, id)
				}
			}
			if assert.Len(c, mine, 1, "one task of this run at the peer") {
				assert.Equal(c, 1, count(cancels, mine[0]), "CancelTask once")
				assert.Equal(c, "TASK_STATE_CANCELED", tasks[mine[0]])
			}
		}, eventualWait, 50*time.Millisecond)

		// The thread is free again, through the proxy.
		next2 := postRunBody(t, proxy, hitlInput(thread, runID+"-after", hitlCall{Name: "peer", Args: map[string]any{"prompt": "complete it"}}))
		assertSucceeded(t, next2)
	})

	t.Run("A2A input-required raised and resumed through the proxy", func(t *testing.T) {
		for i := range 3 { // the interrupt and its resume land on different replicas
			thread := newThreadID(fmt.Sprintf("three-input%d", i))
			in, callID := raiseA2AInput(t, proxy, thread)
			task := a2aTaskOf(in)
			r := postRunBody(t, proxy, resumeInput(thread, newThreadID("run"), in["id"].(string), map[string]any{"text": "blue"}))
			assertSucceeded(t, r)
			res := toolResults(r.events)[callID]
			require.Len(t, res, 1, "round %d: one TOOL_CALL_RESULT for the original call; events %v", i, eventTypes(r.events))
			assert.True(t, strings.HasPrefix(res[0], "[COMPLETED]\n"), "result %q", res[0])
			assert.Contains(t, res[0], "done: blue", "the answer reached the task")
			assert.Equal(t, res[0], toolMessagesSeen(model)[callID], "what the model got")
			assert.Equal(t, 1, peerFollowUps(t, peer)[task], "round %d: the answer reached the sub-agent once", i)
			_, tasks := peerLog(t, peer)
			assert.Equal(t, "TASK_STATE_COMPLETED", tasks[task])
		}
	})

	t.Run("kill -9 while a resumed task's continuation streams", func(t *testing.T) {
		// The resume must reach the replica that is killed: this one request picks it.
		victim, survivor := reps[0], reps[1]
		thread := newThreadID("three-kill")
		in, callID := raiseA2AInput(t, proxy, thread)
		task := a2aTaskOf(in)
		// followRun reads run r1 (the interrupt was raised by a run of another id).
		live, sc := resumeOn(t, victim.URL, thread, in, "slowly blue")
		before := readProgress(t, sc, "the continuation's progress")
		require.Equal(t, 1, peerFollowUps(t, peer)[task], "the answer reached the sub-agent")
		lastID := before[len(before)-1].ID
		victim.kill(t)
		live.Body.Close()

		frames := followToSuccess(t, survivor.URL, thread, lastID, "the run goes on on a survivor")
		typs := frameTypes(frames)
		var continued []takeoverFrame
		results := 0
		for _, f := range frames {
			if f.ID > lastID {
				continued = append(continued, f)
			}
			if f.Event["type"] == "TOOL_CALL_RESULT" && f.Event["toolCallId"] == callID {
				results++
			}
		}
		require.NotEmpty(t, continued, "events after the reconnect point")
		for i := 1; i < len(continued); i++ {
			assert.Equal(t, continued[i-1].ID+1, continued[i].ID, "the log's numbering continues without gap")
		}
		assert.Equal(t, 1, results, "one result for the resumed call: %v", typs)
		// The official client accepts the continued stream from the same point.
		res := assertOfficialReplay(t, survivor.URL, thread, lastID, "continued stream")
		assert.True(t, res.Terminal)

		assertModelGotResult(t, model, callID, "done: slowly blue")

		calls := assertSentOnce(t, peer, task, "slowly")
		assert.Equal(t, "TASK_STATE_COMPLETED", calls.Tasks[task])
		assert.NotContains(t, calls.Cancels, task, "a run that goes on does not cancel its task")
		// The survivor runs the resume's setup again: it reads the task by id, finds it
		// moved on (working), and follows it to its end instead of answering again.
		assert.Contains(t, append(calls.Gets, calls.Subscribes...), task, "the survivor followed the task by id")
		victim.restart(top)
	})

	t.Run("kill -9 during the model's final turn after a resume", func(t *testing.T) {
		victim, survivor := reps[0], reps[2]
		thread := newThreadID("three-kill-final")
		in, callID := raiseA2AInput(t, survivor.URL, thread)
		task := a2aTaskOf(in)
		live, sc := resumeOn(t, victim.URL, thread, in, "finalslow")
		// After the call's result, the first words of the model's final text.
		resulted, words := false, 0
		before := readFrames(t, sc, func(f sseFrame) bool {
			if strings.Contains(f.Data, `"TOOL_CALL_RESULT"`) && strings.Contains(f.Data, callID) {
				resulted = true
			}
			if resulted && strings.Contains(f.Data, `"TEXT_MESSAGE_CONTENT"`) && !strings.Contains(f.Data, `"subagentRunId"`) {
				words++
			}
			return words == 2
		})
		require.Equal(t, 2, words, "the model's final turn streams: %v", eventTypesOf(before))
		lastID := before[len(before)-1].ID
		victim.kill(t)
		live.Body.Close()

		frames := followToSuccess(t, survivor.URL, thread, lastID, "the run goes on on a survivor")
		// The cut message is closed; the model is asked again and its whole answer streams.
		texts := map[string]string{}
		var order []string
		for _, f := range frames {
			if f.ID <= lastID || f.Event["type"] != "TEXT_MESSAGE_CONTENT" || f.Event["subagentRunId"] != nil {
				continue
			}
			id, _ := f.Event["messageId"].(string)
			if _, ok := texts[id]; !ok {
				order = append(order, id)
			}
			delta, _ := f.Event["delta"].(string)
			texts[id] += delta
		}
		require.NotEmpty(t, order, "the final text after the takeover: %v", frameTypes(frames))
		assert.Equal(t, slowFinalText, strings.TrimSpace(texts[order[len(order)-1]]), "the model's final turn, whole, on the survivor")
		assertOfficialReplay(t, survivor.URL, thread, lastID, "continued stream")

		// The model was asked again with the task's result (not the question again).
		asked := 0
		for _, r := range model.Requests() {
			if l := r.Last(); l.Role == "tool" && l.ToolCallID == callID {
				asked++
				assert.True(t, strings.HasPrefix(l.Content, "[COMPLETED]\n"), "the result the model got: %q", l.Content)
			}
		}
		assert.Equal(t, 2, asked, "the final turn was asked for twice: cut, then on the survivor")
		calls := assertSentOnce(t, peer, task, "finalslow")
		assert.Equal(t, "TASK_STATE_COMPLETED", calls.Tasks[task])
		assert.NotContains(t, calls.Cancels, task)
	})

	t.Run("kill -9 after the answer reached the agent, before the task moved on", func(t *testing.T) {
		// The peer holds a "later" answer DELAY_MS (5 s) before the task leaves
		// input-required: the survivor (lease 1 s) takes over inside that window.
		victim, survivor := reps[0], reps[2]
		victim.restart(top)
		thread := newThreadID("three-kill-early")
		in, callID := raiseA2AInput(t, survivor.URL, thread)
		task := a2aTaskOf(in)
		live, _ := resumeOn(t, victim.URL, thread, in, "later blue")
		require.Eventually(t, func() bool { return peerFollowUps(t, peer)[task] == 1 }, eventualWait, 10*time.Millisecond,
			"the answer reached the sub-agent")
		victim.kill(t)
		live.Body.Close()

		// The survivor cannot know whether the answer arrived: it never sends it again,
		// follows the task, and, the task still waiting, raises its question again.
		frames := followRun(t, survivor.URL, thread, 0, 45*time.Second)
		last := frames[len(frames)-1].Event
		require.Equal(t, "RUN_FINISHED", last["type"], "%v", frameTypes(frames))
		outcome, _ := last["outcome"].(map[string]any)
		require.Equal(t, "interrupt", outcome["type"], "the task still waits: its question again: %v", last)
		again, _ := outcome["interrupts"].([]any)
		require.Len(t, again, 1)
		in2, _ := again[0].(map[string]any)
		assert.Equal(t, task, a2aTaskOf(in2), "the same task asks")
		assert.Equal(t, "input_required", in2["reason"])
		assertOfficialReplay(t, survivor.URL, thread, 0, "stream taken over")
		assertSentOnce(t, peer, task, "later")

		// The agent moves on with the first answer; the second one finds the task done and
		// takes its outcome instead of answering again.
		require.Eventually(t, func() bool {
			_, tasks := peerLog(t, peer)
			return tasks[task] == "TASK_STATE_COMPLETED"
		}, eventualWait, 50*time.Millisecond, "the task completes with the first answer")
		r := postRunBody(t, proxy, resumeInput(thread, newThreadID("run"), in2["id"].(string), map[string]any{"text": "green"}))
		assertSucceeded(t, r)
		assertModelGotResult(t, model, callID, "done: later blue") // the first answer's outcome
		calls := peerCallLog(t, peer)
		assert.Equal(t, 1, peerFollowUps(t, peer)[task], "nothing more reached the sub-agent")
		assert.Zero(t, countOf(calls.Sends, task+":green"), "the second answer was not sent: %v", calls.Sends)
	})

	t.Run("SIGTERM hands off a resume while its continuation streams", func(t *testing.T) {
		// on_shutdown defaults to handoff on PostgreSQL: after the 1 s grace the run is
		// released, not cancelled, and another replica goes on with it at once.
		victim, survivor := reps[1], reps[2] // reps[0] was killed last
		thread := newThreadID("three-handoff")
		in, callID := raiseA2AInput(t, survivor.URL, thread)
		task := a2aTaskOf(in)
		live, sc := resumeOn(t, victim.URL, thread, in, "slowly handed")
		before := readProgress(t, sc, "the continuation's progress")
		lastID := before[len(before)-1].ID
		victim.stop(t) // SIGTERM: exits 0 after the grace, handing the run off
		live.Body.Close()

		followToSuccess(t, survivor.URL, thread, lastID, "the run goes on after the hand-off")
		assertModelGotResult(t, model, callID, "done: slowly handed")
		calls := assertSentOnce(t, peer, task, "slowly")
		assert.Equal(t, "TASK_STATE_COMPLETED", calls.Tasks[task])
		assert.NotContains(t, calls.Cancels, task, "a hand-off cancels nothing")
	})
}
