package integration

// End-to-end tests of the failure model (DESIGN §6–§9): every failure kind produced
// through the coordinator binary with the real openai provider (scripted by fakellm), the
// scripted A2A peer (peers/a2a-peer.mjs) and the demo MCP server (cmd/demo-mcp over stdio),
// each stream consumed by the official AG-UI client 1.0.0. For each case the baton.failure
// events, the tool results (tags and refusal JSON) and the terminal events are asserted
// exactly.
//
// Design note: the fake model is scripted by case: the user message "failure-case: <name>"
// picks the script, and the script's position is the number of requests the case has had
// (provider failures) or of assistant turns in the conversation (tool scripts, so that a
// resumed run continues where the suspended one stopped). The script records when each
// request arrived, for the lower bound on the Retry-After wait. The cases need different
// limits and policies, so they run on four coordinators that share the peer and the model.

import (
	"encoding/json"
	"fmt"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/baton-dev/baton/coordinator"
	"github.com/baton-dev/baton/failure"
	"github.com/baton-dev/baton/internal/testutil/fakellm"
	"github.com/baton-dev/baton/llm"
)

// failureCaseMarker starts the user message that names a failure case.
const failureCaseMarker = "failure-case:"

// failureScript is the fake model of the failure tests (see the file comment).
type failureScript struct {
	mu    sync.Mutex
	reqs  map[string][]fakellm.Request
	times map[string][]time.Time
	seq   atomic.Int64
}

func newFailureScript() *failureScript {
	return &failureScript{reqs: map[string][]fakellm.Request{}, times: map[string][]time.Time{}}
}

// requests returns the requests case name got, and when each arrived.
func (s *failureScript) requests(name string) ([]fakellm.Request, []time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]fakellm.Request(nil), s.reqs[name]...), append([]time.Time(nil), s.times[name]...)
}

func (s *failureScript) call(tool string, args any) fakellm.Reply {
	b, _ := json.Marshal(args)
	return fakellm.Reply{ToolCalls: []llm.ToolCall{{ID: fmt.Sprintf("call_fx_%d", s.seq.Add(1)), Name: tool, Arguments: string(b)}}}
}

func (s *failureScript) handle(req fakellm.Request) fakellm.Reply {
	at := -1
	for i, m := range req.Messages {
		if m.Role == "user" && strings.HasPrefix(m.Content, failureCaseMarker) {
			at = i
		}
	}
	if at < 0 {
		return fakellm.Reply{Text: "fake model: no " + failureCaseMarker + " message"}
	}
	name := strings.TrimSpace(strings.TrimPrefix(req.Messages[at].Content, failureCaseMarker))
	turn := 0
	for _, m := range req.Messages[at+1:] {
		if m.Role == "assistant" {
			turn++
		}
	}
	s.mu.Lock()
	n := len(s.reqs[name])
	s.reqs[name] = append(s.reqs[name], req)
	s.times[name] = append(s.times[name], time.Now())
	s.mu.Unlock()

	done := fakellm.Reply{Text: modelDoneText}
	switch name {
	case "retry-after":
		if n == 0 {
			return fakellm.Reply{Status: http.StatusTooManyRequests, Header: http.Header{"Retry-After": {"2"}}, Text: "slow down"}
		}
		return done
	case "retry-after-long":
		return fakellm.Reply{Status: http.StatusTooManyRequests, Header: http.Header{"Retry-After": {"3600"}}, Text: "come back later"}
	case "server-error":
		if n == 0 {
			return fakellm.Reply{Status: http.StatusServiceUnavailable, Text: "overloaded"}
		}
		return done
	case "truncated":
		if n == 0 {
			return fakellm.Reply{Text: "a long answer that", FinishReason: "length"}
		}
		return done
	case "refusal":
		return fakellm.Reply{Refusal: "I can't help with that."}
	case "blank":
		return fakellm.Reply{FinishReason: "tool_calls"}
	case "loop":
		return s.call("demo__divide", map[string]any{"a": 1, "b": 0})
	case "deny":
		return s.call("demo__deploy", map[string]any{"service": "web"})
	case "gap":
		return s.call("peer", map[string]any{"prompt": "unsupported: translate this video"})
	case "rate":
		return s.call("demo__count_slowly", map[string]any{"to": turn + 1, "interval_ms": 1})
	case "budget":
		return s.call("peer", map[string]any{"prompt": fmt.Sprintf("complete b%d", turn)})
	case "iteration":
		if turn < 2 {
			return s.call("peer", map[string]any{"prompt": fmt.Sprintf("complete i%d", turn)})
		}
		return done
	case "time":
		if turn == 0 {
			// Streamed slowly (five waits of 240 ms): the turn ends past the 1 s limit and
			// well before its hard stop at 2 s.
			rep := s.call("peer", map[string]any{"prompt": "complete t"})
			rep.Delay = 240 * time.Millisecond
			return rep
		}
		return done
	}
	return fakellm.Reply{Text: "fake model: unknown case " + name}
}

// failureYAML renders a coordinator config with the agent "peer", the MCP server "demo"
// (cmd/demo-mcp over stdio), the given limits and the policy section (YAML, may be empty).
func failureYAML(llmURL, peerURL, demoMCP string, maxIterations, maxRunSeconds int, policy string) string {
	var b strings.Builder
	b.WriteString("server:\n  shutdown_grace: 3s\n")
	fmt.Fprintf(&b, "llm:\n  provider: openai\n  base_url: %q\n  model: fake-model\n  api_key_env: %s\n", llmURL, llmKeyEnv)
	fmt.Fprintf(&b, "agents:\n  - name: peer\n    url: %q\n    timeout: 60s\n    input_required: model\n", peerURL)
	fmt.Fprintf(&b, "mcp_servers:\n  - name: demo\n    command: [%s, \"stdio\"]\n", strconv.Quote(demoMCP))
	fmt.Fprintf(&b, "limits:\n  max_iterations: %d\n  max_run_seconds: %d\n  tool_timeout: 60s\n", maxIterations, maxRunSeconds)
	b.WriteString(policy)
	b.WriteString("store: \"memory:\"\n")
	return b.String()
}

// failureValues returns the values of the baton.failure events of evs.
func failureValues(evs []map[string]any) []map[string]any {
	var out []map[string]any
	for _, e := range eventsOfType(evs, "CUSTOM") {
		if e["name"] == coordinator.EventFailure {
			v, _ := e["value"].(map[string]any)
			out = append(out, v)
		}
	}
	return out
}

// wantFailure is the value of one baton.failure event as the client sees it.
func wantFailure(kind failure.Kind, action failure.Action, attempt int, explanation string) map[string]any {
	return map[string]any{"kind": string(kind), "action": string(action), "attempt": float64(attempt), "explanation": explanation}
}

// toolResultsOf returns the content of every TOOL_CALL_RESULT of evs, in order.
func toolResultsOf(evs []map[string]any) []string {
	var out []string
	for _, e := range eventsOfType(evs, "TOOL_CALL_RESULT") {
		s, _ := e["content"].(string)
		out = append(out, s)
	}
	return out
}

// refusal splits "[RETRY:<code>] {json}" into the code and the decoded JSON.
func refusal(t *testing.T, result string) (string, map[string]any) {
	t.Helper()
	m := regexp.MustCompile(`^\[RETRY:([a-z_]+)\] (\{.*\})$`).FindStringSubmatch(result)
	require.NotNil(t, m, "not a retry signal: %q", result)
	var sig map[string]any
	require.NoError(t, json.Unmarshal([]byte(m[2]), &sig))
	return m[1], sig
}

// assertAccepted asserts that the official client accepted the stream: no failure, no
// warnings, a terminal event, RUN_STARTED first and exactly one RUN_FINISHED.
func assertAccepted(t *testing.T, r aguiResult) {
	t.Helper()
	assert.Nil(t, r.Failed, "the client rejected the stream")
	assert.Empty(t, r.Warnings, "client warnings")
	assert.True(t, r.Terminal, "no terminal event: %v", eventTypes(r.Events))
	assert.Nil(t, r.RunError, "RUN_ERROR")
	if assert.NotEmpty(t, r.Events) {
		assert.Equal(t, "RUN_STARTED", r.Events[0]["type"])
	}
	assert.Len(t, eventsOfType(r.Events, "RUN_FINISHED"), 1, "exactly one RUN_FINISHED")
}

// assertEndsWith asserts the terminal events of a run that ends on a handoff or a partial
// stop (DESIGN §8): the final assistant message, CUSTOM{name, h}, RUN_FINISHED with no
// outcome (not success; AG-UI has none for it) and result {stopped: kind, action}.
func assertEndsWith(t *testing.T, r aguiResult, name string, h coordinator.Handoff, kind failure.Kind, action failure.Action) {
	t.Helper()
	evs := r.Events
	require.GreaterOrEqual(t, len(evs), 5, "events: %v", eventTypes(evs))
	tail := evs[len(evs)-5:]
	assert.Equal(t, []string{"TEXT_MESSAGE_START", "TEXT_MESSAGE_CONTENT", "TEXT_MESSAGE_END", "CUSTOM", "RUN_FINISHED"}, eventTypes(tail))
	assert.Equal(t, "assistant", tail[0]["role"])
	assert.Equal(t, h.Text(), tail[1]["delta"])
	assert.Equal(t, name, tail[3]["name"])
	assert.Equal(t, map[string]any{"rationale": h.Rationale, "blockers": toAny(h.Blockers), "next_steps": toAny(h.NextSteps)}, tail[3]["value"])
	assert.NotContains(t, tail[4], "outcome", "no success claimed: AG-UI has no outcome for a run handed back")
	assert.Equal(t, map[string]any{"stopped": string(kind), "action": string(action)}, tail[4]["result"])
	if assert.NotNil(t, r.Outcome) {
		assert.Equal(t, "success", *r.Outcome, "the official client reads an absent outcome as success")
	}
}

// assertContinueInterrupt asserts that r ended with one "continue?" interrupt for kind.
func assertContinueInterrupt(t *testing.T, r aguiResult, kind failure.Kind, question string) {
	t.Helper()
	require.NotNil(t, r.Outcome)
	require.Equal(t, "interrupt", *r.Outcome, "events: %v", eventTypes(r.Events))
	require.Len(t, r.Interrupts, 1)
	in := r.Interrupts[0]
	assert.Equal(t, "input_required", in["reason"])
	assert.Equal(t, question, in["message"])
	assert.Equal(t, map[string]any{"type": "object", "properties": map[string]any{"continue": map[string]any{"type": "boolean"}},
		"required": []any{"continue"}}, in["responseSchema"])
	assert.Equal(t, map[string]any{"baton": map[string]any{"kind": string(kind)}}, in["metadata"])
	assert.NotContains(t, in, "toolCallId", "a continue question belongs to no tool call")
	assert.NotEmpty(t, in["expiresAt"])
}

// assertHandedOff asserts a run handed off after one failure of kind: its one
// baton.failure event, and the handoff it ends with (the failure's explanation is the
// rationale).
func assertHandedOff(t *testing.T, r aguiResult, kind failure.Kind, expl string, blockers, nextSteps []string) {
	t.Helper()
	assert.Equal(t, []map[string]any{wantFailure(kind, failure.ActionHandoff, 1, expl)}, failureValues(r.Events))
	assertEndsWith(t, r, coordinator.EventHandoff, coordinator.Handoff{Rationale: expl, Blockers: blockers, NextSteps: nextSteps},
		kind, failure.ActionHandoff)
}

// assertPolicyHandoff asserts a run handed off because the policy refused a call of tool
// with msg.
func assertPolicyHandoff(t *testing.T, r aguiResult, tool, msg string) {
	t.Helper()
	assertHandedOff(t, r, failure.KindPolicyViolation, msg,
		[]string{"the coordinator's policy does not allow this (" + tool + ")"},
		[]string{"ask an operator to review the coordinator's policy"})
}

// assertAskedThenContinued asserts a job whose first run stopped at a limit of kind and
// asked the user (expl), who continued: the resume run has no failure and the model's
// answer.
func assertAskedThenContinued(t *testing.T, r aguiResult, first aguiResult, kind failure.Kind, expl string) {
	t.Helper()
	assert.Equal(t, []map[string]any{wantFailure(kind, failure.ActionAskUser, 1, expl)}, failureValues(first.Events))
	assertContinueInterrupt(t, first, kind, expl+" Continue?")
	assert.Empty(t, failureValues(r.Events))
	assert.Equal(t, modelDoneText, plainText(r.Events))
	assert.Equal(t, "success", *r.Outcome)
}

// resumedJob checks that a job ran twice and returns its first run, with the n tool
// results of that run.
func resumedJob(t *testing.T, r aguiResult, n int) (first aguiResult, results []string) {
	t.Helper()
	require.Len(t, r.Runs, 2)
	first = r.Runs[0]
	results = toolResultsOf(first.Events)
	require.Len(t, results, n)
	return first, results
}

func toAny(ss []string) []any {
	out := make([]any, len(ss))
	for i, s := range ss {
		out[i] = s
	}
	return out
}

// failureJob is an agui-client job running case name on a fresh thread; resume, if set,
// answers every interrupt of the first run with {continue: resume}.
func failureJob(name string, resume *bool) map[string]any {
	job := userJob("failure-"+name, failureCaseMarker+" "+name)
	if resume != nil {
		job["resumeAnswers"] = map[string]any{"*": map[string]any{"status": "resolved", "payload": map[string]any{"continue": *resume}}}
	}
	return job
}

// lastRequestSystem is the system prompt of the last request case name got.
func lastRequestSystem(t *testing.T, s *failureScript, name string) string {
	t.Helper()
	reqs, _ := s.requests(name)
	require.NotEmpty(t, reqs)
	msgs := reqs[len(reqs)-1].Messages
	require.NotEmpty(t, msgs)
	require.Equal(t, "system", msgs[0].Role)
	return msgs[0].Content
}

func TestFailureModel(t *testing.T) {
	t.Parallel()
	requirePeers(t)
	bins := buildBinaries(t)
	demoMCP, ok := bins["demo-mcp"]
	require.True(t, ok, "cmd/demo-mcp has no Go files to build")
	peer, _ := startA2APeer(t, false)
	script := newFailureScript()
	model := fakellm.Start(script.handle)
	t.Cleanup(model.Close)

	primary := startCoordinator(t, failureYAML(model.URL, peer, demoMCP, 10, 120,
		"policy:\n  tools:\n    deny: [demo__deploy]\n"))
	quota := startCoordinator(t, failureYAML(model.URL, peer, demoMCP, 10, 120,
		"policy:\n  rate_limits:\n    - tool: demo__count_slowly\n      max_calls: 1\n      per: 1h\n  budget:\n    max_tool_calls: 2\n"))
	iter := startCoordinator(t, failureYAML(model.URL, peer, demoMCP, 2, 120, ""))
	timed := startCoordinator(t, failureYAML(model.URL, peer, demoMCP, 10, 1, ""))

	run := func(t *testing.T, coord, name string, resume *bool) aguiResult {
		t.Helper()
		r := runAGUIClient(t, "v1", coord+"/agui", failureJob(name, resume))
		assertAccepted(t, r)
		for i, run := range r.Runs {
			assert.Nil(t, run.Failed, "run %d rejected by the client", i)
			assert.True(t, run.Terminal, "run %d: no terminal event", i)
			assert.Empty(t, run.Warnings, "run %d: client warnings", i)
		}
		return r
	}

	t.Run("429 with Retry-After 2 is waited, then succeeds", func(t *testing.T) {
		r := run(t, primary, "retry-after", nil)
		assert.Equal(t, []map[string]any{wantFailure(failure.KindTransientProvider, failure.ActionRetry, 1,
			"The language model is rate limiting requests. Retrying in 2s (retry 1 of 3).")}, failureValues(r.Events))
		assert.Equal(t, modelDoneText, plainText(r.Events))
		assert.Equal(t, "success", *r.Outcome)
		assert.Nil(t, eventsOfType(r.Events, "RUN_FINISHED")[0]["result"])
		reqs, times := script.requests("retry-after")
		require.Len(t, reqs, 2, "one retry, no SDK retries")
		assert.GreaterOrEqual(t, times[1].Sub(times[0]), 2*time.Second, "Retry-After is honoured")
	})

	t.Run("429 with Retry-After 3600 is reported, not slept", func(t *testing.T) {
		r := run(t, primary, "retry-after-long", nil)
		expl := "The language model is rate limiting requests. It asked to wait 1h0m0s before trying again, which is longer than this coordinator waits (30s)."
		assertHandedOff(t, r, failure.KindTransientProvider, expl,
			[]string{"the language model provider asked to wait 1h0m0s"}, []string{"try again in 1h0m0s"})
		reqs, _ := script.requests("retry-after-long")
		assert.Len(t, reqs, 1, "the coordinator did not wait to ask again")
	})

	t.Run("5xx backs off, then succeeds", func(t *testing.T) {
		r := run(t, primary, "server-error", nil)
		fs := failureValues(r.Events)
		require.Len(t, fs, 1)
		m := regexp.MustCompile(`^The language model had a server error\. Retrying in (\d+)ms \(retry 1 of 3\)\.$`).FindStringSubmatch(fs[0]["explanation"].(string))
		require.NotNil(t, m, "explanation %q", fs[0]["explanation"])
		wait, _ := strconv.Atoi(m[1])
		assert.GreaterOrEqual(t, wait, 250, "first backoff: 500 ms with jitter over its upper half")
		assert.LessOrEqual(t, wait, 500)
		assert.Equal(t, wantFailure(failure.KindTransientProvider, failure.ActionRetry, 1, m[0]), fs[0])
		assert.Equal(t, modelDoneText, plainText(r.Events))
		reqs, times := script.requests("server-error")
		require.Len(t, reqs, 2)
		assert.GreaterOrEqual(t, times[1].Sub(times[0]), time.Duration(wait)*time.Millisecond)
	})

	t.Run("truncation is asked again", func(t *testing.T) {
		r := run(t, primary, "truncated", nil)
		assert.Equal(t, []map[string]any{wantFailure(failure.KindOutputTruncated, failure.ActionRetry, 1,
			"The language model's reply was cut off at its output length limit. Asking again (retry 1 of 1).")}, failureValues(r.Events))
		assert.Equal(t, "a long answer that"+modelDoneText, plainText(r.Events), "the cut-off text was streamed, then the full answer")
		assert.Equal(t, "success", *r.Outcome)
		reqs, _ := script.requests("truncated")
		require.Len(t, reqs, 2)
		assert.Len(t, reqs[1].Messages, 2, "the truncated turn is not in the history")
		assert.Contains(t, lastRequestSystem(t, script, "truncated"), "<lessons_learned>")
	})

	t.Run("refusal hands off", func(t *testing.T) {
		r := run(t, primary, "refusal", nil)
		expl := "The language model declined to answer this request."
		assert.True(t, strings.HasPrefix(plainText(r.Events), "I can't help with that."), "the refusal is shown: %q", plainText(r.Events))
		assertHandedOff(t, r, failure.KindOutputRefused, expl,
			[]string{"the language model declined the request"}, []string{"rephrase the request"})
	})

	t.Run("blank turns: corrective instruction, then handoff", func(t *testing.T) {
		r := run(t, primary, "blank", nil)
		assert.Equal(t, []map[string]any{
			wantFailure(failure.KindNoProgress, failure.ActionNarrowScope, 1, "The language model replied with neither an answer nor a tool call. The model is asked to change its approach."),
			wantFailure(failure.KindNoProgress, failure.ActionHandoff, 2, "The language model replied with neither an answer nor a tool call. It happened again after a corrective instruction."),
		}, failureValues(r.Events))
		assertEndsWith(t, r, coordinator.EventHandoff, coordinator.Handoff{
			Rationale: "The language model replied with neither an answer nor a tool call. It happened again after a corrective instruction.",
			Blockers:  []string{"the work was not making progress"}, NextSteps: []string{"ask again with a narrower, more specific request"}},
			failure.KindNoProgress, failure.ActionHandoff)
		reqs, _ := script.requests("blank")
		require.Len(t, reqs, 2)
		assert.Contains(t, lastRequestSystem(t, script, "blank"), "<corrective_instruction>")
	})

	t.Run("the same failing call until loop_detected, then stop", func(t *testing.T) {
		stop := false
		r := run(t, primary, "loop", &stop)
		first, res := resumedJob(t, r, 3)
		// Only what is useful now: the tool just called, and ask_user (DESIGN §7).
		valid := []any{"demo__divide", "ask_user"}
		for i, left := range []float64{2, 1} {
			code, sig := refusal(t, res[i])
			assert.Equal(t, "tool_error", code)
			assert.Equal(t, map[string]any{"error": "tool_error", "requested": "demo__divide",
				"message":            "The tool reported an error. Fix the cause (arguments, order of calls) and call again, or use another way.",
				"valid_next_actions": valid, "error_message": "division by zero", "attempts_left": left}, sig, "call %d", i+1)
		}
		code, sig := refusal(t, res[2])
		assert.Equal(t, "loop_detected", code)
		assert.Equal(t, map[string]any{"error": "loop_detected", "requested": "demo__divide",
			"message": "This call was not sent: it repeats an earlier identical call that did not get the work done. " +
				"Change the approach (other arguments, another tool) or tell the user what blocks you.",
			"valid_next_actions": valid}, sig)
		loopExpl := `The same call to the tool "demo__divide" with the same arguments was about to be made for the third time.`
		assert.Equal(t, []map[string]any{
			wantFailure(failure.KindToolError, failure.ActionRetry, 1, `The tool "demo__divide" reported an error. The model may correct the call (retry 1 of 2).`),
			wantFailure(failure.KindToolError, failure.ActionRetry, 2, `The tool "demo__divide" reported an error. The model may correct the call (retry 2 of 2).`),
			wantFailure(failure.KindLoopDetected, failure.ActionAskUser, 1, loopExpl+" Your decision is needed to go on."),
		}, failureValues(first.Events))
		assertContinueInterrupt(t, first, failure.KindLoopDetected, loopExpl+" Your decision is needed to go on. Continue?")

		// The user stops: a partial result, and the model is not called again.
		assert.Empty(t, failureValues(r.Events))
		assertEndsWith(t, r, coordinator.EventPartial, coordinator.Handoff{Rationale: loopExpl + " You chose to stop here.",
			Blockers: []string{"the same step kept repeating"}, NextSteps: []string{"say whether to continue", "ask again with more detail"}},
			failure.KindLoopDetected, failure.ActionStop)
		reqs, _ := script.requests("loop")
		assert.Len(t, reqs, 3)
	})

	t.Run("a denied tool is refused and handed off", func(t *testing.T) {
		r := run(t, primary, "deny", nil)
		reqs, _ := script.requests("deny")
		require.Len(t, reqs, 1)
		assert.NotContains(t, reqs[0].ToolNames(), "demo__deploy", "a denied tool is not offered")
		assert.Contains(t, reqs[0].ToolNames(), "demo__divide")
		res := toolResultsOf(r.Events)
		require.Len(t, res, 1)
		msg := `The coordinator's policy does not allow calling the tool "demo__deploy". Use one of valid_next_actions instead.`
		code, sig := refusal(t, res[0])
		assert.Equal(t, "policy_deny", code)
		assert.Equal(t, map[string]any{"error": "policy_deny", "requested": "demo__deploy", "message": msg,
			"valid_next_actions": []any{"ask_user", "demo__count_slowly", "demo__delete_release", "demo__divide", "peer"},
			"resolution":         map[string]any{"type": "use_other_tool"}}, sig)
		assertPolicyHandoff(t, r, "demo__deploy", msg)
		types := eventTypes(r.Events)
		assert.Equal(t, []string{"TOOL_CALL_RESULT", "CUSTOM"}, types[len(types)-7:len(types)-5], "the refusal is streamed before the failure")
	})

	t.Run("an agent that cannot serve the request is a capability gap, handed off", func(t *testing.T) {
		// The JS peer answers -32004 (UnsupportedOperationError) in the stream: the
		// protocol's classification, not a sentence in the text, makes it capability_gap.
		r := run(t, primary, "gap", nil)
		reqs, _ := script.requests("gap")
		require.Len(t, reqs, 1, "handed off after the first result, no further model turn")
		res := toolResultsOf(r.Events)
		require.Len(t, res, 1)
		fv := failureValues(r.Events)
		require.Len(t, fv, 1, "failures: %v", fv)
		assert.Equal(t, string(failure.KindCapabilityGap), fv[0]["kind"])
		assert.Equal(t, string(failure.ActionHandoff), fv[0]["action"])
		assert.Equal(t, `The tool "peer" cannot handle this kind of request.`, fv[0]["explanation"])
		errs := eventsOfType(r.Events, "SUBAGENT_ERROR")
		require.Len(t, errs, 1)
		assert.Equal(t, "capability_gap", errs[0]["code"])
		tail := r.Events[len(r.Events)-1]
		assert.Equal(t, map[string]any{"stopped": string(failure.KindCapabilityGap), "action": string(failure.ActionHandoff)}, tail["result"])
	})

	t.Run("a rate limit is refused with retry_after_seconds", func(t *testing.T) {
		before := time.Now().UTC()
		r := run(t, quota, "rate", nil)
		res := toolResultsOf(r.Events)
		require.Len(t, res, 2)
		assert.True(t, strings.HasPrefix(res[0], "[OK]\n"), res[0])
		msg := `The tool "demo__count_slowly" may be called at most 1 times per 1h0m0s; it can be called again in 3600s.`
		code, sig := refusal(t, res[1])
		assert.Equal(t, "rate_exceeded", code)
		resolution, _ := sig["resolution"].(map[string]any)
		resets, err := time.Parse(time.RFC3339, fmt.Sprint(resolution["resets_at"]))
		require.NoError(t, err, "resets_at %v", resolution["resets_at"])
		assert.False(t, resets.Before(before.Add(time.Hour).Truncate(time.Second)), "resets_at %s", resets)
		assert.Equal(t, map[string]any{"error": "rate_exceeded", "requested": "demo__count_slowly", "message": msg,
			"valid_next_actions": []any{"ask_user", "demo__delete_release", "demo__deploy", "demo__divide", "peer"},
			"resolution":         map[string]any{"type": "wait", "retry_after_seconds": 3600.0, "resets_at": resolution["resets_at"]}}, sig)
		assertPolicyHandoff(t, r, "demo__count_slowly", msg)
	})

	t.Run("a spent budget is refused with budget_exceeded", func(t *testing.T) {
		r := run(t, quota, "budget", nil)
		res := toolResultsOf(r.Events)
		require.Len(t, res, 3)
		for i := range 2 {
			assert.True(t, strings.HasPrefix(res[i], "[COMPLETED]\n"), res[i])
			assert.Contains(t, res[i], fmt.Sprintf("done: complete b%d", i))
		}
		msg := "This run has used its budget of 2 tool calls. No more tool calls can be made in this run: answer with what you have."
		code, sig := refusal(t, res[2])
		assert.Equal(t, "budget_exceeded", code)
		assert.Equal(t, map[string]any{"error": "budget_exceeded", "requested": "peer", "message": msg,
			"valid_next_actions": []any{"ask_user"}, "resolution": map[string]any{"type": "handoff"}}, sig)
		assertPolicyHandoff(t, r, "peer", msg)
	})

	t.Run("the iteration limit asks the user, who continues", func(t *testing.T) {
		cont := true
		r := run(t, iter, "iteration", &cont)
		first, res := resumedJob(t, r, 2)
		for i, s := range res {
			assert.True(t, strings.HasPrefix(s, "[COMPLETED]\n"), s)
			assert.Contains(t, s, fmt.Sprintf("done: complete i%d", i))
		}
		// Continued: a fresh allowance of steps, and the model answers.
		assertAskedThenContinued(t, r, first, failure.KindIterationLimit,
			"The run reached its limit of 2 steps without finishing. Your decision is needed to go on.")
		reqs, _ := script.requests("iteration")
		require.Len(t, reqs, 3)
		assert.Contains(t, lastRequestSystem(t, script, "iteration"), "The run reached its step limit.", "the lesson survived the suspension")
	})

	t.Run("the time limit asks the user, who continues", func(t *testing.T) {
		cont := true
		r := run(t, timed, "time", &cont)
		first, res := resumedJob(t, r, 1)
		assert.True(t, strings.HasPrefix(res[0], "[COMPLETED]\n"), res[0])
		assertAskedThenContinued(t, r, first, failure.KindTimeLimit,
			"The run reached its time limit of 1s. Your decision is needed to go on.")
	})
}
