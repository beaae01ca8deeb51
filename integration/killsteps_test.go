package integration

// kill -9 during each kind of step (design/fencing.md, "kill -9 during a step"): two
// coordinator processes on one PostgreSQL with a short lease, an MCP server that counts
// every call per tool and item, and the JS A2A peer, which records sends, follow-ups,
// subscriptions, cancels and each task's state. The owner of a run is killed (SIGKILL of
// its process group) at an observable point of one kind of step; the other replica takes
// the run over and ends it. Then: each side effect happened at most once, or the model (or
// the user) was told it is in doubt; one TOOL_CALL_RESULT per call; the run's log read back
// from the start has dense ids and one terminal event; the journal shows the takeover and
// the step in doubt; every task the peer started has ended.
//
// Kinds proven elsewhere with the same kill: an A2A send followed by id (TestTakeover),
// a non-idempotent and a read-only MCP call in one turn (TestTakeoverMCPCalls), an approved
// call out at the kill, single process (TestApprovalsKillWhileCallOut). The cases below
// repeat the MCP and A2A-send kinds with the journal and log checks those tests lack.

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/baton-dev/baton/internal/testutil/fakellm"
	"github.com/baton-dev/baton/internal/testutil/pgtest"
	"github.com/baton-dev/baton/llm"
)

// stepsModel scripts the fake model from the run's user message "ks <kind> <item>" (the
// last user message of the request) and the tool results after it:
//
//	model    charge item, then a reply that streams slowly the first time it is asked
//	charge   charge item          lookup  look item up        approve  refund item
//	send     delegate "slow <item>" to the peer (a ~10 s task)
//	late     delegate "delay <item>": the peer makes its task, and answers, only DELAY_MS later
//	continue delegate "input" (input-required), then answer the task "slowly" (~10 s)
//
// and "done" once the kind's calls have results.
type stepsModel struct {
	mu     sync.Mutex
	held   map[string]chan struct{} // item -> closed when the held model turn was asked
	asked  map[string]int           // item -> model requests after the first tool result
	holdOn map[string]bool
}

func newStepsModel() *stepsModel {
	return &stepsModel{held: map[string]chan struct{}{}, asked: map[string]int{}, holdOn: map[string]bool{}}
}

// holdTurn makes the model's second turn for item stream slowly the first time, and returns
// a channel closed when it is asked.
func (m *stepsModel) holdTurn(item string) <-chan struct{} {
	m.mu.Lock()
	defer m.mu.Unlock()
	c := make(chan struct{})
	m.held[item], m.holdOn[item] = c, true
	return c
}

func (m *stepsModel) reply(req fakellm.Request) fakellm.Reply {
	at := -1
	for i, msg := range req.Messages {
		if msg.Role == "user" {
			at = i
		}
	}
	if at < 0 {
		return fakellm.Reply{Text: "fake model: no user message"}
	}
	f := strings.Fields(req.Messages[at].Content)
	if len(f) != 3 || f[0] != "ks" {
		return fakellm.Reply{Text: "fake model: not a ks message"}
	}
	kind, item := f[1], f[2]
	var results []fakellm.Message
	for _, msg := range req.Messages[at+1:] {
		if msg.Role == "tool" {
			results = append(results, msg)
		}
	}
	call := func(name string, args map[string]string) fakellm.Reply {
		b, _ := json.Marshal(args)
		return fakellm.Reply{ToolCalls: []llm.ToolCall{{ID: fmt.Sprintf("ks_%s_%d", item, len(results)+1), Name: name, Arguments: string(b)}}}
	}
	done := fakellm.Reply{Text: modelDoneText}
	switch {
	case len(results) == 0 && kind == "model", len(results) == 0 && kind == "charge":
		return call("pay__charge", map[string]string{"item": item})
	case len(results) == 0 && kind == "lookup":
		return call("pay__lookup", map[string]string{"item": item})
	case len(results) == 0 && kind == "approve":
		return call("pay__refund", map[string]string{"item": item})
	case len(results) == 0 && kind == "send":
		return call("peer", map[string]string{"prompt": "slow " + item})
	case len(results) == 0 && kind == "late":
		return call("peer", map[string]string{"prompt": "delay " + item})
	case len(results) == 0 && kind == "continue":
		return call("peer", map[string]string{"prompt": "input " + item})
	case len(results) == 1 && kind == "continue":
		if m := interruptedTag.FindStringSubmatch(results[0].Content); m != nil {
			return call("peer", map[string]string{"prompt": "slowly " + item, "task_id": m[1]})
		}
	case len(results) == 1 && kind == "model":
		m.mu.Lock()
		m.asked[item]++
		first := m.asked[item] == 1 && m.holdOn[item]
		if first {
			close(m.held[item])
		}
		m.mu.Unlock()
		if first {
			// The first piece streams, then the rest waits until the caller goes away.
			return fakellm.Reply{Text: "thinking it over", Delay: time.Minute}
		}
	}
	return done
}

// askedAgain is how many times the model was asked for item's second turn.
func (m *stepsModel) askedAgain(item string) int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.asked[item]
}

// awaitClosed waits for c, failing the test after within.
func awaitClosed(t *testing.T, c <-chan struct{}, within time.Duration, what string) {
	t.Helper()
	select {
	case <-c:
	case <-time.After(within):
		t.Fatalf("%s never happened", what)
	}
}

// startRun posts "ks <kind> <item>" as run r1 of a new thread to base and returns the
// thread and the live response (its body is the caller's to close).
func startRun(t *testing.T, base, kind, item string) (thread string, live *http.Response) {
	t.Helper()
	thread = newThreadID("ks-" + kind)
	body := mustJSON(t, runInput(thread, "r1", "ks "+kind+" "+item))
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	t.Cleanup(cancel)
	live, err := postAGUI(ctx, base, body)
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, live.StatusCode)
	return thread, live
}

func TestKillSteps(t *testing.T) {
	t.Parallel()
	requirePeers(t)
	top := t
	dsn := pgtest.DSN(t)
	pay := startStepsMCP(t)
	// "delay" tasks are made 3 s after their message arrived (the kill comes before).
	peer := startA2APeerEnv(t, "DELAY_MS=3000")
	holder := startCancelHolder(t, peer)
	script := newStepsModel()
	model := fakellm.Start(script.reply)
	t.Cleanup(model.Close)
	cfg := func(agentURL string) string {
		c := testConfig{LLMURL: model.URL, MCP: []mcpServerEntry{{Name: "pay", URL: pay.URL}},
			Agents: []agentEntry{{Name: "peer", URL: agentURL}}, Store: dsn, Grace: "1s", ToolTimeout: "30s"}.yaml()
		return approvalsYAML(c, []string{"pay__refund"}, nil) + "replication:\n  heartbeat: 200ms\n  lease: 1s\n"
	}
	// The owner reaches the peer through the cancel holder; the survivor directly.
	a := startHITLCoordinator(t, cfg(holder.URL))
	b := startHITLCoordinator(t, cfg(peer))
	waitMCPSettled(t, a.URL)
	waitMCPSettled(t, b.URL)
	// kill ends the owner; the next case gets a fresh one once the run ended.
	kill := func(t *testing.T) {
		a.kill(t)
		t.Cleanup(func() {
			a.restart(top)
			waitMCPSettled(top, a.URL)
		})
	}

	// killStep starts "ks <kind> <item>" as run r1 on the owner, waits with reached (given
	// the thread and the live stream) until the step is where the case kills it, kills the
	// owner and reads the run back from the survivor within replay: its log is dense with
	// one result per call, and it ended finished.
	killStep := func(t *testing.T, kind, item string, replay time.Duration, reached func(thread string, live *http.Response)) killedRun {
		t.Helper()
		thread, live := startRun(t, a.URL, kind, item)
		defer live.Body.Close()
		reached(thread, live)
		kill(t)

		k := killedRun{thread: thread, frames: replayRun(t, b.URL, thread, "r1", replay)}
		k.results, k.end = checkLog(t, k.frames)
		assert.Equal(t, "RUN_FINISHED", k.end["type"], "%v", frameTypes(k.frames))
		return k
	}

	t.Run("model call", func(t *testing.T) {
		item := newThreadID("m")
		held := script.holdTurn(item)
		k := killStep(t, "model", item, 30*time.Second, func(string, *http.Response) {
			awaitClosed(t, held, 20*time.Second, "the model call after the charge")
		})
		assert.Equal(t, 1, pay.count("charge", item), "the charge before the cut turn is not made again")
		assert.Len(t, k.results, 1, "one call, one result: %v in %v", k.results, frameTypes(k.frames))
		assert.GreaterOrEqual(t, script.askedAgain(item), 2, "the survivor asked the model again")
		checkJournal(t, b.URL, k.thread, "r1", "model_call")
	})

	// An MCP call out at the kill: one that is not idempotent is in doubt and never sent
	// again; a read-only one is sent again by the survivor, once.
	for _, c := range []struct {
		name, tool string
		calls      int    // how many times the call reaches the MCP server in all
		result     string // how the model's result starts
		says       string // what the result says, when it matters
	}{
		{name: "MCP call not idempotent", tool: "charge", calls: 1, result: "[ERROR]", says: "may or may not have run"},
		{name: "MCP call read-only", tool: "lookup", calls: 2, result: "[OK]"},
	} {
		t.Run(c.name, func(t *testing.T) {
			item := newThreadID(c.tool[:1])
			pay.hold(c.tool, item)
			k := killStep(t, c.tool, item, 30*time.Second, func(string, *http.Response) {
				pay.awaitCall(t, c.tool, item, 20*time.Second)
			})
			assert.Equal(t, c.calls, pay.count(c.tool, item), "times the %s reached the server", c.tool)
			res := k.result(t, item, 1)
			assert.True(t, strings.HasPrefix(res, c.result), "the model's result: %q", res)
			if c.says != "" {
				assert.Contains(t, res, c.says)
			}
			checkJournal(t, b.URL, k.thread, "r1", "tool_call")
		})
	}

	t.Run("A2A send", func(t *testing.T) {
		item := newThreadID("s")
		before := stepsPeer(t, peer)
		k := killStep(t, "send", item, 45*time.Second, func(_ string, live *http.Response) {
			awaitSubagentText(t, live, 1)
		})
		after := stepsPeer(t, peer)
		tasks := newTasks(before.peerCalls, after.peerCalls)
		require.Len(t, tasks, 1, "one task at the peer")
		assert.Equal(t, 1, countOf(after.Sends[len(before.Sends):], "slow"), "the task was sent once: %v", after.Sends)
		assert.Contains(t, after.Subscribes, tasks[0], "the survivor followed the task by id")
		awaitTasksEnded(t, peer, tasks, 10*time.Second)
		res := k.result(t, item, 1)
		assert.True(t, strings.HasPrefix(res, "[COMPLETED]"), "the task's result: %q", res)
		checkJournal(t, b.URL, k.thread, "r1", "a2a_send")
	})

	// The owner dies after the peer received the message but before the peer made its task
	// and answered (its first event is DELAY_MS late): the owner never learned the task's
	// id. The survivor finds the task by the context and message ids the send's journal
	// intent recorded, and follows it to its end: no task is left running with nobody
	// following it, and the model gets the task's result rather than an in-doubt report.
	t.Run("A2A send before its task id", func(t *testing.T) {
		item := newThreadID("l")
		before := stepsPeer(t, peer)
		k := killStep(t, "late", item, 45*time.Second, func(_ string, live *http.Response) {
			awaitSubagentStarted(t, live)
			awaitPeerSend(t, peer, before, "delay")
			l := stepsPeer(t, peer)
			require.Empty(t, newTasks(before.peerCalls, l.peerCalls), "killed before the peer made its task")
		})
		assert.Len(t, k.results, 1, "one call, one result: %v", k.results)
		res := k.result(t, item, 1)
		assert.True(t, strings.HasPrefix(res, "[COMPLETED]"), "the task's result, not in doubt: %q", res)
		task := awaitPeerTask(t, peer, before, func(stepsPeerLog, string) bool { return true })
		after := awaitTasksEnded(t, peer, []string{task}, 20*time.Second)
		assert.Equal(t, 1, countOf(after.Sends[len(before.Sends):], "delay"), "the message was sent once: %v", after.Sends)
		assert.Len(t, newTasks(before.peerCalls, after.peerCalls), 1, "one task at the peer")
		assert.Equal(t, "TASK_STATE_COMPLETED", after.Tasks[task], "the task ran to its end")
		assert.NotContains(t, after.Cancels, task)
		assert.Contains(t, after.Subscribes, task, "the survivor followed the task by id")
		checkJournal(t, b.URL, k.thread, "r1", "a2a_send")
	})

	t.Run("A2A continuation", func(t *testing.T) {
		item := newThreadID("k")
		before := stepsPeer(t, peer)
		var task string
		k := killStep(t, "continue", item, 45*time.Second, func(_ string, live *http.Response) {
			awaitSubagentText(t, live, 2)
			task = awaitPeerTask(t, peer, before, func(l stepsPeerLog, task string) bool {
				return l.FollowUps[task] == 1 && l.Tasks[task] == "TASK_STATE_WORKING"
			})
		})
		after := awaitTasksEnded(t, peer, []string{task}, 10*time.Second)
		assert.Equal(t, 1, after.FollowUps[task], "the answer reached the task once")
		assert.Equal(t, 1, countOf(after.Sends[len(before.Sends):], task+":slowly"), "the continuation was sent once: %v", after.Sends)
		assert.Len(t, newTasks(before.peerCalls, after.peerCalls), 1, "no other task was started")
		assert.Equal(t, "TASK_STATE_COMPLETED", after.Tasks[task])
		assert.Contains(t, after.Subscribes, task, "the survivor followed the task by id")
		assert.Len(t, k.results, 2, "two calls, one result each: %v", k.results)
		res := k.result(t, item, 2)
		assert.True(t, strings.HasPrefix(res, "[COMPLETED]"), "the continued task's result: %q", res)
		checkJournal(t, b.URL, k.thread, "r1", "a2a_continue")
	})

	t.Run("downstream cancel after a stop", func(t *testing.T) {
		item := newThreadID("x")
		before := stepsPeer(t, peer)
		var task string
		k := killStep(t, "send", item, 45*time.Second, func(thread string, live *http.Response) {
			awaitSubagentText(t, live, 1)
			task = awaitPeerTask(t, peer, before, func(l stepsPeerLog, task string) bool { return l.Tasks[task] == "TASK_STATE_WORKING" })
			stop := postJSON(t, a.URL+"/agui/threads/"+thread+"/runs/r1/stop", `{}`)
			stop.Body.Close()
			require.Equal(t, http.StatusAccepted, stop.StatusCode)
			awaitClosed(t, holder.seen, 10*time.Second, "the owner's CancelTask")
		})
		assert.Equal(t, map[string]any{"type": "cancelled"}, k.end["outcome"], "the run ends stopped, not driven on by the survivor")
		after := awaitTasksEnded(t, peer, []string{task}, 15*time.Second)
		assert.Equal(t, "TASK_STATE_CANCELED", after.Tasks[task], "the stop holds across the takeover: the survivor cancels the task")
		assert.Contains(t, after.Cancels, task, "the survivor sent CancelTask")
		assert.Equal(t, 1, countOf(after.Sends[len(before.Sends):], "slow"), "the task was sent once: %v", after.Sends)
		assert.LessOrEqual(t, len(k.results["ks_"+item+"_1"]), 1, "results: %v", k.results)
		checkJournal(t, b.URL, k.thread, "r1", "a2a_send")
	})

	// An approval's resume: the owner is killed as soon as the resume is accepted (the
	// approved call may or may not have gone out), or once the approved call reached the
	// MCP server.
	for _, out := range []bool{false, true} {
		name := "approval decision"
		if out {
			name = "approved call out"
		}
		t.Run(name, func(t *testing.T) {
			item := newThreadID("a")
			pay.hold("refund", item)
			thread := newThreadID("ks-approve")
			in := onlyInterrupt(t, postRun(t, a.URL, runInput(thread, "r0", "ks approve "+item)))
			assert.Equal(t, 0, pay.count("refund", item), "nothing is sent before the approval")
			resume := approve(thread, in, true)
			runID := resume["runId"].(string)
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			resp, err := postAGUI(ctx, a.URL, mustJSON(t, resume))
			require.NoError(t, err)
			defer resp.Body.Close()
			require.Equal(t, http.StatusOK, resp.StatusCode)
			if out {
				pay.awaitCall(t, "refund", item, 20*time.Second)
			}
			kill(t)
			pay.release("refund", item)

			callID := in["toolCallId"].(string)
			frames := replayRun(t, b.URL, thread, runID, 30*time.Second)
			results, end := checkLog(t, frames, callID)
			require.Equal(t, "RUN_FINISHED", end["type"], "%v", frameTypes(frames))
			assert.LessOrEqual(t, pay.count("refund", item), 1, "the refund is made at most once")
			outcome, _ := end["outcome"].(map[string]any)
			ins, _ := outcome["interrupts"].([]any)
			if out {
				require.Len(t, ins, 1, "a call that went out is asked about again: %v", outcome)
			}
			if len(ins) > 0 {
				// The approved call may have gone out: the user is asked again.
				require.Len(t, ins, 1)
				doubt := ins[0].(map[string]any)
				assert.Equal(t, callID, doubt["toolCallId"])
				md, _ := doubt["metadata"].(map[string]any)
				baton, _ := md["baton"].(map[string]any)
				assert.Equal(t, true, baton["inDoubt"], "metadata.baton.inDoubt: %v", doubt)
				assert.Empty(t, results[callID], "no result for a call in doubt")
				t.Logf("the approved call was in doubt (refunds: %d)", pay.count("refund", item))
			} else {
				assert.Equal(t, 1, pay.count("refund", item), "the approved call was made once")
				require.Len(t, results[callID], 1, "results: %v", results)
				assert.True(t, strings.HasPrefix(results[callID][0], "[OK]"), results[callID][0])
				t.Logf("the approved call was made by the survivor")
			}
			steps := checkJournal(t, b.URL, thread, runID, "")
			approved, doubted := false, false
			for _, s := range steps {
				approved = approved || (s.RunID == runID && s.Kind == "approval" && s.Outcome == "approved")
				doubted = doubted || (s.RunID == runID && s.InDoubt)
			}
			assert.True(t, approved, "the journal shows the approval: %v", steps)
			if out {
				assert.True(t, doubted, "the journal shows the approved call in doubt: %v", steps)
			}
		})
	}
}

// killedRun is a run whose owner was killed during one step, as the survivor's log shows it.
type killedRun struct {
	thread  string
	frames  []takeoverFrame
	results map[string][]string // by tool call id
	end     map[string]any      // the terminal event
}

// result is the one result of the n-th call the model made for item.
func (k killedRun) result(t *testing.T, item string, n int) string {
	t.Helper()
	res := k.results[fmt.Sprintf("ks_%s_%d", item, n)]
	require.Len(t, res, 1, "results: %v", k.results)
	return res[0]
}

// awaitSubagentText reads the live stream until the sub-agent of the calls-th tool call
// streamed text (its task is named and recorded by then).
func awaitSubagentText(t *testing.T, live *http.Response, calls int) {
	t.Helper()
	s := newTakeoverStream(live.Body)
	starts := 0
	for {
		f, ok := s.next(t)
		require.True(t, ok, "the live stream ended before the sub-agent streamed")
		switch f.Event["type"] {
		case "TOOL_CALL_START":
			starts++
		case "TEXT_MESSAGE_CONTENT":
			if starts == calls && f.Event["subagentRunId"] != nil {
				return
			}
		}
	}
}

// awaitSubagentStarted reads the live stream until a sub-agent started (its call's intent
// is recorded, and the checkpoint with the call is stored ahead of the event).
func awaitSubagentStarted(t *testing.T, live *http.Response) {
	t.Helper()
	s := newTakeoverStream(live.Body)
	for {
		f, ok := s.next(t)
		require.True(t, ok, "the live stream ended before the sub-agent started")
		if f.Event["type"] == "SUBAGENT_STARTED" {
			return
		}
	}
}

// awaitPeerSend waits until the peer received a message whose first word is word since
// before (its log records each message as it arrives).
func awaitPeerSend(t *testing.T, peer string, before stepsPeerLog, word string) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		l := stepsPeer(t, peer)
		if countOf(l.Sends[len(before.Sends):], word) > 0 {
			return
		}
		require.True(t, time.Now().Before(deadline), "the peer never received %q: %v", word, l.Sends)
		time.Sleep(20 * time.Millisecond)
	}
}

// awaitPeerTask waits until the peer has one task that before did not have and ready says
// it is where the test wants it, and returns the task's id.
func awaitPeerTask(t *testing.T, peer string, before stepsPeerLog, ready func(stepsPeerLog, string) bool) string {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		l := stepsPeer(t, peer)
		if tasks := newTasks(before.peerCalls, l.peerCalls); len(tasks) == 1 && ready(l, tasks[0]) {
			return tasks[0]
		}
		require.True(t, time.Now().Before(deadline), "the peer's task never got there: %+v", l)
		time.Sleep(50 * time.Millisecond)
	}
}
