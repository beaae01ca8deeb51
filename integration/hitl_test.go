package integration

// End-to-end tests of the human in the loop (DESIGN §9): A2A input-required and
// auth-required of the @a2a-js/sdk peer, in-session (2025-11-25) MCP elicitation of
// server-everything over stdio, MRTR (2026-07-28) elicitation of the demo deploy tool over
// stateless HTTP, all as AG-UI interrupts resumed through the official clients 1.0.0
// (buildResumeArray over agent.pendingInterrupts) and 0.0.59; suspensions that survive a
// SIGKILL of the coordinator (SQLite store); and the resume rules: validation, expiry (with
// CancelTask to the parked task), idempotency, a repeated runId, re-emission on a plain run,
// several interrupts in one run.
//
// Design note: the fake model is scripted from the user's text, "hitl: <JSON array of
// {name, args}>": the model makes all those tool calls in one turn, and answers "done" once
// any tool result follows that user message. One script thus drives single calls, two
// sub-agents waiting at once, and an A2A call next to an MCP call. The coordinator of these
// tests is started by startHITLCoordinator, which keeps its config file and port so that a
// test can kill it (SIGKILL) and start it again on the same store.

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/baton-dev/baton/internal/testutil/fakellm"
	"github.com/baton-dev/baton/llm"
)

// hitlMarker starts the user messages of the HITL script.
const hitlMarker = "hitl:"

// hitlCall is one tool call the fake model makes.
type hitlCall struct {
	Name string         `json:"name"`
	Args map[string]any `json:"args"`
}

// hitlText is the user message that makes the model make calls, all in one turn.
func hitlText(calls ...hitlCall) string {
	b, err := json.Marshal(calls)
	if err != nil {
		panic(err)
	}
	return hitlMarker + " " + string(b)
}

var hitlCallSeq atomic.Int64

// hitlModel is the fake model's script (see the file comment).
func hitlModel(req fakellm.Request) fakellm.Reply {
	rest, reply, ok := markedTurn(req, hitlMarker)
	if !ok {
		return reply
	}
	var calls []hitlCall
	if err := json.Unmarshal([]byte(rest), &calls); err != nil {
		return fakellm.Reply{Text: "fake model: bad " + hitlMarker + " message: " + err.Error()}
	}
	var out []llm.ToolCall
	for _, c := range calls {
		args, _ := json.Marshal(c.Args)
		if c.Args == nil {
			args = []byte("{}")
		}
		out = append(out, llm.ToolCall{ID: fmt.Sprintf("call_hitl_%d", hitlCallSeq.Add(1)), Name: c.Name, Arguments: string(args)})
	}
	return fakellm.Reply{ToolCalls: out}
}

// hitlEnv describes a coordinator config for these tests.
type hitlEnv struct {
	llmURL string
	// agents are A2A sub-agents; InputRequired defaults to ask_user here.
	agents []agentEntry
	mcp    []mcpServerEntry
	// ttl is interrupts.ttl ("" = the default, 30 min).
	ttl string
	// store is the store DSN ("" = memory:).
	store string
}

// yaml renders the config, without a listen key (startHITLCoordinator adds one).
func (e hitlEnv) yaml() string {
	return testConfig{LLMURL: e.llmURL, Agents: e.agents, InputRequired: "ask_user", MCP: e.mcp,
		ToolTimeout: "30s", TTL: e.ttl, Store: e.store}.yaml()
}

// hitlCoord is a coordinator process that a test may kill and start again with the same
// config file (same port, same store).
type hitlCoord struct {
	URL  string
	path string // the config file
	p    *proc
	// killed is set for the current process once kill or stop has ended it.
	killed *bool
	// env is the process's extra environment, kept for a restart.
	env []string
}

// startHITLCoordinator writes cfg with a listen key on a free port and starts the
// coordinator. In Cleanup a process that was not killed is stopped with SIGTERM and must
// exit with code 0.
func startHITLCoordinator(t *testing.T, cfg string) *hitlCoord {
	t.Helper()
	return startHITLCoordinatorEnv(t, cfg)
}

// startHITLCoordinatorEnv is startHITLCoordinator with extra environment (NAME=value), which
// a restart keeps.
func startHITLCoordinatorEnv(t *testing.T, cfg string, env ...string) *hitlCoord {
	t.Helper()
	var err error
	for attempt := 0; attempt < 3; attempt++ { // freePort can race with another listener
		c := &hitlCoord{path: filepath.Join(t.TempDir(), "baton.yaml"), env: env}
		text := "listen: 127.0.0.1:" + strconv.Itoa(freePort(t)) + "\n" + cfg
		require.NoError(t, os.WriteFile(c.path, []byte(text), 0o600))
		if err = c.start(t); err == nil {
			return c
		}
	}
	t.Fatalf("starting the coordinator: %v\nconfig:\n%s", err, cfg)
	return nil
}

func (c *hitlCoord) start(t *testing.T) error {
	t.Helper()
	bin, ok := buildBinaries(t)["coordinator"]
	require.True(t, ok, "cmd/coordinator has no Go files to build")
	p, err := startProcErr(t, "coordinator", []string{bin, "--config", c.path, "--log-level", "debug"},
		append([]string{llmKeyEnv + "=fake-key"}, c.env...), readyOnLine(`Baton coordinator listening on (http://\S+)`))
	if err != nil {
		return err
	}
	killed := new(bool)
	t.Cleanup(func() {
		if *killed {
			return
		}
		if code := p.Stop(); code != 0 {
			t.Errorf("coordinator exited with code %d on SIGTERM, want 0", code)
		}
	})
	// A test scripts calls of the MCP tools: they must not race the servers' first
	// connection (a stdio server started through node takes seconds under load).
	waitMCPSettled(t, p.Match[1])
	c.URL, c.p, c.killed = p.Match[1], p, killed
	return nil
}

// kill ends the coordinator and whatever it started (its process group) with SIGKILL: no
// shutdown code runs.
func (c *hitlCoord) kill(t *testing.T) {
	t.Helper()
	*c.killed = true
	require.NoError(t, syscall.Kill(-c.p.cmd.Process.Pid, syscall.SIGKILL))
	select {
	case <-c.p.Done():
	case <-time.After(coordinatorExitBound):
		t.Fatal("the coordinator did not die of SIGKILL")
	}
}

// stop sends SIGTERM to the coordinator alone and asserts that it exits with code 0 within
// coordinatorExitBound (stopCoordinator).
func (c *hitlCoord) stop(t *testing.T) {
	t.Helper()
	*c.killed = true // checked here, not again in Cleanup
	stopCoordinator(t, c.p)
}

// restart starts the coordinator again with the same config file.
func (c *hitlCoord) restart(t *testing.T) {
	t.Helper()
	old := c.URL
	require.NoError(t, c.start(t), "starting the coordinator again")
	require.Equal(t, old, c.URL, "the restarted coordinator listens where the first one did")
}

// startDemoMCPHTTP runs cmd/demo-mcp over stateless streamable HTTP on a free port and
// returns its MCP endpoint.
func startDemoMCPHTTP(t *testing.T) string {
	t.Helper()
	bin, ok := buildBinaries(t)["demo-mcp"]
	require.True(t, ok, "cmd/demo-mcp has no Go files to build")
	p := startProc(t, "demo-mcp", []string{bin, "http", "--listen", "127.0.0.1:0"}, nil,
		readyOnLine(`demo MCP server listening"? url=(http://\S+)`))
	return p.Match[1]
}

// hitlRun is what agui-client.mjs reports about one run, with the resume array it sent.
type hitlRun struct {
	aguiResult
	Resume []map[string]any `json:"resume"`
}

// hitlJob is what agui-client.mjs reports about a job: the last run, and every run.
type hitlJob struct {
	hitlRun
	Runs []hitlRun `json:"runs"`
}

// runHITLClient runs peers/agui-client.mjs like runAGUIClient, keeping the resume arrays.
func runHITLClient(t *testing.T, lane, coordURL string, job map[string]any) hitlJob {
	t.Helper()
	dir := requirePeers(t)
	node, _ := requireNode(t)
	ctx, cancel := context.WithTimeout(context.Background(), aguiClientTimeout)
	defer cancel()
	line, stderr, err := aguiClients.run(ctx, node, dir, lane, coordURL+"/agui", job)
	if stderr != "" {
		t.Cleanup(func() {
			if t.Failed() {
				t.Logf("agui-client %s stderr:\n%s", lane, stderr)
			}
		})
	}
	require.NoError(t, err, "agui-client %s", lane)
	var res hitlJob
	require.NoError(t, json.Unmarshal(line, &res), "agui-client report %q", line)
	require.NotEmpty(t, res.Runs, "agui-client reported no run")
	return res
}

// hitlJobOn is an agui-client job on thread with one user message.
func hitlJobOn(thread, runID, text string) map[string]any {
	return map[string]any{
		"threadId": thread,
		"runId":    runID,
		"messages": []any{map[string]any{"id": "u1", "role": "user", "content": text}},
	}
}

// resolved is a resumeAnswers / buildResumeArray answer that resolves with payload.
func resolved(payload map[string]any) map[string]any {
	return map[string]any{"status": "resolved", "payload": payload}
}

// cancelledAnswer is a resumeAnswers answer that abandons the interrupt.
var cancelledAnswer = map[string]any{"status": "cancelled"}

// resumeEntry is one RunAgentInput.resume entry.
func resumeEntry(id string, answer map[string]any) map[string]any {
	e := map[string]any{"interruptId": id}
	for k, v := range answer {
		e[k] = v
	}
	return e
}

// assertRun asserts what every run through the official client must satisfy (no failure,
// a terminal event that is the only RUN_FINISHED, RUN_STARTED first, no client warnings,
// no RUN_ERROR) and the outcome.
func assertRun(t *testing.T, r hitlRun, outcome string) {
	t.Helper()
	assert.Nil(t, r.Failed, "the client rejected the stream")
	assert.True(t, r.Terminal, "the stream ended without a terminal event: %v", eventTypes(r.Events))
	assert.Empty(t, r.Warnings, "client warnings")
	assert.Nil(t, r.RunError, "RUN_ERROR")
	if assert.NotNil(t, r.Outcome, "no RUN_FINISHED; events: %v", eventTypes(r.Events)) {
		assert.Equal(t, outcome, *r.Outcome, "outcome; events: %v", eventTypes(r.Events))
	}
	if assert.NotEmpty(t, r.Events) {
		assert.Equal(t, "RUN_STARTED", r.Events[0]["type"], "first event")
	}
	assert.Len(t, eventsOfType(r.Events, "RUN_FINISHED"), 1, "exactly one RUN_FINISHED")
}

// assertResumeError asserts a refused resume: RUN_STARTED then RUN_ERROR{code}, nothing else.
func assertResumeError(t *testing.T, r hitlRun, code string) {
	t.Helper()
	assert.Nil(t, r.Failed, "the client rejected the stream")
	assert.Equal(t, []string{"RUN_STARTED", "RUN_ERROR"}, eventTypes(r.Events), "events")
	if assert.NotNil(t, r.RunError, "RUN_ERROR") {
		assert.Equal(t, code, r.RunError["code"], "RUN_ERROR.code: %v", r.RunError)
		msg, _ := r.RunError["message"].(string)
		assert.NotEmpty(t, msg, "RUN_ERROR.message")
		assert.NotContains(t, msg, ".go:", "no internal detail in the message")
	}
}

// toolCallStarts returns the TOOL_CALL_START events of a run by toolCallId.
func toolCallStarts(evs []map[string]any) map[string]map[string]any {
	out := map[string]map[string]any{}
	for _, e := range eventsOfType(evs, "TOOL_CALL_START") {
		id, _ := e["toolCallId"].(string)
		out[id] = e
	}
	return out
}

// toolResults returns the contents of the TOOL_CALL_RESULT events of a run by toolCallId.
func toolResults(evs []map[string]any) map[string][]string {
	out := map[string][]string{}
	for _, e := range eventsOfType(evs, "TOOL_CALL_RESULT") {
		id, _ := e["toolCallId"].(string)
		c, _ := e["content"].(string)
		out[id] = append(out[id], c)
	}
	return out
}

// eventWith returns the events of type typ whose field key is value.
func eventWith(evs []map[string]any, typ, key, value string) []map[string]any {
	var out []map[string]any
	for _, e := range eventsOfType(evs, typ) {
		if e[key] == value {
			out = append(out, e)
		}
	}
	return out
}

// wantInterrupt is what an interrupt of DESIGN §9 must carry.
type wantInterrupt struct {
	reason string
	// message must occur in the interrupt's message.
	message string
	// tool is the name of the tool call the interrupt belongs to.
	tool string
	// a2aAgent, for A2A interrupts, is metadata.a2a.agent.
	a2aAgent string
	// mcp, for MCP interrupts, is metadata.mcp without url.
	mcp map[string]any
	// url, for URL elicitations, is metadata.mcp.url.
	url string
}

// checkInterrupt asserts the shape of one interrupt of run (the interrupted run) and returns
// its tool call id.
func checkInterrupt(t *testing.T, run hitlRun, in map[string]any, want wantInterrupt) (callID string) {
	t.Helper()
	id, _ := in["id"].(string)
	assert.True(t, strings.HasPrefix(id, "int-"), "interrupt id %q", id)
	assert.Equal(t, want.reason, in["reason"], "reason: %v", in)
	msg, _ := in["message"].(string)
	assert.Contains(t, msg, want.message, "message")
	exp, _ := in["expiresAt"].(string)
	at, err := time.Parse(time.RFC3339, exp)
	if assert.NoError(t, err, "expiresAt %q", exp) {
		assert.True(t, at.After(time.Now().Add(-time.Minute)), "expiresAt %s is in the past", exp)
	}

	callID, _ = in["toolCallId"].(string)
	start := toolCallStarts(run.Events)[callID]
	if assert.NotNil(t, start, "toolCallId %q names no TOOL_CALL_START of the run", callID) {
		assert.Equal(t, want.tool, start["toolCallName"], "the interrupted call's tool")
	}
	assert.Empty(t, toolResults(run.Events)[callID], "a suspended call has no TOOL_CALL_RESULT")

	schema, _ := in["responseSchema"].(map[string]any)
	require.NotNil(t, schema, "responseSchema: %v", in)
	assert.Equal(t, "object", schema["type"], "responseSchema.type")
	props, _ := schema["properties"].(map[string]any)
	md, _ := in["metadata"].(map[string]any)
	switch {
	case want.a2aAgent != "":
		assert.Equal(t, map[string]any{"text": map[string]any{"type": "string"}}, props, "responseSchema.properties")
		a2aMD, _ := md["a2a"].(map[string]any)
		require.NotNil(t, a2aMD, "metadata.a2a: %v", in)
		assert.Equal(t, want.a2aAgent, a2aMD["agent"], "metadata.a2a.agent")
		assert.NotEmpty(t, a2aMD["taskId"], "metadata.a2a.taskId")
		assert.NotEmpty(t, a2aMD["contextId"], "metadata.a2a.contextId")
		// The sub-agent run that waits: SUBAGENT_FINISHED{suspended, interruptIds:[id]}.
		sub, _ := in["subagentRunId"].(string)
		starts := eventWith(run.Events, "SUBAGENT_STARTED", "subagentRunId", sub)
		if assert.Len(t, starts, 1, "SUBAGENT_STARTED of subagentRunId %q", sub) {
			assert.Equal(t, callID, starts[0]["parentToolCallId"], "SUBAGENT_STARTED.parentToolCallId")
		}
		ends := eventWith(run.Events, "SUBAGENT_FINISHED", "subagentRunId", sub)
		if assert.Len(t, ends, 1, "SUBAGENT_FINISHED of subagentRunId %q", sub) {
			assert.Equal(t, map[string]any{"type": "suspended", "interruptIds": []any{id}}, ends[0]["outcome"], "SUBAGENT_FINISHED.outcome")
		}
	case want.url != "":
		mcpMD, _ := md["mcp"].(map[string]any)
		require.NotNil(t, mcpMD, "metadata.mcp: %v", in)
		assert.Equal(t, want.url, mcpMD["url"], "metadata.mcp.url")
		for k, v := range want.mcp {
			assert.Equal(t, v, mcpMD[k], "metadata.mcp.%s", k)
		}
		assert.Equal(t, map[string]any{"type": "string", "enum": []any{"accept", "decline"}}, props["action"], "responseSchema.properties.action")
	default:
		mcpMD, _ := md["mcp"].(map[string]any)
		require.NotNil(t, mcpMD, "metadata.mcp: %v", in)
		for k, v := range want.mcp {
			assert.Equal(t, v, mcpMD[k], "metadata.mcp.%s", k)
		}
		assert.Equal(t, map[string]any{"type": "string", "enum": []any{"accept", "decline"}}, props["action"], "responseSchema.properties.action")
		content, _ := props["content"].(map[string]any)
		assert.Equal(t, "object", content["type"], "responseSchema.properties.content is the requested schema: %v", props["content"])
	}
	return callID
}

// checkResumed asserts that the resume run streamed the result of the original call callID
// (TOOL_CALL_RESULT only: the call is not started again), that this result is exactly what
// the model got, and that the model then finished; it returns the result.
func checkResumed(t *testing.T, run hitlRun, model *fakellm.Server, callID string) string {
	t.Helper()
	assert.NotContains(t, toolCallStarts(run.Events), callID, "the resume run does not start the original call again")
	res := toolResults(run.Events)[callID]
	require.Len(t, res, 1, "TOOL_CALL_RESULT events for the original call %s; events: %v", callID, eventTypes(run.Events))
	assert.Equal(t, toolMessagesSeen(model)[callID], res[0], "TOOL_CALL_RESULT content must be exactly what the model got")
	assert.Equal(t, modelDoneText, plainText(run.Events), "the model's own text")
	return res[0]
}

// checkSubagentResumed asserts the sub-agent events of a resumed A2A call: the suspended
// sub-agent run is continued (same subagentRunId) and finishes with success.
func checkSubagentResumed(t *testing.T, run hitlRun, in map[string]any, agent string) {
	t.Helper()
	sub, _ := in["subagentRunId"].(string)
	starts := eventWith(run.Events, "SUBAGENT_STARTED", "subagentRunId", sub)
	if assert.Len(t, starts, 1, "the resume run continues sub-agent run %q; events: %v", sub, eventTypes(run.Events)) {
		assert.Equal(t, in["toolCallId"], starts[0]["parentToolCallId"], "SUBAGENT_STARTED.parentToolCallId")
		assert.Equal(t, agent, starts[0]["name"], "SUBAGENT_STARTED.name")
	}
	ends := eventWith(run.Events, "SUBAGENT_FINISHED", "subagentRunId", sub)
	if assert.Len(t, ends, 1, "SUBAGENT_FINISHED of %q", sub) {
		assert.Equal(t, map[string]any{"type": "success"}, ends[0]["outcome"], "SUBAGENT_FINISHED.outcome")
	}
}

// a2aTaskOf returns metadata.a2a.taskId of an interrupt.
func a2aTaskOf(in map[string]any) string {
	md, _ := in["metadata"].(map[string]any)
	a, _ := md["a2a"].(map[string]any)
	id, _ := a["taskId"].(string)
	return id
}

// peerSnapshot is the whole /test/log of a JS peer, to compare before and after.
type peerSnapshot struct {
	cancels  []string
	tasks    map[string]string
	requests int
}

func snapshotPeer(t *testing.T, base string) peerSnapshot {
	t.Helper()
	cancels, tasks := peerLog(t, base)
	return peerSnapshot{cancels: cancels, tasks: tasks, requests: len(peerVersions(t, base))}
}

// TestHITLA2AJSPeer: the @a2a-js/sdk peer's input-required and auth-required in ask_user
// mode end the run with an interrupt; the official client answers it with
// buildResumeArray(agent.pendingInterrupts, answers), the answer goes to the same task, and
// the original tool call completes with [COMPLETED]. Both client lanes.
func TestHITLA2AJSPeer(t *testing.T) {
	t.Parallel()
	requirePeers(t)
	peer := startA2APeerEnv(t)
	model := fakellm.Start(hitlModel)
	t.Cleanup(model.Close)
	coord := startHITLCoordinator(t, hitlEnv{llmURL: model.URL, agents: []agentEntry{{Name: "peer", URL: peer}}}.yaml())

	cases := []struct {
		name, prompt, reason, question, answer string
		// failureKind is the kind of the run's baton.failure event ("" for none): the
		// agent's question says the request is underspecified (DESIGN §6).
		failureKind string
	}{
		{"input-required", "input please", "input_required", "need more input: what colour?", "blue", "ambiguous_input"},
		{"auth-required", "auth please", "a2a:auth_required", "please authenticate", "signed in", ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			for _, lane := range lanes {
				t.Run(lane, func(t *testing.T) {
					job := hitlJobOn(newThreadID("hitl-a2a-"+lane), newThreadID("run"), hitlText(hitlCall{Name: "peer", Args: map[string]any{"prompt": tc.prompt}}))
					job["resumeAnswers"] = map[string]any{"*": resolved(map[string]any{"text": tc.answer})}
					res := runHITLClient(t, lane, coord.URL, job)
					require.Len(t, res.Runs, 2, "an interrupted run and its resume run; first run: failed=%v outcome=%v events=%v",
						res.Runs[0].Failed, res.Runs[0].Outcome, eventTypes(res.Runs[0].Events))
					assert.Empty(t, res.Warnings, "client warnings (whole job)")

					first := res.Runs[0]
					assertRun(t, first, "interrupt")
					require.Len(t, first.Interrupts, 1, "interrupts")
					in := first.Interrupts[0]
					callID := checkInterrupt(t, first, in, wantInterrupt{reason: tc.reason, message: tc.question, tool: "peer", a2aAgent: "peer"})
					var kinds []any
					for _, e := range eventWith(first.Events, "CUSTOM", "name", "baton.failure") {
						v, _ := e["value"].(map[string]any)
						kinds = append(kinds, v["kind"], v["action"])
					}
					if tc.failureKind == "" {
						assert.Empty(t, kinds, "baton.failure events")
					} else {
						assert.Equal(t, []any{tc.failureKind, "ask_user"}, kinds, "baton.failure events (kind, action)")
					}
					if lane == "v1" {
						require.Len(t, first.PendingInterrupts, 1, "agent.pendingInterrupts after the interrupted run")
						assert.Equal(t, in["id"], first.PendingInterrupts[0]["id"])
					}
					// The question streamed as text attributed to the sub-agent.
					sub, _ := in["subagentRunId"].(string)
					var attributed strings.Builder
					for _, e := range eventWith(first.Events, "TEXT_MESSAGE_CONTENT", "subagentRunId", sub) {
						d, _ := e["delta"].(string)
						attributed.WriteString(d)
					}
					assert.Contains(t, attributed.String(), tc.question, "the sub-agent's question as attributed text")

					second := res.Runs[1]
					assert.Equal(t, []map[string]any{{"interruptId": in["id"], "status": "resolved", "payload": map[string]any{"text": tc.answer}}},
						second.Resume, "what buildResumeArray sent")
					assertRun(t, second, "success")
					assert.Empty(t, second.PendingInterrupts, "no interrupt left open")
					got := checkResumed(t, second, model, callID)
					assert.True(t, strings.HasPrefix(got, "[COMPLETED]\n"), "result %q, want tag [COMPLETED]", got)
					assert.Contains(t, got, "done: "+tc.answer, "the answer reached the task")
					checkSubagentResumed(t, second, in, "peer")

					_, tasks := peerLog(t, peer)
					assert.Equal(t, "TASK_STATE_COMPLETED", tasks[a2aTaskOf(in)], "the peer's state of the parked task")
				})
			}
		})
	}
}

// TestHITLMCPEverything: server-everything (2025-11-25: elicitation/create inside the tool
// call, kept waiting in memory) over stdio and over stateful streamable HTTP, through the
// coordinator: a form elicitation accepted, declined and cancelled; two of them waiting at
// once on two threads; a URL elicitation; and a URL elicitation required by error -32042.
func TestHITLMCPEverything(t *testing.T) {
	t.Parallel()
	requirePeers(t)
	node, entry := everythingEntry(t)
	model := fakellm.Start(hitlModel)
	t.Cleanup(model.Close)
	transports := []struct {
		name   string
		server func(t *testing.T) mcpServerEntry
	}{
		{"stdio", func(t *testing.T) mcpServerEntry {
			return mcpServerEntry{Name: "everything", Command: []string{node, entry, "stdio"}}
		}},
		{"http", func(t *testing.T) mcpServerEntry {
			_, url := startEverythingHTTP(t, 0)
			return mcpServerEntry{Name: "everything", URL: url}
		}},
	}
	for _, tr := range transports {
		t.Run(tr.name, func(t *testing.T) {
			t.Parallel()
			// start gives a subtest a server and a coordinator of its own, so that a call left
			// waiting by a failure cannot change what the next subtest sees.
			start := func(t *testing.T) *hitlCoord {
				return startHITLCoordinator(t, hitlEnv{llmURL: model.URL, mcp: []mcpServerEntry{tr.server(t)}}.yaml())
			}
			coord := start(t)
			testEverythingForm(t, coord, model)
			// The model is stateless and its call ids unique: subtests with a coordinator
			// of their own run side by side.
			t.Run("url", func(t *testing.T) { t.Parallel(); testEverythingURL(t, start(t), model) })
			t.Run("url required by error -32042", func(t *testing.T) { t.Parallel(); testEverythingURLError(t, start(t), model) })
			t.Run("shutdown while a question waits", func(t *testing.T) {
				t.Parallel()
				// DESIGN §10: SIGTERM ends the process within its grace period, also when an
				// in-session call waits for the user (the question is lost, not the process).
				c := start(t)
				r := runHITLClient(t, "v1", c.URL, hitlJobOn(newThreadID("hitl-everything-shutdown"), newThreadID("run"),
					hitlText(hitlCall{Name: everythingFormTool, Args: map[string]any{}})))
				assertRun(t, r.hitlRun, "interrupt")
				c.stop(t)
			})
		})
	}
}

const everythingFormTool = "everything__trigger-elicitation-request"

var everythingFormMCP = map[string]any{"server": "everything", "tool": "trigger-elicitation-request", "mode": "form"}

// testEverythingForm: trigger-elicitation-request answered in every way, then two of them
// waiting at once.
func testEverythingForm(t *testing.T, coord *hitlCoord, model *fakellm.Server) {
	cases := []struct {
		name   string
		answer map[string]any
		// want must all occur in the result, after "[OK]\n".
		want []string
	}{
		{"accepted", resolved(map[string]any{"action": "accept", "content": map[string]any{
			"name": "Ada Lovelace", "check": true, "email": "ada@example.com", "integer": 7,
		}}), []string{
			"✅ User provided the requested information!", "- Name: Ada Lovelace", "- Agreed to terms: true",
			"- Email: ada@example.com", "- Favorite Integer: 7",
			// Not sent: the schema's default, applied to the accepted content.
			"- Favorite Number: 3.14",
		}},
		{"declined", resolved(map[string]any{"action": "decline"}), []string{"❌ User declined to provide the requested information."}},
		{"cancelled", cancelledAnswer, []string{"⚠️ User cancelled the elicitation dialog.", `"action": "cancel"`}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			for _, lane := range lanes {
				t.Run(lane, func(t *testing.T) {
					job := hitlJobOn(newThreadID("hitl-everything-"+lane), newThreadID("run"), hitlText(hitlCall{Name: everythingFormTool, Args: map[string]any{}}))
					job["resumeAnswers"] = map[string]any{"*": tc.answer}
					res := runHITLClient(t, lane, coord.URL, job)
					require.Len(t, res.Runs, 2, "an interrupted run and its resume run; first run: failed=%v outcome=%v events=%v",
						res.Runs[0].Failed, res.Runs[0].Outcome, eventTypes(res.Runs[0].Events))
					first := res.Runs[0]
					assertRun(t, first, "interrupt")
					require.Len(t, first.Interrupts, 1, "interrupts")
					in := first.Interrupts[0]
					callID := checkInterrupt(t, first, in, wantInterrupt{reason: "input_required", message: "Please provide inputs", tool: everythingFormTool, mcp: everythingFormMCP})
					// responseSchema.content is the server's requested schema.
					schema, _ := in["responseSchema"].(map[string]any)
					props, _ := schema["properties"].(map[string]any)
					content, _ := props["content"].(map[string]any)
					assert.Equal(t, []any{"name"}, content["required"], "requested schema: required")
					cprops, _ := content["properties"].(map[string]any)
					assert.Contains(t, cprops, "name", "requested schema: properties")
					assert.Contains(t, cprops, "untitledMultipleSelectEnum", "requested schema: properties")

					second := res.Runs[1]
					assertRun(t, second, "success")
					got := checkResumed(t, second, model, callID)
					require.True(t, strings.HasPrefix(got, "[OK]\n"), "result %q, want tag [OK]", got)
					for _, s := range tc.want {
						assert.Contains(t, got, s, "result")
					}
				})
			}
		})
	}

	// Two users' calls of the same server wait for their answers at the same time.
	t.Run("two waiting at once", func(t *testing.T) {
		text := hitlText(hitlCall{Name: everythingFormTool, Args: map[string]any{}})
		type waiting struct {
			thread, callID string
			in             map[string]any
		}
		var ws []waiting
		for i := 0; i < 2; i++ {
			thread := newThreadID("hitl-everything-two")
			r := runHITLClient(t, "v1", coord.URL, hitlJobOn(thread, newThreadID("run"), text))
			assertRun(t, r.hitlRun, "interrupt")
			if !assert.Len(t, r.Interrupts, 1, "thread %d: interrupts; TOOL_CALL_RESULTs: %v", i, toolResults(r.Events)) {
				continue
			}
			in := r.Interrupts[0]
			ws = append(ws, waiting{thread, checkInterrupt(t, r.hitlRun, in, wantInterrupt{reason: "input_required",
				message: "Please provide inputs", tool: everythingFormTool, mcp: everythingFormMCP}), in})
		}
		// Answered in the reverse order.
		for i := len(ws) - 1; i >= 0; i-- {
			w := ws[i]
			name := fmt.Sprintf("User %d", i)
			job := hitlJobOn(w.thread, newThreadID("run"), text)
			job["resume"] = []any{resumeEntry(w.in["id"].(string), resolved(map[string]any{"action": "accept", "content": map[string]any{"name": name}}))}
			r := runHITLClient(t, "v1", coord.URL, job)
			assertRun(t, r.hitlRun, "success")
			got := checkResumed(t, r.hitlRun, model, w.callID)
			assert.True(t, strings.HasPrefix(got, "[OK]\n"), "result %q, want tag [OK]", got)
			assert.Contains(t, got, "- Name: "+name, "each answer reaches its own call")
		}
	})
}

// testEverythingURL: trigger-url-elicitation sends elicitation/create {mode:"url"}.
func testEverythingURL(t *testing.T, coord *hitlCoord, model *fakellm.Server) {
	const urlTool = "everything__trigger-url-elicitation"
	const link = "https://example.com/consent?step=1"
	job := hitlJobOn(newThreadID("hitl-everything-url"), newThreadID("run"),
		hitlText(hitlCall{Name: urlTool, Args: map[string]any{"url": link, "message": "Open the consent page"}}))
	job["resumeAnswers"] = map[string]any{"*": resolved(map[string]any{"action": "accept"})}
	res := runHITLClient(t, "v1", coord.URL, job)
	require.Len(t, res.Runs, 2, "an interrupted run and its resume run; first run: failed=%v outcome=%v events=%v",
		res.Runs[0].Failed, res.Runs[0].Outcome, eventTypes(res.Runs[0].Events))
	first := res.Runs[0]
	assertRun(t, first, "interrupt")
	require.Len(t, first.Interrupts, 1, "interrupts")
	in := first.Interrupts[0]
	callID := checkInterrupt(t, first, in, wantInterrupt{reason: "mcp:url_elicitation", message: "Open the consent page", tool: urlTool,
		url: link, mcp: map[string]any{"server": "everything", "tool": "trigger-url-elicitation", "mode": "url"}})

	second := res.Runs[1]
	assertRun(t, second, "success")
	got := checkResumed(t, second, model, callID)
	assert.True(t, strings.HasPrefix(got, "[OK]\n"), "result %q, want tag [OK]", got)
	assert.Contains(t, got, "User completed the URL elicitation flow", "the accepted answer reached the waiting server")
}

// testEverythingURLError: trigger-url-elicitation {errorPath:true} answers the call with
// error -32042 naming a prerequisite URL; once the user has been there, the call is retried,
// and the retry asks for the requested URL with elicitation/create {mode:"url"}.
func testEverythingURLError(t *testing.T, coord *hitlCoord, model *fakellm.Server) {
	const urlTool = "everything__trigger-url-elicitation"
	const link = "https://example.com/authorize"
	const prerequisite = "https://modelcontextprotocol.io"
	urlMCP := map[string]any{"server": "everything", "tool": "trigger-url-elicitation", "mode": "url"}
	thread := newThreadID("hitl-everything-url-error")
	first := runHITLClient(t, "v1", coord.URL, hitlJobOn(thread, newThreadID("run"),
		hitlText(hitlCall{Name: urlTool, Args: map[string]any{"url": link, "errorPath": true}})))
	assertRun(t, first.hitlRun, "interrupt")
	require.Len(t, first.Interrupts, 1, "interrupts; TOOL_CALL_RESULTs: %v", toolResults(first.Events))
	in := first.Interrupts[0]
	callID := checkInterrupt(t, first.hitlRun, in, wantInterrupt{reason: "mcp:url_elicitation", message: "satisfy the prerequisite",
		tool: urlTool, url: prerequisite, mcp: urlMCP})

	// The user has been to the prerequisite URL: the call is retried and asks for the next one.
	job := hitlJobOn(thread, newThreadID("run"), "")
	job["messages"] = []any{}
	job["resume"] = []any{resumeEntry(in["id"].(string), resolved(map[string]any{"action": "accept"}))}
	second := runHITLClient(t, "v1", coord.URL, job)
	assertRun(t, second.hitlRun, "interrupt")
	require.Len(t, second.Interrupts, 1, "the retried call's URL elicitation; TOOL_CALL_RESULTs: %v", toolResults(second.Events))
	next := second.Interrupts[0]
	assert.NotEqual(t, in["id"], next["id"], "a new question, a new interrupt")
	assert.Equal(t, "mcp:url_elicitation", next["reason"])
	assert.Equal(t, callID, next["toolCallId"], "still the original tool call")
	md, _ := next["metadata"].(map[string]any)
	mcpMD, _ := md["mcp"].(map[string]any)
	assert.Equal(t, link, mcpMD["url"], "metadata.mcp.url")

	job = hitlJobOn(thread, newThreadID("run"), "")
	job["messages"] = []any{}
	job["resume"] = []any{resumeEntry(next["id"].(string), resolved(map[string]any{"action": "accept"}))}
	third := runHITLClient(t, "v1", coord.URL, job)
	assertRun(t, third.hitlRun, "success")
	got := checkResumed(t, third.hitlRun, model, callID)
	assert.True(t, strings.HasPrefix(got, "[OK]\n"), "result %q, want tag [OK]", got)
	assert.Contains(t, got, "User completed the URL elicitation flow")
	assert.Contains(t, got, "URL: "+link)
}

// TestHITLMCPDeployMRTR: the demo deploy tool over stateless HTTP (2026-07-28: the input
// request comes back in the tool result, the call is retried with inputResponses) accepted
// and declined, and an answer outside the requested schema refused.
func TestHITLMCPDeployMRTR(t *testing.T) {
	t.Parallel()
	requirePeers(t)
	demo := startDemoMCPHTTP(t)
	model := fakellm.Start(hitlModel)
	t.Cleanup(model.Close)
	coord := startHITLCoordinator(t, hitlEnv{llmURL: model.URL, mcp: []mcpServerEntry{{Name: "demo", URL: demo}}}.yaml())

	const tool = "demo__deploy"
	want := wantInterrupt{reason: "input_required", message: "Deploy api (latest) to which environment?", tool: tool,
		mcp: map[string]any{"server": "demo", "tool": "deploy", "mode": "form"}}
	cases := []struct {
		name   string
		answer map[string]any
		result string
	}{
		{"accepted", resolved(map[string]any{"action": "accept", "content": map[string]any{"environment": "staging"}}),
			"[OK]\nDeployed api (latest) to staging. (Demo: nothing was deployed.)"},
		{"declined", resolved(map[string]any{"action": "decline"}),
			`[OK]` + "\n" + `Deployment of api was not started: the user chose "decline".`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			for _, lane := range lanes {
				t.Run(lane, func(t *testing.T) {
					job := hitlJobOn(newThreadID("hitl-deploy-"+lane), newThreadID("run"), hitlText(hitlCall{Name: tool, Args: map[string]any{"service": "api"}}))
					job["resumeAnswers"] = map[string]any{"*": tc.answer}
					res := runHITLClient(t, lane, coord.URL, job)
					require.Len(t, res.Runs, 2, "an interrupted run and its resume run; first run: failed=%v outcome=%v events=%v",
						res.Runs[0].Failed, res.Runs[0].Outcome, eventTypes(res.Runs[0].Events))
					first := res.Runs[0]
					assertRun(t, first, "interrupt")
					require.Len(t, first.Interrupts, 1, "interrupts")
					in := first.Interrupts[0]
					callID := checkInterrupt(t, first, in, want)
					schema, _ := in["responseSchema"].(map[string]any)
					props, _ := schema["properties"].(map[string]any)
					content, _ := props["content"].(map[string]any)
					cprops, _ := content["properties"].(map[string]any)
					env, _ := cprops["environment"].(map[string]any)
					assert.Equal(t, []any{"staging", "production"}, env["enum"], "requested schema: environment enum")

					second := res.Runs[1]
					assertRun(t, second, "success")
					assert.Equal(t, tc.result, checkResumed(t, second, model, callID), "result")
				})
			}
		})
	}

	t.Run("answer outside the schema", func(t *testing.T) {
		thread := newThreadID("hitl-deploy-invalid")
		first := runHITLClient(t, "v1", coord.URL, hitlJobOn(thread, newThreadID("run"), hitlText(hitlCall{Name: tool, Args: map[string]any{"service": "api"}})))
		assertRun(t, first.hitlRun, "interrupt")
		require.Len(t, first.Interrupts, 1, "interrupts")
		in := first.Interrupts[0]
		callID := checkInterrupt(t, first.hitlRun, in, want)
		requests := len(model.Requests())

		for _, bad := range []map[string]any{
			{"action": "accept", "content": map[string]any{"environment": "moon"}}, // not in the enum
			{"action": "accept", "content": map[string]any{}},                      // required field missing
			{"action": "maybe"}, // not an action
		} {
			job := hitlJobOn(thread, newThreadID("run"), "")
			job["messages"] = []any{}
			job["resume"] = []any{resumeEntry(in["id"].(string), resolved(bad))}
			r := runHITLClient(t, "v1", coord.URL, job)
			assertResumeError(t, r.hitlRun, "INVALID_RESUME")
		}
		assert.Equal(t, requests, len(model.Requests()), "a refused resume does not reach the model")

		// The interrupt is still open and can be answered properly.
		job := hitlJobOn(thread, newThreadID("run"), "")
		job["messages"] = []any{}
		job["resume"] = []any{resumeEntry(in["id"].(string), resolved(map[string]any{"action": "accept", "content": map[string]any{"environment": "production"}}))}
		r := runHITLClient(t, "v1", coord.URL, job)
		assertRun(t, r.hitlRun, "success")
		assert.Equal(t, "[OK]\nDeployed api (latest) to production. (Demo: nothing was deployed.)", checkResumed(t, r.hitlRun, model, callID))
	})
}

// TestHITLRestart: the coordinator is killed (SIGKILL) while an A2A input-required task and
// an MRTR elicitation, both raised in one run, wait for the user; started again on the same
// SQLite store, it completes both from the resume. An in-session (2025-11-25) elicitation
// cannot survive the restart: its resume gets a tool error saying so, never a hang.
func TestHITLRestart(t *testing.T) {
	t.Parallel()
	requirePeers(t)
	peer := startA2APeerEnv(t)
	demo := startDemoMCPHTTP(t)
	node, entry := everythingEntry(t)
	model := fakellm.Start(hitlModel)
	t.Cleanup(model.Close)
	db := filepath.Join(t.TempDir(), "baton.db")
	coord := startHITLCoordinator(t, hitlEnv{llmURL: model.URL, store: "sqlite:" + db,
		agents: []agentEntry{{Name: "peer", URL: peer}},
		mcp: []mcpServerEntry{
			{Name: "demo", URL: demo},
			{Name: "everything", Command: []string{node, entry, "stdio"}},
		}}.yaml())

	// Thread A: the A2A task and the MRTR call, in one turn of one run.
	threadA, runA := newThreadID("hitl-restart-a"), newThreadID("run")
	textA := hitlText(
		hitlCall{Name: "peer", Args: map[string]any{"prompt": "input please"}},
		hitlCall{Name: "demo__deploy", Args: map[string]any{"service": "api"}},
	)
	a := runHITLClient(t, "v1", coord.URL, hitlJobOn(threadA, runA, textA))
	assertRun(t, a.hitlRun, "interrupt")
	require.Len(t, a.Interrupts, 2, "one run, two interrupts: %v", a.Interrupts)
	var a2aIn, mcpIn map[string]any
	for _, in := range a.Interrupts {
		if md, _ := in["metadata"].(map[string]any); md["a2a"] != nil {
			a2aIn = in
		} else {
			mcpIn = in
		}
	}
	require.NotNil(t, a2aIn, "the A2A interrupt")
	require.NotNil(t, mcpIn, "the MCP interrupt")
	a2aCall := checkInterrupt(t, a.hitlRun, a2aIn, wantInterrupt{reason: "input_required", message: "what colour?", tool: "peer", a2aAgent: "peer"})
	mcpCall := checkInterrupt(t, a.hitlRun, mcpIn, wantInterrupt{reason: "input_required", message: "Deploy api", tool: "demo__deploy",
		mcp: map[string]any{"server": "demo", "tool": "deploy", "mode": "form"}})

	// Thread B: an in-session elicitation.
	threadB := newThreadID("hitl-restart-b")
	b := runHITLClient(t, "v1", coord.URL, hitlJobOn(threadB, newThreadID("run"),
		hitlText(hitlCall{Name: "everything__trigger-elicitation-request", Args: map[string]any{}})))
	assertRun(t, b.hitlRun, "interrupt")
	require.Len(t, b.Interrupts, 1, "interrupts")
	sessIn := b.Interrupts[0]
	sessCall := checkInterrupt(t, b.hitlRun, sessIn, wantInterrupt{reason: "input_required", message: "Please provide inputs",
		tool: "everything__trigger-elicitation-request", mcp: map[string]any{"server": "everything", "mode": "form"}})

	assert.Equal(t, 3.0, metricSamples(t, coord.URL)["baton_interrupts_open"], "open interrupts before the restart")
	coord.kill(t)
	coord.restart(t)
	// The gauge is loaded from the store at start.
	assert.Equal(t, 3.0, metricSamples(t, coord.URL)["baton_interrupts_open"], "open interrupts after the restart")

	// A plain run re-emits thread A's interrupts from the store, with the same ids.
	again := runHITLClient(t, "v1", coord.URL, hitlJobOn(threadA, newThreadID("run"), textA))
	assertRun(t, again.hitlRun, "interrupt")
	var reIDs []any
	for _, in := range again.Interrupts {
		reIDs = append(reIDs, in["id"])
	}
	assert.ElementsMatch(t, []any{a2aIn["id"], mcpIn["id"]}, reIDs, "the interrupts re-emitted after the restart")

	// The resume after the restart completes both.
	job := hitlJobOn(threadA, runA, textA) // the interrupted run's id, as CopilotKit sends it
	job["resume"] = []any{
		resumeEntry(a2aIn["id"].(string), resolved(map[string]any{"text": "blue"})),
		resumeEntry(mcpIn["id"].(string), resolved(map[string]any{"action": "accept", "content": map[string]any{"environment": "staging"}})),
	}
	r := runHITLClient(t, "v1", coord.URL, job)
	assertRun(t, r.hitlRun, "success")
	got := checkResumed(t, r.hitlRun, model, a2aCall)
	assert.True(t, strings.HasPrefix(got, "[COMPLETED]\n"), "A2A result %q, want tag [COMPLETED]", got)
	assert.Contains(t, got, "done: blue", "the answer reached the task")
	checkSubagentResumed(t, r.hitlRun, a2aIn, "peer")
	got = checkResumed(t, r.hitlRun, model, mcpCall)
	assert.Equal(t, "[OK]\nDeployed api (latest) to staging. (Demo: nothing was deployed.)", got, "MCP result")
	_, tasks := peerLog(t, peer)
	assert.Equal(t, "TASK_STATE_COMPLETED", tasks[a2aTaskOf(a2aIn)], "the peer's state of the parked task")

	// Thread B's question was lost with the process that held the call.
	job = hitlJobOn(threadB, newThreadID("run"), "")
	job["messages"] = []any{}
	job["resume"] = []any{resumeEntry(sessIn["id"].(string), resolved(map[string]any{"action": "decline"}))}
	rb := runHITLClient(t, "v1", coord.URL, job)
	assert.Nil(t, rb.Failed, "the client rejected the stream")
	assert.True(t, rb.Terminal, "a terminal event, not a hang: %v", eventTypes(rb.Events))
	assert.Empty(t, rb.Warnings, "client warnings")
	res := toolResults(rb.Events)[sessCall]
	require.Len(t, res, 1, "TOOL_CALL_RESULT for the lost call; events: %v (RUN_ERROR %v)", eventTypes(rb.Events), rb.RunError)
	sig := retrySignal(t, res[0], "tool_error", "everything__trigger-elicitation-request")
	msg, _ := sig["message"].(string)
	assert.Contains(t, msg, "restart", "the model is told why")
	assert.Equal(t, 0.0, metricSamples(t, coord.URL)["baton_interrupts_open"], "every interrupt answered: none open, none below zero")
}

// TestHITLResumeRules: the resume rules of DESIGN §9 against the JS peer: refused resumes
// (bad payload, an open interrupt not covered) send nothing; a plain run re-emits the open
// interrupt; the resume may repeat the interrupted run's runId; a duplicate resume sends
// nothing twice; two sub-agents waiting at once make one run with two interrupts.
func TestHITLResumeRules(t *testing.T) {
	t.Parallel()
	requirePeers(t)
	peer := startA2APeerEnv(t)
	peer2 := startA2APeerEnv(t)
	model := fakellm.Start(hitlModel)
	t.Cleanup(model.Close)
	coord := startHITLCoordinator(t, hitlEnv{llmURL: model.URL,
		agents: []agentEntry{{Name: "peer", URL: peer}, {Name: "peer2", URL: peer2}}}.yaml())

	t.Run("validation, re-emission, repeated runId, duplicate", func(t *testing.T) {
		thread, runID := newThreadID("hitl-rules"), newThreadID("run")
		text := hitlText(hitlCall{Name: "peer", Args: map[string]any{"prompt": "input please"}})
		first := runHITLClient(t, "v1", coord.URL, hitlJobOn(thread, runID, text))
		assertRun(t, first.hitlRun, "interrupt")
		require.Len(t, first.Interrupts, 1, "interrupts")
		in := first.Interrupts[0]
		id := in["id"].(string)
		callID := checkInterrupt(t, first.hitlRun, in, wantInterrupt{reason: "input_required", message: "what colour?", tool: "peer", a2aAgent: "peer"})

		requests := len(model.Requests())
		before := snapshotPeer(t, peer)
		for _, bad := range []struct {
			name   string
			resume []any
		}{
			{"payload of the wrong type", []any{resumeEntry(id, resolved(map[string]any{"text": 42}))}},
			{"required field missing", []any{resumeEntry(id, resolved(map[string]any{"answer": "blue"}))}},
			{"open interrupt not covered", []any{resumeEntry("int-0000000000000000", resolved(map[string]any{"text": "blue"}))}},
		} {
			t.Run(bad.name, func(t *testing.T) {
				job := hitlJobOn(thread, newThreadID("run"), text)
				job["resume"] = bad.resume
				r := runHITLClient(t, "v1", coord.URL, job)
				assertResumeError(t, r.hitlRun, "INVALID_RESUME")
			})
		}
		assert.Equal(t, requests, len(model.Requests()), "a refused resume does not reach the model")
		assert.Equal(t, before, snapshotPeer(t, peer), "a refused resume sends nothing to the sub-agent")

		// A plain run re-emits the open interrupt, without calling the model.
		for _, lane := range lanes {
			again := runHITLClient(t, lane, coord.URL, hitlJobOn(thread, newThreadID("run"), text))
			assertRun(t, again.hitlRun, "interrupt")
			require.Len(t, again.Interrupts, 1, "%s: re-emitted interrupts", lane)
			assert.Equal(t, in, again.Interrupts[0], "%s: the same interrupt, unchanged", lane)
		}
		assert.Equal(t, requests, len(model.Requests()), "re-emission does not call the model")
		assert.Equal(t, before, snapshotPeer(t, peer), "re-emission sends nothing to the sub-agent")

		// The resume repeats the interrupted run's runId (CopilotKit pins it).
		job := hitlJobOn(thread, runID, text)
		resume := []any{resumeEntry(id, resolved(map[string]any{"text": "blue"}))}
		job["resume"] = resume
		r := runHITLClient(t, "v1", coord.URL, job)
		assertRun(t, r.hitlRun, "success")
		got := checkResumed(t, r.hitlRun, model, callID)
		assert.True(t, strings.HasPrefix(got, "[COMPLETED]\n"), "result %q, want tag [COMPLETED]", got)
		assert.Contains(t, got, "done: blue")
		after := snapshotPeer(t, peer)
		assert.Equal(t, "TASK_STATE_COMPLETED", after.tasks[a2aTaskOf(in)])

		// The same resume again, on both lanes: nothing is sent twice.
		requests = len(model.Requests())
		for _, lane := range lanes {
			job := hitlJobOn(thread, runID, text)
			job["resume"] = resume
			dup := runHITLClient(t, lane, coord.URL, job)
			assertRun(t, dup.hitlRun, "success")
			assert.Empty(t, eventsOfType(dup.Events, "TOOL_CALL_RESULT"), "%s: nothing delivered again", lane)
			assert.Empty(t, eventsOfType(dup.Events, "SUBAGENT_STARTED"), "%s: nothing delivered again", lane)
		}
		assert.Equal(t, requests, len(model.Requests()), "a duplicate resume does not call the model")
		assert.Equal(t, after, snapshotPeer(t, peer), "a duplicate resume sends nothing to the sub-agent")
	})

	t.Run("two sub-agents waiting at once", func(t *testing.T) {
		for _, lane := range lanes {
			t.Run(lane, func(t *testing.T) {
				job := hitlJobOn(newThreadID("hitl-two-"+lane), newThreadID("run"), hitlText(
					hitlCall{Name: "peer", Args: map[string]any{"prompt": "input one"}},
					hitlCall{Name: "peer2", Args: map[string]any{"prompt": "input two"}},
				))
				job["resumeAnswers"] = map[string]any{"*": resolved(map[string]any{"text": "blue"})}
				res := runHITLClient(t, lane, coord.URL, job)
				require.Len(t, res.Runs, 2, "an interrupted run and its resume run; first run: failed=%v outcome=%v events=%v",
					res.Runs[0].Failed, res.Runs[0].Outcome, eventTypes(res.Runs[0].Events))
				first := res.Runs[0]
				assertRun(t, first, "interrupt")
				require.Len(t, first.Interrupts, 2, "one run ends with both interrupts")
				calls := map[string]map[string]any{} // agent → interrupt
				for _, in := range first.Interrupts {
					md, _ := in["metadata"].(map[string]any)
					a, _ := md["a2a"].(map[string]any)
					agent, _ := a["agent"].(string)
					calls[agent] = in
				}
				require.Len(t, calls, 2, "one interrupt per sub-agent: %v", first.Interrupts)
				callIDs := map[string]string{}
				for agent, in := range calls {
					callIDs[agent] = checkInterrupt(t, first, in, wantInterrupt{reason: "input_required", message: "what colour?", tool: agent, a2aAgent: agent})
				}
				assert.NotEqual(t, calls["peer"]["subagentRunId"], calls["peer2"]["subagentRunId"], "two sub-agent runs")

				second := res.Runs[1]
				assert.Len(t, second.Resume, 2, "buildResumeArray covers both")
				assertRun(t, second, "success")
				for agent, in := range calls {
					got := checkResumed(t, second, model, callIDs[agent])
					assert.True(t, strings.HasPrefix(got, "[COMPLETED]\n"), "%s: result %q, want tag [COMPLETED]", agent, got)
					assert.Contains(t, got, "done: blue", agent)
					checkSubagentResumed(t, second, in, agent)
				}
				_, tasks := peerLog(t, peer)
				assert.Equal(t, "TASK_STATE_COMPLETED", tasks[a2aTaskOf(calls["peer"])])
				_, tasks = peerLog(t, peer2)
				assert.Equal(t, "TASK_STATE_COMPLETED", tasks[a2aTaskOf(calls["peer2"])])
			})
		}
	})
}

// TestHITLExpiry: with interrupts.ttl 2s, a resume after the interrupt expired gets
// RUN_STARTED then RUN_ERROR{INTERRUPT_EXPIRED}, and the parked task got CancelTask.
func TestHITLExpiry(t *testing.T) {
	t.Parallel()
	requirePeers(t)
	peer := startA2APeerEnv(t)
	model := fakellm.Start(hitlModel)
	t.Cleanup(model.Close)
	coord := startHITLCoordinator(t, hitlEnv{llmURL: model.URL, ttl: "2s", agents: []agentEntry{{Name: "peer", URL: peer}}}.yaml())

	thread := newThreadID("hitl-expiry")
	text := hitlText(hitlCall{Name: "peer", Args: map[string]any{"prompt": "input please"}})
	first := runHITLClient(t, "v1", coord.URL, hitlJobOn(thread, newThreadID("run"), text))
	assertRun(t, first.hitlRun, "interrupt")
	require.Len(t, first.Interrupts, 1, "interrupts")
	in := first.Interrupts[0]
	checkInterrupt(t, first.hitlRun, in, wantInterrupt{reason: "input_required", message: "what colour?", tool: "peer", a2aAgent: "peer"})
	exp, err := time.Parse(time.RFC3339, in["expiresAt"].(string))
	require.NoError(t, err)
	assert.LessOrEqual(t, time.Until(exp), 2*time.Second, "expiresAt follows interrupts.ttl")
	taskID := a2aTaskOf(in)
	cancels, _ := peerLog(t, peer)
	assert.NotContains(t, cancels, taskID, "not cancelled before it expires")

	time.Sleep(time.Until(exp) + time.Second)
	requests := len(model.Requests())
	job := hitlJobOn(thread, newThreadID("run"), text)
	job["resume"] = []any{resumeEntry(in["id"].(string), resolved(map[string]any{"text": "blue"}))}
	r := runHITLClient(t, "v1", coord.URL, job) // a fresh client: the 1.0 client refuses expired interrupts itself
	assertResumeError(t, r.hitlRun, "INTERRUPT_EXPIRED")
	assert.Equal(t, requests, len(model.Requests()), "an expired resume does not reach the model")

	cancels, tasks := peerLog(t, peer)
	assert.Contains(t, cancels, taskID, "the parked task got CancelTask")
	assert.Equal(t, "TASK_STATE_CANCELED", tasks[taskID], "the peer's state of the parked task")
}
