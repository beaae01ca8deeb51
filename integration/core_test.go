package integration

// End-to-end tests of the core: the coordinator binary with the real openai
// provider (scripted by fakellm) delegating to real A2A sub-agents, its streams consumed by
// the official AG-UI clients 1.0.0 and 0.0.59.

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/baton-dev/baton/internal/testutil/fakellm"
)

// lanes are the official AG-UI clients: 1.0.0 and the 0.0.59 CopilotKit lane.
var lanes = []string{"v1", "legacy"}

// wantCall is what one delegation of a scenario must produce.
type wantCall struct {
	// tag is the exact first tag; for the interrupted tags it is the prefix up to "task_id="
	// and the id is checked separately.
	tag string
	// contains must all occur in the TOOL_CALL_RESULT content after the first line.
	contains []string
	// attributed must all occur in the text attributed to the sub-agent run.
	attributed []string
	// end is "finished/success", "finished/suspended" or "error/<code>".
	end string
	// continues: the call continues the task of the previous call with the continue answer.
	continues bool
}

// stateCase is one scenario: a user message and the delegations it must cause.
type stateCase struct {
	name string
	// text is the user message: "<agent>: <prompt>".
	text  string
	calls []wantCall
	// peerState, for the JS peer, is the final state the peer must have stored for the
	// task of the first call (checks that the tag names a real task).
	peerState string
}

const (
	tagCompleted = "[COMPLETED]"
	tagFailed    = "[FAILED]"
	tagRejected  = "[REJECTED]"
	tagCanceled  = "[CANCELED]"
	tagInput     = "[INPUT_REQUIRED:task_id="
	tagAuth      = "[AUTH_REQUIRED:task_id="
)

// jsPeerCases drive every task state of peers/a2a-peer.mjs through the agent named "peer".
var jsPeerCases = []stateCase{
	{name: "complete", text: "peer: complete hello", calls: []wantCall{
		{tag: tagCompleted, contains: []string{"done: complete hello"}, attributed: []string{"done: complete hello"}, end: "finished/success"},
	}},
	{name: "fail", text: "peer: fail now", calls: []wantCall{
		{tag: tagFailed, contains: []string{"scripted failure"}, attributed: []string{"scripted failure"}, end: "error/failed"},
	}},
	{name: "reject", text: "peer: reject this", calls: []wantCall{
		{tag: tagRejected, contains: []string{"scripted rejection"}, attributed: []string{"scripted rejection"}, end: "error/rejected"},
	}},
	{name: "canceled", text: "peer: canceled by itself", calls: []wantCall{
		{tag: tagCanceled, contains: []string{"scripted cancellation"}, attributed: []string{"scripted cancellation"}, end: "error/canceled"},
	}},
	{name: "input-continued", text: "peer: input " + continueMarker, peerState: "TASK_STATE_COMPLETED", calls: []wantCall{
		{tag: tagInput, contains: []string{"what colour?"}, attributed: []string{"what colour?"}, end: "finished/suspended"},
		{tag: tagCompleted, contains: []string{"done: " + continueAnswer}, attributed: []string{"done: " + continueAnswer}, end: "finished/success", continues: true},
	}},
	{name: "auth", text: "peer: auth please", peerState: "TASK_STATE_AUTH_REQUIRED", calls: []wantCall{
		{tag: tagAuth, contains: []string{"please authenticate"}, attributed: []string{"please authenticate"}, end: "finished/suspended"},
	}},
	{name: "message", text: "peer: message hi", calls: []wantCall{
		{tag: tagCompleted, contains: []string{"echo: message hi"}, attributed: []string{"echo: message hi"}, end: "finished/success"},
	}},
}

// demoCases drive cmd/demo-agent (agents "travel" and "research"); the texts are those of
// internal/demoagent.
var demoCases = []stateCase{
	{name: "travel-input-continued", text: "travel: book a trip to Lisbon " + continueMarker, calls: []wantCall{
		{tag: tagInput, contains: []string{"What dates would you like to travel?"}, attributed: []string{"What dates would you like to travel?"}, end: "finished/suspended"},
		{tag: tagCompleted, contains: []string{"Booked: book a trip to Lisbon " + continueMarker + " for " + continueAnswer + "."},
			attributed: []string{"Booked: book a trip to Lisbon"}, end: "finished/success", continues: true},
	}},
	{name: "research-complete", text: "research: history of gardening", calls: []wantCall{
		{tag: tagCompleted, contains: []string{
			"Report: history of gardening\n",
			"Summary: history of gardening is well covered by the sources consulted.\n",
			"Finding 1: the core ideas are stable and widely documented.\n",
			"Finding 2: recent work refines them rather than replacing them.\n",
			"Conclusion: the evidence is consistent; no open contradictions were found.",
		}, attributed: []string{"Report: history of gardening\n", "Conclusion: the evidence is consistent"}, end: "finished/success"},
	}},
	{name: "research-fail", text: "research: fail the search", calls: []wantCall{
		{tag: tagFailed, contains: []string{"Research failed: the source archive is offline."}, end: "error/failed"},
	}},
	{name: "research-reject", text: "research: reject cooking recipes", calls: []wantCall{
		{tag: tagRejected, contains: []string{"I only research technical topics."}, end: "error/rejected"},
	}},
	{name: "research-message", text: "research: message hello there", calls: []wantCall{
		{tag: tagCompleted, contains: []string{"echo: message hello there"}, end: "finished/success"},
	}},
	{name: "research-auth", text: "research: auth library access", calls: []wantCall{
		{tag: tagAuth, contains: []string{"Please sign in to the research library."}, end: "finished/suspended"},
	}},
}

// TestA2AStatesJSPeer: every task state of the @a2a-js/sdk peer, over the A2A 1.0 wire (a
// v1.0-only peer) and the 0.3 wire (a peer whose card offers only 0.3), each stream consumed
// by both official AG-UI clients.
func TestA2AStatesJSPeer(t *testing.T) {
	t.Parallel()
	requirePeers(t)
	for _, wire := range []struct {
		name string
		env  []string
		// v03 is whether every request must be on the 0.3 wire (no A2A-Version: 1.0).
		v03 bool
	}{
		{name: "a2a-1.0", env: []string{"A2A_LEGACY=0"}},
		{name: "a2a-0.3", env: []string{"A2A_ONLY_V03=1"}, v03: true},
		// A card that does not stream: SendMessage without blocking, then the task is
		// followed; the tags are the same as for a streaming agent.
		{name: "a2a-1.0/no-stream", env: []string{"A2A_LEGACY=0", "A2A_STREAMING=0"}},
		{name: "a2a-0.3/no-stream", env: []string{"A2A_ONLY_V03=1", "A2A_STREAMING=0"}, v03: true},
		// A card whose only interface is A2A 1.0 HTTP+JSON (REST).
		{name: "http+json", env: []string{"A2A_ONLY_REST=1", "A2A_LEGACY=0"}},
		{name: "http+json/no-stream", env: []string{"A2A_ONLY_REST=1", "A2A_LEGACY=0", "A2A_STREAMING=0"}},
	} {
		t.Run(wire.name, func(t *testing.T) {
			t.Parallel() // a peer, a model and a coordinator of its own
			peer := startA2APeerEnv(t, wire.env...)
			model := startFakeLLM(t)
			coord := startCoordinator(t, coordinatorYAML(model.URL, agentEntry{Name: "peer", URL: peer}))
			for _, tc := range jsPeerCases {
				t.Run(tc.name, func(t *testing.T) {
					for _, lane := range lanes {
						t.Run(lane, func(t *testing.T) {
							runStateCase(t, tc, lane, coord, model, "peer", func(taskID string) {
								if tc.peerState == "" {
									return
								}
								_, tasks := peerLog(t, peer)
								assert.Equal(t, tc.peerState, tasks[taskID], "the peer's state of the tagged task %s", taskID)
							})
						})
					}
				})
			}
			versions := peerVersions(t, peer)
			require.NotEmpty(t, versions, "the peer got no A2A request")
			for i, v := range versions {
				if wire.v03 {
					assert.NotEqual(t, "1.0", v, "request %d to a 0.3-only peer used the 1.0 wire", i)
				} else {
					assert.Equal(t, "1.0", v, "request %d to a 1.0-only peer", i)
				}
			}
		})
	}
}

// TestA2AStatesDemoAgent: the same against the cmd/demo-agent processes (travel, research).
func TestA2AStatesDemoAgent(t *testing.T) {
	t.Parallel()
	requirePeers(t)
	travel := startDemoAgent(t, "travel")
	research := startDemoAgent(t, "research")
	model := startFakeLLM(t)
	coord := startCoordinator(t, coordinatorYAML(model.URL,
		agentEntry{Name: "travel", URL: travel}, agentEntry{Name: "research", URL: research}))
	for _, tc := range demoCases {
		t.Run(tc.name, func(t *testing.T) {
			agent, _, _ := strings.Cut(tc.text, ":")
			for _, lane := range lanes {
				t.Run(lane, func(t *testing.T) {
					runStateCase(t, tc, lane, coord, model, agent, nil)
				})
			}
		})
	}
}

// runStateCase runs tc through the official client on lane and checks the stream: the
// delegations with their tags, results and SUBAGENT_* events, the model's final text, and
// that every TOOL_CALL_RESULT is exactly what the model was given. checkTask, if set, gets
// the task id of an interrupted first call.
func runStateCase(t *testing.T, tc stateCase, lane, coord string, model *fakellm.Server, agent string, checkTask func(taskID string)) {
	t.Helper()
	r := runAGUIClient(t, lane, coord+"/agui", userJob("state-"+tc.name+"-"+lane, tc.text))
	assertCleanClientRun(t, r)
	ds := delegationsOf(t, r.Events)
	require.Len(t, ds, len(tc.calls), "tool calls; events: %v", eventTypes(r.Events))
	seen := toolMessagesSeen(model)
	var prevTaskID string
	for i, want := range tc.calls {
		d := ds[i]
		assert.Equal(t, agent, d.Tool, "call %d: tool name", i)
		require.Len(t, d.Results, 1, "call %d: TOOL_CALL_RESULT events", i)
		res := d.Results[0]
		assert.Equal(t, seen[d.CallID], res, "call %d: TOOL_CALL_RESULT content must be exactly what the model got", i)
		first, _, _ := strings.Cut(res, "\n")
		var body string // what follows the tag
		switch want.tag {
		case tagInput, tagAuth:
			m := interruptedTag.FindStringSubmatch(first)
			require.NotNil(t, m, "call %d: result %q does not start with %s…]", i, res, want.tag)
			assert.True(t, strings.HasPrefix(first, want.tag), "call %d: result %q, want tag %s…]", i, res, want.tag)
			prevTaskID = m[1]
			body = res[len(m[0]):]
			if i == 0 && checkTask != nil {
				defer checkTask(m[1]) // after the continuation, if any
			}
		default:
			require.True(t, strings.HasPrefix(first, want.tag), "call %d: result %q, want tag %s", i, res, want.tag)
			body = res[len(want.tag):]
		}
		for _, s := range want.contains {
			assert.Contains(t, body, s, "call %d: result after the tag", i)
		}
		if want.continues {
			assert.Equal(t, map[string]any{"prompt": continueAnswer, "task_id": prevTaskID}, d.Args, "call %d: continuation arguments", i)
		} else {
			assert.Equal(t, map[string]any{"prompt": strings.TrimSpace(strings.SplitN(tc.text, ":", 2)[1])}, d.Args, "call %d: arguments", i)
		}

		// DESIGN §8: SUBAGENT_STARTED{subagentRunId, name, parentToolCallId}, attributed
		// text, then SUBAGENT_FINISHED or SUBAGENT_ERROR{code}.
		require.Len(t, d.Starts, 1, "call %d: SUBAGENT_STARTED events", i)
		assert.Equal(t, agent, d.Starts[0]["name"], "call %d: SUBAGENT_STARTED.name", i)
		assert.NotEmpty(t, d.SubIDs[0], "call %d: subagentRunId", i)
		require.Len(t, d.Ends, 1, "call %d: SUBAGENT_FINISHED/SUBAGENT_ERROR events", i)
		end := d.Ends[0]
		kind, detail, _ := strings.Cut(want.end, "/")
		switch kind {
		case "finished":
			assert.Equal(t, "SUBAGENT_FINISHED", end["type"], "call %d: %v", i, end)
			outcome, _ := end["outcome"].(map[string]any)
			assert.Equal(t, detail, outcome["type"], "call %d: SUBAGENT_FINISHED.outcome: %v", i, end)
		case "error":
			assert.Equal(t, "SUBAGENT_ERROR", end["type"], "call %d: %v", i, end)
			assert.Equal(t, detail, end["code"], "call %d: SUBAGENT_ERROR.code", i)
			msg, _ := end["message"].(string)
			assert.NotEmpty(t, msg, "call %d: SUBAGENT_ERROR.message", i)
		}
		for _, s := range want.attributed {
			assert.Contains(t, d.Text, s, "call %d: text attributed to the sub-agent", i)
		}
	}
	assert.Equal(t, modelDoneText, plainText(r.Events), "the model's own text")
}

// tagLine matches a line that would parse as one of the tags of DESIGN §5.
var tagLine = regexp.MustCompile(`^\[(COMPLETED|FAILED|REJECTED|CANCELED|INPUT_REQUIRED|AUTH_REQUIRED|TIMEOUT|UNREACHABLE|OK|ERROR|RETRY|ANSWERED|DECLINED)\b`)

// TestForgedTags: a sub-agent whose artifact holds tag-like lines cannot forge a tag.
func TestForgedTags(t *testing.T) {
	t.Parallel()
	requirePeers(t)
	peer := startA2APeerEnv(t, "A2A_LEGACY=0")
	model := startFakeLLM(t)
	coord := startCoordinator(t, coordinatorYAML(model.URL, agentEntry{Name: "peer", URL: peer}))
	for _, lane := range lanes {
		t.Run(lane, func(t *testing.T) {
			r := runAGUIClient(t, lane, coord+"/agui", userJob("forge-"+lane, "peer: forge it"))
			assertCleanClientRun(t, r)
			ds := delegationsOf(t, r.Events)
			require.Len(t, ds, 1, "tool calls; events: %v", eventTypes(r.Events))
			require.Len(t, ds[0].Results, 1)
			res := ds[0].Results[0]
			assert.Equal(t, toolMessagesSeen(model)[ds[0].CallID], res, "the model gets the escaped text too")
			lines := strings.Split(res, "\n")
			assert.True(t, strings.HasPrefix(lines[0], tagCompleted), "first line %q", lines[0])
			assert.False(t, tagLine.MatchString(strings.TrimSpace(strings.TrimPrefix(lines[0], tagCompleted))),
				"the rest of the first line starts with a tag: %q", lines[0])
			for i, l := range lines[1:] {
				assert.False(t, tagLine.MatchString(strings.TrimSpace(l)), "line %d of the result would parse as a tag: %q\nresult:\n%s", i+2, l, res)
			}
			// Escaped, not dropped: the model still sees what the agent said.
			assert.Contains(t, res, "all good")
			assert.Contains(t, res, "task_id=evil")
			assert.Contains(t, res, "unknown_action")
		})
	}
}

// TestStreamDrop: the peer cuts the stream after two of six artifact chunks; the result and
// the attributed text hold every chunk exactly once.
func TestStreamDrop(t *testing.T) {
	t.Parallel()
	requirePeers(t)
	for _, wire := range []struct{ name, env string }{
		{name: "a2a-1.0", env: "A2A_LEGACY=0"},
		{name: "a2a-0.3", env: "A2A_ONLY_V03=1"},
	} {
		t.Run(wire.name, func(t *testing.T) {
			peer := startA2APeerEnv(t, wire.env)
			model := startFakeLLM(t)
			coord := startCoordinator(t, coordinatorYAML(model.URL, agentEntry{Name: "peer", URL: peer}))
			for _, lane := range lanes {
				t.Run(lane, func(t *testing.T) {
					before := len(peerVersions(t, peer))
					r := runAGUIClient(t, lane, coord+"/agui", userJob("drop-"+lane, "peer: drop it"))
					assertCleanClientRun(t, r)
					// The cut happened and was recovered from: more than the one streaming
					// request reached the peer (SubscribeToTask or GetTask).
					assert.GreaterOrEqual(t, len(peerVersions(t, peer))-before, 2, "A2A requests during the run")
					ds := delegationsOf(t, r.Events)
					require.Len(t, ds, 1, "tool calls; events: %v", eventTypes(r.Events))
					require.Len(t, ds[0].Results, 1)
					res := ds[0].Results[0]
					assert.True(t, strings.HasPrefix(res, tagCompleted), "result %q", res)
					assert.Equal(t, toolMessagesSeen(model)[ds[0].CallID], res)
					for i := 1; i <= 6; i++ {
						part := fmt.Sprintf("part %d ", i)
						assert.Equal(t, 1, strings.Count(res, part), "%q in the result:\n%s", part, res)
						assert.Equal(t, 1, strings.Count(ds[0].Text, part), "%q in the attributed text: %q", part, ds[0].Text)
					}
					require.Len(t, ds[0].Ends, 1)
					assert.Equal(t, "SUBAGENT_FINISHED", ds[0].Ends[0]["type"])
				})
			}
		})
	}
}

// TestBadInput: every bad request gets its 4xx and a JSON error before any stream, a second
// run on a busy thread gets 409, and none of them leaves anything behind: the model never
// sees them and a valid run on the same thread succeeds afterwards.
func TestBadInput(t *testing.T) {
	t.Parallel()
	requirePeers(t)
	peer := startA2APeerEnv(t, "A2A_LEGACY=0")
	model := startFakeLLM(t)
	coord := startCoordinator(t, coordinatorYAML(model.URL, agentEntry{Name: "peer", URL: peer}))
	thread := newThreadID("bad")

	valid := runInput(thread, "r-valid", "peer: complete bad-input")
	with := func(k string, v any) []byte {
		m := map[string]any{}
		for kk, vv := range valid {
			m[kk] = vv
		}
		if v == nil {
			delete(m, k)
		} else {
			m[k] = v
		}
		b, err := json.Marshal(m)
		require.NoError(t, err)
		return b
	}
	big := runInput(thread, "r-big", "peer: complete "+strings.Repeat("x", 1<<20))
	bigBody, err := json.Marshal(big)
	require.NoError(t, err)
	require.Greater(t, len(bigBody), 1<<20)

	for _, tc := range []struct {
		name   string
		body   []byte
		status int
	}{
		{"malformed JSON", []byte(`{"threadId":"` + thread + `","runId":"r1","messages":[`), http.StatusBadRequest},
		{"missing threadId", with("threadId", nil), http.StatusBadRequest},
		{"missing runId", with("runId", nil), http.StatusBadRequest},
		{"threadId number", with("threadId", 42), http.StatusBadRequest},
		{"messages object", with("messages", map[string]any{"id": "u1", "role": "user", "content": "peer: complete x"}), http.StatusBadRequest},
		{"oversized body", bigBody, http.StatusRequestEntityTooLarge},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			resp, err := postAGUI(ctx, coord, tc.body)
			require.NoError(t, err)
			assertJSONError(t, resp, tc.status)
		})
	}
	assert.Empty(t, model.Requests(), "no bad request may reach the model")

	t.Run("busy thread", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		defer cancel()
		first, err := json.Marshal(runInput(thread, "r-slow", "peer: slow"))
		require.NoError(t, err)
		resp, err := postAGUI(ctx, coord, first)
		require.NoError(t, err)
		defer resp.Body.Close()
		require.Equal(t, http.StatusOK, resp.StatusCode)

		started := make(chan struct{})
		type streamed struct {
			evs []map[string]any
			err error
		}
		done := make(chan streamed, 1)
		go func() {
			once := false
			evs, err := readSSE(resp.Body, func(ev map[string]any) {
				if ev["type"] == "SUBAGENT_STARTED" && !once {
					once = true
					close(started)
				}
			})
			if !once {
				close(started)
			}
			done <- streamed{evs, err}
		}()
		<-started // the first run is delegating to the slow task now

		second, err := json.Marshal(runInput(thread, "r-second", "peer: complete second-run"))
		require.NoError(t, err)
		resp2, err := postAGUI(ctx, coord, second)
		require.NoError(t, err)
		assertJSONError(t, resp2, http.StatusConflict)

		s := <-done
		require.NoError(t, s.err, "reading the first run's stream")
		require.NotEmpty(t, s.evs)
		assert.Equal(t, "RUN_FINISHED", s.evs[len(s.evs)-1]["type"], "the first run is undisturbed: %v", eventTypes(s.evs))
		assert.Len(t, eventsOfType(s.evs, "SUBAGENT_STARTED"), 1)
		for _, txt := range userTextsSeen(model) {
			assert.NotContains(t, txt, "second-run", "the refused run reached the model")
		}
	})

	// A client may start its next run as soon as a stream has ended (e.g. to send a frontend
	// tool's result): the thread must be free by then, not a moment later.
	t.Run("next run right after the stream ends", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		defer cancel()
		var refused []string
		for i := range 50 {
			body, err := json.Marshal(runInput(thread, fmt.Sprintf("r-next-%d", i), fmt.Sprintf("peer: complete next-%d", i)))
			require.NoError(t, err)
			resp, err := postAGUI(ctx, coord, body)
			require.NoError(t, err)
			if resp.StatusCode != http.StatusOK {
				b, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				refused = append(refused, fmt.Sprintf("run %d: HTTP %d %s", i, resp.StatusCode, bytes.TrimSpace(b)))
				continue
			}
			// Like the official client, whose runAgent() resolves when the response ends:
			// the next run is posted at once after that.
			evs, err := readSSE(resp.Body, nil)
			resp.Body.Close()
			require.NoError(t, err, "run %d", i)
			require.NotEmpty(t, evs, "run %d", i)
			require.Equal(t, "RUN_FINISHED", evs[len(evs)-1]["type"], "run %d: %v", i, eventTypes(evs))
		}
		assert.Empty(t, refused, "runs refused although the previous stream had ended")
	})

	t.Run("valid run afterwards", func(t *testing.T) {
		job := userJob("unused", "peer: complete after-bad-input")
		job["threadId"] = thread
		r := runAGUIClient(t, "v1", coord+"/agui", job)
		assertCleanClientRun(t, r)
		ds := delegationsOf(t, r.Events)
		require.Len(t, ds, 1, "events: %v", eventTypes(r.Events))
		require.Len(t, ds[0].Results, 1)
		assert.True(t, strings.HasPrefix(ds[0].Results[0], tagCompleted), "result %q", ds[0].Results[0])
		assert.Contains(t, ds[0].Results[0], "done: complete after-bad-input")
	})
}

// assertJSONError checks a 4xx answer: the status, a JSON content type and a body of the form
// {"error": code, "message": text}.
func assertJSONError(t *testing.T, resp *http.Response, status int) {
	t.Helper()
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	assert.Equal(t, status, resp.StatusCode, "body: %s", b)
	assert.Contains(t, resp.Header.Get("Content-Type"), "application/json")
	var body map[string]any
	require.NoError(t, json.Unmarshal(b, &body), "body %q is not JSON", b)
	code, _ := body["error"].(string)
	msg, _ := body["message"].(string)
	assert.NotEmpty(t, code, `"error" in %s`, b)
	assert.NotEmpty(t, msg, `"message" in %s`, b)
	assert.Len(t, body, 2, "only error and message: %s", b)
}
