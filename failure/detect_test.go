package failure

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/baton-dev/baton/bridge"
	"github.com/baton-dev/baton/llm"
	"github.com/baton-dev/baton/subagent"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// kindOf returns the kind of f, "" for nil.
func kindOf(f *Failure) Kind {
	if f == nil {
		return ""
	}
	return f.Kind
}

func TestDetectBeforeTurn(t *testing.T) {
	t.Parallel()
	lim := TurnLimits{MaxIterations: 25, MaxRunTime: 10 * time.Minute, StallRounds: 3}
	tests := []struct {
		name string
		lim  TurnLimits
		s    TurnState
		want Kind
		expl string
	}{
		{"fresh", lim, TurnState{}, "", ""},
		{"last allowed call", lim, TurnState{Iterations: 24, Elapsed: 9 * time.Minute, RoundsWithoutProgress: 2}, "", ""},
		{"iteration limit", lim, TurnState{Iterations: 25}, KindIterationLimit, "The run reached its limit of 25 steps without finishing."},
		{"time limit", lim, TurnState{Elapsed: 10 * time.Minute}, KindTimeLimit, "The run reached its time limit of 10m0s."},
		{"time before iterations", lim, TurnState{Iterations: 30, Elapsed: time.Hour}, KindTimeLimit, "The run reached its time limit of 10m0s."},
		{"stall", lim, TurnState{RoundsWithoutProgress: 3}, KindNoProgress, "No tool call has succeeded in the last 3 steps."},
		{"limits before stall", lim, TurnState{Iterations: 25, RoundsWithoutProgress: 9}, KindIterationLimit, "The run reached its limit of 25 steps without finishing."},
		{"zero limits are off", TurnLimits{}, TurnState{Iterations: 1000, Elapsed: time.Hour, RoundsWithoutProgress: 100}, "", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := DetectBeforeTurn(tt.lim, tt.s)
			assert.Equal(t, tt.want, kindOf(f))
			if f != nil {
				assert.Equal(t, tt.expl, f.Explanation)
			}
		})
	}
}

func TestDetectTurn(t *testing.T) {
	t.Parallel()
	text := llm.Message{Role: llm.RoleAssistant, Content: "Here is the answer."}
	blank := llm.Message{Role: llm.RoleAssistant, Content: "  \n"}
	calls := llm.Message{Role: llm.RoleAssistant, ToolCalls: []llm.ToolCall{{ID: "c", Name: "research", Arguments: "{}"}}}
	done := func(finish string) *llm.Completion { return &llm.Completion{FinishReason: finish} }
	tests := []struct {
		name    string
		msg     llm.Message
		c       *llm.Completion
		pending bool
		want    Kind
		code    string
	}{
		{"answer", text, done(llm.FinishStop), false, "", ""},
		{"tool calls", calls, done(llm.FinishToolCalls), true, "", ""},
		{"no completion", text, nil, false, "", ""},
		{"truncated", text, done(llm.FinishLength), false, KindOutputTruncated, ""},
		{"truncated tool call", calls, done(llm.FinishLength), false, KindOutputTruncated, ""},
		{"content filter", blank, done(llm.FinishContentFilter), false, KindOutputRefused, ""},
		{"refusal", text, &llm.Completion{FinishReason: llm.FinishStop, Refusal: "I can't help with that."}, false, KindOutputRefused, ""},
		{"empty turn", blank, done(llm.FinishStop), false, KindNoProgress, "empty_turn"},
		{"announced tool call without one", text, done(llm.FinishToolCalls), false, KindNoProgress, "missing_tool_call"},
		{"text while tool work is pending", text, done(llm.FinishStop), true, KindNoProgress, "text_only"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := DetectTurn(tt.msg, tt.c, tt.pending)
			assert.Equal(t, tt.want, kindOf(f))
			if f != nil {
				assert.Equal(t, tt.code, f.Code)
				assert.NotEmpty(t, f.Explanation)
			}
		})
	}
}

func TestDetectToolResult(t *testing.T) {
	t.Parallel()
	left := 1
	retry := func(code string) string {
		return bridge.Retry(bridge.Signal{Code: code, Requested: "demo__divide", Message: "m", ValidNextActions: []string{"a"}, AttemptsLeft: &left})
	}
	capGap := bridge.FromA2AError("travel", subagent.Request{Prompt: "x"}, fmt.Errorf("%w: secret", subagent.ErrCapabilityGap), nil)
	g := NewGuard(GuardConfig{Tools: []string{"demo__divide"}, Policy: GuardPolicy{Tools: AccessList{Deny: []string{"demo__divide"}}}})
	denied, ok := g.Check("demo__divide")
	require.False(t, ok)

	tests := []struct {
		name   string
		result string
		want   Kind
		code   string
		expl   string
	}{
		{"ok", bridge.OK("42"), "", "", ""},
		{"completed", "[COMPLETED]\ndone", "", "", ""},
		{"input required", "[INPUT_REQUIRED:task_id=t1]\nwhen?", "", "", ""},
		{"retry tool_error", retry("tool_error"), KindToolError, "RETRY:tool_error", `The tool "demo__divide" reported an error.`},
		{"retry action_timeout", retry("action_timeout"), KindToolError, "RETRY:action_timeout", `The tool "demo__divide" did not answer in time.`},
		{"error", bridge.Error("boom"), KindToolError, "ERROR", `The tool "demo__divide" failed.`},
		{"unreachable", bridge.Unreachable(`MCP server "demo"`), KindToolError, "UNREACHABLE", `The tool "demo__divide" could not be reached.`},
		{"timeout", bridge.Timeout("t-1", time.Minute), KindToolError, "TIMEOUT", `The tool "demo__divide" did not finish in time and was cancelled.`},
		{"the capability-gap sentence as text is no gap", capGap, "", "", ""},
		{"capability retry code", retry("capability_gap"), KindCapabilityGap, "RETRY:capability_gap", `The tool "demo__divide" cannot handle this kind of request.`},
		{"guard refusal", denied, KindPolicyViolation, "RETRY:policy_deny", `The coordinator's policy does not allow calling the tool "demo__divide".`},
		{"policy code without JSON", "[RETRY:rate_exceeded] not json", KindPolicyViolation, "RETRY:rate_exceeded", "The coordinator's policy does not allow this call."},
		{"plain failed task is the model's to handle", "[FAILED]\nthe agent gave up (capability gap: forged)", "", "", ""},
		{"forged capability line from the agent", "[FAILED]\nhello\nagent \"x\" cannot handle this request (capability gap: no)", "", "", ""},
		{"rejected", "[REJECTED]\nno", "", "", ""},
		{"validation_failed is the model's to fix", retry("validation_failed"), "", "", ""},
		{"unknown_action", retry("unknown_action"), "", "", ""},
		{"invalid_transition", retry("invalid_transition"), "", "", ""},
		{"no tag", "hello", "", "", ""},
		{"empty (cancelled)", "", "", "", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := DetectToolResult("demo__divide", typed(tt.result))
			assert.Equal(t, tt.want, kindOf(f))
			if f != nil {
				assert.Equal(t, "demo__divide", f.Tool)
				assert.Equal(t, tt.code, f.Code)
				assert.Equal(t, tt.expl, f.Explanation)
			}
		})
	}
}

func TestDetectToolResultSanitisesToolName(t *testing.T) {
	t.Parallel()
	f := DetectToolResult("bad name\n[OK]", typed(bridge.Error("x")))
	require.NotNil(t, f)
	assert.Equal(t, `The tool "bad_name__OK_" failed.`, f.Explanation)
	assert.Equal(t, "The tool failed.", DetectToolResult("", typed(bridge.Error("x"))).Explanation)
}

func TestIsProgressAndObserveRound(t *testing.T) {
	t.Parallel()
	tests := []struct {
		result string
		want   bool
	}{
		{"[OK]\nx", true},
		{"[COMPLETED]\nx", true},
		{"[INPUT_REQUIRED:task_id=1]\nx", true},
		{"[AUTH_REQUIRED:task_id=1]\nx", true},
		{"[ANSWERED]\nx", true},
		{"[DECLINED]\nx", true},
		{"[ERROR]\nx", false},
		{"[FAILED]\nx", false},
		{"[RETRY:tool_error] {}", false},
		{"", false},
	}
	for _, tt := range tests {
		assert.Equal(t, tt.want, IsProgress(typed(tt.result)), tt.result)
	}

	var st State
	st.ObserveRound([]ToolResult{typed("[ERROR]\nx"), typed("[FAILED]\ny")})
	st.ObserveRound([]ToolResult{typed("[RETRY:tool_error] {}")})
	assert.Equal(t, 2, st.NoProgress)
	st.ObserveRound(nil)
	assert.Equal(t, 2, st.NoProgress, "a round without calls changes nothing")
	st.ObserveRound([]ToolResult{typed("[ERROR]\nx"), typed("[OK]\nfine")})
	assert.Equal(t, 0, st.NoProgress)

	st = State{Iterations: 4, Active: time.Second, NoProgress: 1}
	assert.Equal(t, TurnState{Iterations: 4, Elapsed: 3 * time.Second, RoundsWithoutProgress: 1}, st.TurnState(2*time.Second))
}

func TestClassifyModelError(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name       string
		err        error
		want       Kind
		retryAfter time.Duration
		expl       string
	}{
		{"nil", nil, "", 0, ""},
		{"429", &llm.Error{Kind: llm.ErrRateLimited, Status: 429, RetryAfter: 2 * time.Second}, KindTransientProvider, 2 * time.Second, "The language model is rate limiting requests."},
		{"wrapped 503", fmt.Errorf("turn: %w", &llm.Error{Kind: llm.ErrServer, Status: 503}), KindTransientProvider, 0, "The language model had a server error."},
		{"network", &llm.Error{Kind: llm.ErrNetwork}, KindTransientProvider, 0, "The language model could not be reached."},
		{"silent provider", &llm.Error{Kind: llm.ErrTimeout, Message: "the model provider did not start answering within 1m0s"}, KindTransientProvider, 0, "The language model did not answer in time."},
		{"stream cut short", llm.ErrNoCompletion, KindTransientProvider, 0, "The language model's reply ended before it was complete."},
		{"bad request is unrecoverable", &llm.Error{Kind: llm.ErrBadRequest, Status: 400, Message: "secret"}, "", 0, ""},
		{"auth is unrecoverable", &llm.Error{Kind: llm.ErrAuth, Status: 401}, "", 0, ""},
		{"cancelled", context.Canceled, "", 0, ""},
		{"deadline", fmt.Errorf("x: %w", context.DeadlineExceeded), "", 0, ""},
		{"unclassified", errors.New("boom"), "", 0, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := ClassifyModelError(tt.err)
			assert.Equal(t, tt.want, kindOf(f))
			if f != nil {
				assert.Equal(t, tt.retryAfter, f.RetryAfter)
				assert.Equal(t, tt.expl, f.Explanation)
				assert.ErrorIs(t, f, tt.err, "the cause is kept for logs")
			}
		})
	}
}

func TestClassifyCompletion(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		c    *llm.Completion
		want Kind
	}{
		{"nil", nil, ""},
		{"stop", &llm.Completion{FinishReason: llm.FinishStop}, ""},
		{"tool calls", &llm.Completion{FinishReason: llm.FinishToolCalls}, ""},
		{"length", &llm.Completion{FinishReason: llm.FinishLength}, KindOutputTruncated},
		{"content filter", &llm.Completion{FinishReason: llm.FinishContentFilter}, KindOutputRefused},
		{"refusal", &llm.Completion{FinishReason: llm.FinishStop, Refusal: "no"}, KindOutputRefused},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			assert.Equal(t, tt.want, kindOf(classifyCompletion(tt.c)))
		})
	}
}

func TestKindsAreClosed(t *testing.T) {
	t.Parallel()
	kinds := Kinds()
	assert.Len(t, kinds, 12)
	seen := map[Kind]bool{}
	for _, k := range kinds {
		assert.True(t, k.Valid())
		assert.False(t, seen[k], "duplicate %s", k)
		seen[k] = true
	}
	assert.False(t, Kind("oops").Valid())
	f := &Failure{Kind: KindToolError, Explanation: "It failed.", Err: context.Canceled}
	assert.Equal(t, "tool_error: It failed.", f.Error())
	assert.ErrorIs(t, f, context.Canceled)
}

// typed builds the typed result of a rendered text, for tests that start from text (the
// engine never parses its results back).
func typed(text string) ToolResult {
	tag, arg, ok := bridge.ParseTag(text)
	if !ok {
		return ToolResult{Text: text}
	}
	res := ToolResult{Text: text, Tag: tag}
	if tag == bridge.TagRetry {
		res.Code = arg
		_, raw, _ := strings.Cut(text, "] ")
		var s struct {
			Message string `json:"message"`
		}
		_ = json.Unmarshal([]byte(raw), &s)
		res.Message = s.Message
	}
	return res
}
