package coordinator

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"iter"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/baton-dev/baton/agui"
	"github.com/baton-dev/baton/failure"
	"github.com/baton-dev/baton/llm"
	"github.com/baton-dev/baton/subagent"
)

// turnStep is one scripted model turn: an error, or deltas.
type turnStep struct {
	err    error
	deltas []llm.Delta
}

func textStep(s string) turnStep {
	return turnStep{deltas: []llm.Delta{{Text: s}, {Done: &llm.Completion{FinishReason: llm.FinishStop}}}}
}

func callStep(id, tool, args string) turnStep {
	return turnStep{deltas: []llm.Delta{
		{ToolCall: &llm.ToolCallDelta{Index: 0, ID: id, Name: tool, Arguments: args}},
		{Done: &llm.Completion{FinishReason: llm.FinishToolCalls, Usage: llm.Usage{InputTokens: 10, OutputTokens: 10}}},
	}}
}

func doneStep(c llm.Completion) turnStep { return turnStep{deltas: []llm.Delta{{Done: &c}}} }

func failStep(kind llm.ErrorKind, status int, retryAfter time.Duration) turnStep {
	return turnStep{err: &llm.Error{Kind: kind, Status: status, RetryAfter: retryAfter, Message: "provider detail", Err: errors.New("x")}}
}

// scriptModel answers the n-th request with steps[n]; the last step repeats. It records
// the requests and when they arrived.
type scriptModel struct {
	mu    sync.Mutex
	steps []turnStep
	reqs  []*llm.Request
	times []time.Time
}

func (m *scriptModel) Stream(_ context.Context, req *llm.Request) iter.Seq2[llm.Delta, error] {
	m.mu.Lock()
	s := m.steps[min(len(m.reqs), len(m.steps)-1)]
	m.reqs = append(m.reqs, req)
	m.times = append(m.times, time.Now())
	m.mu.Unlock()
	return func(yield func(llm.Delta, error) bool) {
		if s.err != nil {
			yield(llm.Delta{}, s.err)
			return
		}
		for _, d := range s.deltas {
			if !yield(d, nil) {
				return
			}
		}
	}
}

func (m *scriptModel) requests() []*llm.Request {
	m.mu.Lock()
	defer m.mu.Unlock()
	return append([]*llm.Request(nil), m.reqs...)
}

// fastPolicy retries at once (2 ms backoff, no jitter).
func fastPolicy(c *Config) {
	c.Policy = &failure.DefaultPolicy{BackoffBase: 2 * time.Millisecond, Jitter: func(d time.Duration) time.Duration { return d }}
}

// customs returns the CUSTOM events of a run by name.
func customs(evs []agui.Event, name string) []*agui.Custom {
	var out []*agui.Custom
	for _, e := range evs {
		if c, ok := e.(*agui.Custom); ok && c.Name == name {
			out = append(out, c)
		}
	}
	return out
}

// terminalTypes are the events of a run ending on a handoff or a partial stop.
var terminalTypes = []string{"TEXT_MESSAGE_START", "TEXT_MESSAGE_CONTENT", "TEXT_MESSAGE_END", "CUSTOM", "RUN_FINISHED"}

// assertHandoff asserts that evs end with the handoff for h and the result of kind.
func assertHandoff(t *testing.T, evs []agui.Event, name string, h Handoff, result map[string]any) {
	t.Helper()
	require.GreaterOrEqual(t, len(evs), 5)
	tail := evs[len(evs)-5:]
	assert.Equal(t, terminalTypes, types(tail))
	assert.Equal(t, h.Text(), tail[1].(*agui.TextMessageContent).Delta)
	custom := tail[3].(*agui.Custom)
	assert.Equal(t, name, custom.Name)
	assert.Equal(t, h, custom.Value)
	fin := tail[4].(*agui.RunFinished)
	assert.Nil(t, fin.Outcome, "a run handed back or stopped does not claim success (AG-UI has no outcome for it)")
	assert.Equal(t, result, fin.Result)
}

// signal decodes the JSON of a "[RETRY:<code>] {json}" result.
func retrySignal(t *testing.T, res, code string) map[string]any {
	t.Helper()
	prefix := "[RETRY:" + code + "] "
	require.True(t, strings.HasPrefix(res, prefix), "got %q", res)
	var m map[string]any
	require.NoError(t, json.Unmarshal([]byte(strings.TrimPrefix(res, prefix)), &m))
	return m
}

func TestProviderFailures(t *testing.T) {
	tests := []struct {
		name     string
		steps    []turnStep
		calls    int
		failures []FailureValue
		reason   string
		handoff  *Handoff
	}{
		{
			name:  "429 with Retry-After is waited exactly, then succeeds",
			steps: []turnStep{failStep(llm.ErrRateLimited, 429, 30*time.Millisecond), textStep("hi")},
			calls: 2,
			failures: []FailureValue{{Kind: failure.KindTransientProvider, Action: failure.ActionRetry, Attempt: 1,
				Explanation: "The language model is rate limiting requests. Retrying in 30ms (retry 1 of 3)."}},
			reason: "completed",
		},
		{
			name:  "5xx backs off, then succeeds",
			steps: []turnStep{failStep(llm.ErrServer, 503, 0), failStep(llm.ErrServer, 503, 0), textStep("hi")},
			calls: 3,
			failures: []FailureValue{
				{Kind: failure.KindTransientProvider, Action: failure.ActionRetry, Attempt: 1, Explanation: "The language model had a server error. Retrying in 2ms (retry 1 of 3)."},
				{Kind: failure.KindTransientProvider, Action: failure.ActionRetry, Attempt: 2, Explanation: "The language model had a server error. Retrying in 4ms (retry 2 of 3)."},
			},
			reason: "completed",
		},
		{
			name:  "retries spent: handoff",
			steps: []turnStep{failStep(llm.ErrNetwork, 0, 0)},
			calls: 4,
			failures: []FailureValue{
				{Kind: failure.KindTransientProvider, Action: failure.ActionRetry, Attempt: 1, Explanation: "The language model could not be reached. Retrying in 2ms (retry 1 of 3)."},
				{Kind: failure.KindTransientProvider, Action: failure.ActionRetry, Attempt: 2, Explanation: "The language model could not be reached. Retrying in 4ms (retry 2 of 3)."},
				{Kind: failure.KindTransientProvider, Action: failure.ActionRetry, Attempt: 3, Explanation: "The language model could not be reached. Retrying in 8ms (retry 3 of 3)."},
				{Kind: failure.KindTransientProvider, Action: failure.ActionHandoff, Attempt: 4, Explanation: "The language model could not be reached. It is still failing after 3 retries."},
			},
			reason: "handoff: transient_provider",
			handoff: &Handoff{Rationale: "The language model could not be reached. It is still failing after 3 retries.",
				Blockers: []string{"the language model provider is unavailable"}, NextSteps: []string{"try again in a few minutes"}},
		},
		{
			name:  "Retry-After longer than the cap is reported, not slept",
			steps: []turnStep{failStep(llm.ErrRateLimited, 429, time.Hour), textStep("never")},
			calls: 1,
			failures: []FailureValue{{Kind: failure.KindTransientProvider, Action: failure.ActionHandoff, Attempt: 1,
				Explanation: "The language model is rate limiting requests. It asked to wait 1h0m0s before trying again, which is longer than this coordinator waits (30s)."}},
			reason: "handoff: transient_provider",
			handoff: &Handoff{Rationale: "The language model is rate limiting requests. It asked to wait 1h0m0s before trying again, which is longer than this coordinator waits (30s).",
				Blockers: []string{"the language model provider asked to wait 1h0m0s"}, NextSteps: []string{"try again in 1h0m0s"}},
		},
		{
			name: "truncation is asked again once",
			steps: []turnStep{
				{deltas: []llm.Delta{{Text: "a long ans"}, {Done: &llm.Completion{FinishReason: llm.FinishLength}}}},
				textStep("short"),
			},
			calls: 2,
			failures: []FailureValue{{Kind: failure.KindOutputTruncated, Action: failure.ActionRetry, Attempt: 1,
				Explanation: "The language model's reply was cut off at its output length limit. Asking again (retry 1 of 1)."}},
			reason: "completed",
		},
		{
			name:  "truncation: retry, narrow_scope, handoff",
			steps: []turnStep{doneStep(llm.Completion{FinishReason: llm.FinishLength})},
			calls: 3,
			failures: []FailureValue{
				{Kind: failure.KindOutputTruncated, Action: failure.ActionRetry, Attempt: 1, Explanation: "The language model's reply was cut off at its output length limit. Asking again (retry 1 of 1)."},
				{Kind: failure.KindOutputTruncated, Action: failure.ActionNarrowScope, Attempt: 2, Explanation: "The language model's reply was cut off at its output length limit. The model is asked to change its approach."},
				{Kind: failure.KindOutputTruncated, Action: failure.ActionHandoff, Attempt: 3, Explanation: "The language model's reply was cut off at its output length limit. It happened again after a corrective instruction."},
			},
			reason: "handoff: output_truncated",
			handoff: &Handoff{Rationale: "The language model's reply was cut off at its output length limit. It happened again after a corrective instruction.",
				Blockers:  []string{"the language model's replies keep getting cut off"},
				NextSteps: []string{"ask for a shorter answer, or split the request into smaller parts"}},
		},
		{
			name:  "refusal hands off",
			steps: []turnStep{doneStep(llm.Completion{FinishReason: llm.FinishStop, Refusal: "I can't help with that."})},
			calls: 1,
			failures: []FailureValue{{Kind: failure.KindOutputRefused, Action: failure.ActionHandoff, Attempt: 1,
				Explanation: "The language model declined to answer this request."}},
			reason: "handoff: output_refused",
			handoff: &Handoff{Rationale: "The language model declined to answer this request.",
				Blockers: []string{"the language model declined the request"}, NextSteps: []string{"rephrase the request"}},
		},
		{
			name:  "an empty turn gets a corrective instruction",
			steps: []turnStep{doneStep(llm.Completion{FinishReason: llm.FinishStop}), textStep("ok")},
			calls: 2,
			failures: []FailureValue{{Kind: failure.KindNoProgress, Action: failure.ActionNarrowScope, Attempt: 1,
				Explanation: "The language model replied with neither an answer nor a tool call. The model is asked to change its approach."}},
			reason: "completed",
		},
		{
			name:  "tool_calls without a call, twice: handoff",
			steps: []turnStep{{deltas: []llm.Delta{{Text: "Calling it now."}, {Done: &llm.Completion{FinishReason: llm.FinishToolCalls}}}}},
			calls: 2,
			failures: []FailureValue{
				{Kind: failure.KindNoProgress, Action: failure.ActionNarrowScope, Attempt: 1, Explanation: "The language model announced a tool call but made none. The model is asked to change its approach."},
				{Kind: failure.KindNoProgress, Action: failure.ActionHandoff, Attempt: 2, Explanation: "The language model announced a tool call but made none. It happened again after a corrective instruction."},
			},
			reason: "handoff: no_progress",
			handoff: &Handoff{Rationale: "The language model announced a tool call but made none. It happened again after a corrective instruction.",
				Blockers:  []string{"the work was not making progress"},
				NextSteps: []string{"ask again with a narrower, more specific request"}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := &scriptModel{steps: tt.steps}
			e := newEngine(t, m, &fakeAgent{}, fastPolicy)
			r, err := e.StartRun(context.Background(), input("p"), "")
			require.NoError(t, err)
			evs := collect(t, r)
			assert.Len(t, m.requests(), tt.calls)
			assert.Equal(t, tt.failures, failureValues(evs))
			assert.Equal(t, tt.reason, r.EndReason())
			if tt.handoff != nil {
				assertHandoff(t, evs, EventHandoff, *tt.handoff, map[string]any{"stopped": string(tt.failures[len(tt.failures)-1].Kind), "action": "handoff"})
			} else {
				fin := lastEvent(evs).(*agui.RunFinished)
				assert.Equal(t, agui.OutcomeSuccess, fin.Outcome.Type)
				assert.Nil(t, fin.Result)
			}
			// A turn that was asked again never enters the history.
			for _, req := range m.requests() {
				assert.Len(t, req.Messages, 2, "system prompt and the user message only")
			}
		})
	}
}

func TestRetryAfterIsHonoured(t *testing.T) {
	m := &scriptModel{steps: []turnStep{failStep(llm.ErrRateLimited, 429, 50*time.Millisecond), textStep("hi")}}
	e := newEngine(t, m, &fakeAgent{})
	collect(t, mustStart(t, e, input("ra")))
	require.Len(t, m.times, 2)
	assert.GreaterOrEqual(t, m.times[1].Sub(m.times[0]), 50*time.Millisecond)
}

func mustStart(t *testing.T, e *Engine, in *agui.RunAgentInput) *Run {
	t.Helper()
	r, err := e.StartRun(context.Background(), in, "")
	require.NoError(t, err)
	return r
}

// The corrective instruction and the lessons go into the next LLM call's system prompt;
// the corrective only once.
func TestCorrectiveAndLessonsReachTheModel(t *testing.T) {
	m := &scriptModel{steps: []turnStep{
		doneStep(llm.Completion{FinishReason: llm.FinishStop}),
		callStep("c1", "research", `{"prompt":"go"}`),
		textStep("done"),
	}}
	e := newEngine(t, m, &fakeAgent{send: finalResult(subagent.StateCompleted, "ok")})
	collect(t, mustStart(t, e, input("cl")))
	reqs := m.requests()
	require.Len(t, reqs, 3)
	assert.NotContains(t, reqs[0].Messages[0].Content, "<lessons_learned>")
	for i, req := range reqs[1:] {
		sys := req.Messages[0].Content
		assert.Contains(t, sys, "<lessons_learned>", "request %d", i+1)
		assert.Contains(t, sys, "A step made no progress.", "request %d", i+1)
	}
	assert.Contains(t, reqs[1].Messages[0].Content, "<corrective_instruction>")
	assert.NotContains(t, reqs[2].Messages[0].Content, "<corrective_instruction>", "the corrective is one-shot")
}

func TestLoopDetectedAsksUser(t *testing.T) {
	m := &scriptModel{steps: []turnStep{
		callStep("c1", "research", `{"prompt":"same"}`),
		callStep("c2", "research", `{ "prompt" : "same" }`), // the same call, spelt differently
		callStep("c3", "research", `{"prompt":"same"}`),
		textStep("I will try something else."),
	}}
	agent := &fakeAgent{send: finalResult(subagent.StateCompleted, "ok")}
	e := newEngine(t, m, agent)
	evs := startAndCollect(t, e, input("loop"))
	require.Len(t, agent.sent, 2, "the call that would reach the hard threshold is not sent")
	res := toolResults(evs)
	require.Len(t, res, 3)
	sig := retrySignal(t, res[2], "loop_detected")
	assert.Equal(t, "research", sig["requested"])
	assert.Equal(t, []any{"research", "ask_user"}, sig["valid_next_actions"])
	assert.Equal(t, []FailureValue{{Kind: failure.KindLoopDetected, Action: failure.ActionAskUser, Attempt: 1,
		Explanation: `The same call to the tool "research" with the same arguments was about to be made for the third time. Your decision is needed to go on.`}}, failureValues(evs))
	ins := interruptsOf(t, evs)
	require.Len(t, ins, 1)
	assert.Equal(t, "input_required", ins[0].Reason)
	assert.Empty(t, ins[0].ToolCallID)
	assert.Equal(t, map[string]any{"type": "object", "properties": map[string]any{"continue": map[string]any{"type": "boolean"}},
		"required": []any{"continue"}}, ins[0].ResponseSchema)

	// Continue: the model sees the refusal and goes on.
	evs = startAndCollect(t, e, resumeInput("loop", "r2", resolved(ins[0].ID, `{"continue":true}`)))
	assert.Equal(t, agui.OutcomeSuccess, lastEvent(evs).(*agui.RunFinished).Outcome.Type)
	reqs := m.requests()
	require.Len(t, reqs, 4)
	last := reqs[3].Messages
	assert.Equal(t, res[2], last[len(last)-1].Content, "the refusal is in the history")
	assert.Contains(t, last[0].Content, "were repeated without result", "the lesson survived the suspension")
}

func TestPolicyRefusals(t *testing.T) {
	clk := &hitlClock{now: time.Date(2026, 11, 21, 10, 0, 0, 0, time.UTC)}
	tests := []struct {
		name   string
		guard  failure.GuardPolicy
		steps  []turnStep
		sent   int
		code   string
		signal map[string]any
		expl   string
	}{
		{
			name:  "denied agent",
			guard: failure.GuardPolicy{Agents: failure.AccessList{Deny: []string{"research"}}},
			steps: []turnStep{callStep("c1", "research", `{"prompt":"go"}`)},
			code:  "policy_deny",
			signal: map[string]any{"error": "policy_deny", "requested": "research",
				"message":            `The coordinator's policy does not allow delegating to the sub-agent "research".`,
				"valid_next_actions": []any{"ask_user"}, "resolution": map[string]any{"type": "handoff"}},
			expl: `The coordinator's policy does not allow delegating to the sub-agent "research".`,
		},
		{
			name:  "rate limit",
			guard: failure.GuardPolicy{RateLimits: []failure.RateLimit{{Tool: "research", MaxCalls: 1, Per: time.Hour}}},
			steps: []turnStep{callStep("c1", "research", `{"prompt":"one"}`), callStep("c2", "research", `{"prompt":"two"}`)},
			sent:  1,
			code:  "rate_exceeded",
			signal: map[string]any{"error": "rate_exceeded", "requested": "research",
				"message":            `The tool "research" may be called at most 1 times per 1h0m0s; it can be called again in 3600s.`,
				"valid_next_actions": []any{"ask_user"},
				"resolution":         map[string]any{"type": "wait", "retry_after_seconds": 3600.0, "resets_at": "2026-11-21T11:00:00Z"}},
			expl: `The tool "research" may be called at most 1 times per 1h0m0s; it can be called again in 3600s.`,
		},
		{
			name:  "tool-call budget",
			guard: failure.GuardPolicy{Budget: failure.Budget{MaxToolCalls: 1}},
			steps: []turnStep{callStep("c1", "research", `{"prompt":"one"}`), callStep("c2", "research", `{"prompt":"two"}`)},
			sent:  1,
			code:  "budget_exceeded",
			signal: map[string]any{"error": "budget_exceeded", "requested": "research",
				"message":            "This run has used its budget of 1 tool calls. No more tool calls can be made in this run: answer with what you have.",
				"valid_next_actions": []any{"ask_user"}, "resolution": map[string]any{"type": "handoff"}},
			expl: "This run has used its budget of 1 tool calls. No more tool calls can be made in this run: answer with what you have.",
		},
		{
			name:  "token budget",
			guard: failure.GuardPolicy{Budget: failure.Budget{MaxTokens: 15}},
			steps: []turnStep{callStep("c1", "research", `{"prompt":"one"}`)},
			code:  "budget_exceeded",
			signal: map[string]any{"error": "budget_exceeded", "requested": "research",
				"message":            "This run has used its budget of 15 tokens; an operator can raise policy.budget.max_tokens. No more tool calls can be made in this run: answer with what you have.",
				"valid_next_actions": []any{"ask_user"}, "resolution": map[string]any{"type": "handoff", "raise": "policy.budget.max_tokens"}},
			expl: "This run has used its budget of 15 tokens; an operator can raise policy.budget.max_tokens. No more tool calls can be made in this run: answer with what you have.",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := &scriptModel{steps: tt.steps}
			agent := &fakeAgent{send: finalResult(subagent.StateCompleted, "ok")}
			e := newEngine(t, m, agent, func(c *Config) { c.Guard = tt.guard; c.Now = clk.Now })
			r := mustStart(t, e, input("pol"))
			evs := collect(t, r)
			assert.Len(t, agent.sent, tt.sent)
			res := toolResults(evs)
			require.Len(t, res, tt.sent+1)
			assert.Equal(t, tt.signal, retrySignal(t, res[tt.sent], tt.code))
			assert.Equal(t, []FailureValue{{Kind: failure.KindPolicyViolation, Action: failure.ActionHandoff, Attempt: 1, Explanation: tt.expl}}, failureValues(evs))
			// The refusal is streamed before the failure is handled.
			ty := types(evs)
			assert.Equal(t, []string{"TOOL_CALL_RESULT", "CUSTOM"}, ty[len(ty)-7:len(ty)-5])
			assertHandoff(t, evs, EventHandoff, Handoff{Rationale: tt.expl,
				Blockers:  []string{`the coordinator's policy does not allow this (research)`},
				NextSteps: []string{"ask an operator to review the coordinator's policy"}},
				map[string]any{"stopped": "policy_violation", "action": "handoff"})
			assert.Equal(t, "handoff: policy_violation", r.EndReason())
		})
	}
}

// A denied tool is not offered to the model at all.
func TestDeniedToolIsNotOffered(t *testing.T) {
	m := &scriptModel{steps: []turnStep{textStep("hi")}}
	e := newEngine(t, m, &fakeAgent{}, func(c *Config) { c.Guard.Agents.Deny = []string{"research"} })
	collect(t, mustStart(t, e, input("deny")))
	req := m.requests()[0]
	var names []string
	for _, tool := range req.Tools {
		names = append(names, tool.Name)
	}
	assert.Equal(t, []string{"ask_user"}, names)
	assert.NotContains(t, req.Messages[0].Content, "research")
}

// A stall (rounds without a successful call) gets a corrective instruction, then a handoff.
func TestStall(t *testing.T) {
	m := &scriptModel{}
	for i := range 4 {
		m.steps = append(m.steps, callStep(fmt.Sprintf("c%d", i), "research", fmt.Sprintf(`{"prompt":"try %d"}`, i)))
	}
	agent := &fakeAgent{send: finalResult(subagent.StateFailed, "no")}
	e := newEngine(t, m, agent, func(c *Config) { c.Loop = failure.LoopConfig{HardThreshold: 10, StallTurns: 2} })
	r := mustStart(t, e, input("stall"))
	evs := collect(t, r)
	assert.Len(t, agent.sent, 3)
	assert.Equal(t, []FailureValue{
		{Kind: failure.KindNoProgress, Action: failure.ActionNarrowScope, Attempt: 1, Explanation: "No tool call has succeeded in the last 2 steps. The model is asked to change its approach."},
		{Kind: failure.KindNoProgress, Action: failure.ActionHandoff, Attempt: 2, Explanation: "No tool call has succeeded in the last 3 steps. It happened again after a corrective instruction."},
	}, failureValues(evs))
	assert.Equal(t, "handoff: no_progress", r.EndReason())
}

// The same failing call repeated: tool_error retries, then loop_detected on the error
// signature.
func TestRepeatedToolErrorIsALoop(t *testing.T) {
	m := &scriptModel{}
	for i := range 3 {
		m.steps = append(m.steps, callStep(fmt.Sprintf("c%d", i), "research", fmt.Sprintf(`{"prompt":"try %d"}`, i)))
	}
	agent := &fakeAgent{send: func(context.Context, subagent.Request, subagent.Observer) (*subagent.Result, error) {
		return nil, fmt.Errorf("dial: %w", subagent.ErrUnreachable)
	}}
	e := newEngine(t, m, agent)
	r := mustStart(t, e, input("errloop"))
	evs := collect(t, r)
	assert.Len(t, agent.sent, 3)
	res := toolResults(evs)
	require.Len(t, res, 3)
	for _, r := range res {
		assert.True(t, strings.HasPrefix(r, "[UNREACHABLE]\n"), r)
	}
	assert.Equal(t, []FailureValue{
		{Kind: failure.KindToolError, Action: failure.ActionRetry, Attempt: 1, Explanation: `The tool "research" could not be reached. The model may correct the call (retry 1 of 2).`},
		{Kind: failure.KindToolError, Action: failure.ActionRetry, Attempt: 2, Explanation: `The tool "research" could not be reached. The model may correct the call (retry 2 of 2).`},
		{Kind: failure.KindToolError, Action: failure.ActionNarrowScope, Attempt: 3, Explanation: `The tool "research" could not be reached. The model is asked to change its approach.`},
		{Kind: failure.KindLoopDetected, Action: failure.ActionAskUser, Attempt: 1, Explanation: `The tool "research" returned the same error 3 times in a row. Your decision is needed to go on.`},
	}, failureValues(evs))
	assert.Equal(t, "interrupt: loop_detected", r.EndReason())
}

// The time limit is checked between turns: the user is asked whether to go on, and a
// resume that continues gets a fresh allowance.
func TestTimeLimitAsksUser(t *testing.T) {
	m := &scriptModel{steps: []turnStep{callStep("c1", "research", `{"prompt":"slow"}`), textStep("done")}}
	agent := &fakeAgent{send: func(ctx context.Context, req subagent.Request, obs subagent.Observer) (*subagent.Result, error) {
		time.Sleep(150 * time.Millisecond) // longer than the limit, shorter than its grace
		return finalResult(subagent.StateCompleted, "ok")(ctx, req, obs)
	}}
	e := newEngine(t, m, agent, func(c *Config) { c.Limits.MaxRunTime = 100 * time.Millisecond })
	r := mustStart(t, e, input("tl"))
	evs := collect(t, r)
	assert.Equal(t, []string{"[COMPLETED]\nok"}, toolResults(evs))
	assert.Equal(t, []FailureValue{{Kind: failure.KindTimeLimit, Action: failure.ActionAskUser, Attempt: 1,
		Explanation: "The run reached its time limit of 100ms. Your decision is needed to go on."}}, failureValues(evs))
	ins := interruptsOf(t, evs)
	require.Len(t, ins, 1)
	assert.Equal(t, "The run reached its time limit of 100ms. Your decision is needed to go on. Continue?", ins[0].Message)
	assert.Equal(t, "interrupt: time_limit", r.EndReason())

	evs = startAndCollect(t, e, resumeInput("tl", "r2", resolved(ins[0].ID, `{"continue":true}`)))
	assert.Empty(t, failureValues(evs))
	assert.Equal(t, agui.OutcomeSuccess, lastEvent(evs).(*agui.RunFinished).Outcome.Type)
	assert.Len(t, m.requests(), 2)
}

// Work still in flight past the time limit and its grace is cancelled (DESIGN §10). In a
// bubble: the run's setup and first turn take no time on its clock, so the limit is always
// reached while the call is in flight (on the wall clock, a slow start under load reached it
// before the turn, which asks the user instead).
func TestTimeLimitHardStop(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m := &scriptModel{steps: []turnStep{callStep("c1", "research", `{"prompt":"hang"}`)}}
		agent := &fakeAgent{send: func(ctx context.Context, req subagent.Request, obs subagent.Observer) (*subagent.Result, error) {
			obs.Task("hang-1", "ctx")
			<-ctx.Done()
			return nil, ctx.Err()
		}}
		e := newEngine(t, m, agent, func(c *Config) { c.Limits.MaxRunTime = 10 * time.Millisecond })
		r := mustStart(t, e, input("hs"))
		evs := collect(t, r)
		assert.Equal(t, agui.OutcomeCancelled, lastEvent(evs).(*agui.RunFinished).Outcome.Type)
		assert.Equal(t, "cancelled: run time limit reached", r.EndReason())
		assert.Equal(t, []string{"hang-1"}, agent.cancelled())
	})
}

func TestHardStopAfter(t *testing.T) {
	tests := []struct{ remaining, want time.Duration }{
		{0, time.Second},
		{-time.Minute, time.Second},
		{5 * time.Second, 6 * time.Second},
		{100 * time.Second, 110 * time.Second},
		{600 * time.Second, 630 * time.Second},
	}
	for _, tt := range tests {
		assert.Equal(t, tt.want, hardStopAfter(tt.remaining), "remaining %s", tt.remaining)
	}
}

// A "continue?" answered with no ends the run with baton.partial; counters and lessons of
// the suspended run are in the store.
func TestLoopStopAndStateInStore(t *testing.T) {
	m := &scriptModel{steps: []turnStep{callStep("c1", "research", `{"prompt":"same"}`), callStep("c2", "research", `{"prompt":"same"}`), callStep("c3", "research", `{"prompt":"same"}`)}}
	e := newEngine(t, m, &fakeAgent{send: finalResult(subagent.StateCompleted, "ok")})
	ins := interruptsOf(t, startAndCollect(t, e, input("ls")))
	require.Len(t, ins, 1)
	susp, err := e.cfg.Store.LoadSuspension(context.Background(), "ls")
	require.NoError(t, err)
	var st failure.State
	require.NoError(t, json.Unmarshal(susp.State, &st))
	assert.Equal(t, 3, st.Iterations)
	assert.Equal(t, 2, st.Budget.ToolCalls)
	assert.Equal(t, []failure.Lesson{{Kind: failure.KindLoopDetected, Tool: "research", Code: "repeated_call"}}, st.Lessons)
	assert.Positive(t, st.Active)

	evs := startAndCollect(t, e, resumeInput("ls", "r2", resolved(ins[0].ID, `{"continue":false}`)))
	assert.Len(t, m.requests(), 3, "stopping calls the model no more")
	assertHandoff(t, evs, EventPartial, Handoff{
		Rationale: `The same call to the tool "research" with the same arguments was about to be made for the third time. You chose to stop here.`,
		Blockers:  []string{"the same step kept repeating"},
		NextSteps: []string{"say whether to continue", "ask again with more detail"},
	}, map[string]any{"stopped": "loop_detected", "action": "stop"})
	_, err = e.cfg.Store.LoadSuspension(context.Background(), "ls")
	assert.Error(t, err, "the suspension is gone")
}

// Retry signals list in valid_next_actions only the tools the model may call now; a denied
// tool stays known.
func TestValidNextActionsFollowThePolicy(t *testing.T) {
	m := &scriptModel{steps: []turnStep{callStep("c1", "nope", `{}`), textStep("ok")}}
	e := newEngine(t, m, &fakeAgent{}, func(c *Config) {
		c.Agents = append(c.Agents, Agent{Name: "travel", Client: &fakeAgent{}, Timeout: time.Minute})
		c.Guard.Agents.Deny = []string{"travel"}
	})
	evs := startAndCollect(t, e, input("vna"))
	res := toolResults(evs)
	require.Len(t, res, 1)
	sig := retrySignal(t, res[0], "unknown_action")
	assert.Equal(t, []any{"research", "ask_user"}, sig["valid_next_actions"], "the denied tool is not valid")
	assert.ElementsMatch(t, []any{"ask_user", "research", "travel"}, sig["known_actions"], "a denied tool stays known")
	// The signal itself is no failure of the run; the text reply that ignores it is
	// (no_progress, see TestTextAfterRefusedRoundIsNoProgress).
	fv := failureValues(evs)
	require.Len(t, fv, 1, "%v", fv)
	assert.Equal(t, failure.KindNoProgress, fv[0].Kind)
}

// A "continue?" question raised in the same step as a tool's question: one run ends with
// both, and one resume answers both.
func TestContinueNextToToolInterrupt(t *testing.T) {
	same := `{"prompt":"same"}`
	m := &scriptModel{steps: []turnStep{
		callStep("c1", "research", same),
		callStep("c2", "research", same),
		{deltas: []llm.Delta{
			{ToolCall: &llm.ToolCallDelta{Index: 0, ID: "a1", Name: "ask_user", Arguments: `{"question":"Which one?"}`}},
			{ToolCall: &llm.ToolCallDelta{Index: 1, ID: "c3", Name: "research", Arguments: same}},
			{Done: &llm.Completion{FinishReason: llm.FinishToolCalls}},
		}},
		textStep("ok"),
	}}
	e := newEngine(t, m, &fakeAgent{send: finalResult(subagent.StateCompleted, "ok")})
	evs := startAndCollect(t, e, input("both"))
	ins := interruptsOf(t, evs)
	require.Len(t, ins, 2)
	assert.Equal(t, "a1", ins[0].ToolCallID)
	assert.Equal(t, "Which one?", ins[0].Message)
	assert.Equal(t, map[string]any{"baton": map[string]any{"kind": "loop_detected"}}, ins[1].Metadata)

	evs = startAndCollect(t, e, resumeInput("both", "r2", resolved(ins[0].ID, `{"text":"the first"}`), resolved(ins[1].ID, `{"continue":true}`)))
	assert.Equal(t, []string{"[ANSWERED]\nthe first"}, toolResults(evs))
	assert.Equal(t, agui.OutcomeSuccess, lastEvent(evs).(*agui.RunFinished).Outcome.Type)
	reqs := m.requests()
	require.Len(t, reqs, 4)
	results := map[string]string{}
	for _, msg := range reqs[3].Messages {
		if msg.Role == llm.RoleTool {
			results[msg.ToolCallID] = msg.Content
		}
	}
	assert.Equal(t, "[ANSWERED]\nthe first", results["a1"])
	assert.True(t, strings.HasPrefix(results["c3"], "[RETRY:loop_detected] "), results["c3"])
}
