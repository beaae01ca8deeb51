package failure

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// fixedPolicy has a deterministic jitter: none (the wait is the lower half of the backoff).
func fixedPolicy() *DefaultPolicy {
	return &DefaultPolicy{Jitter: func(time.Duration) time.Duration { return 0 }}
}

func TestBackoff(t *testing.T) {
	t.Parallel()
	none := func(time.Duration) time.Duration { return 0 }
	full := func(d time.Duration) time.Duration { return d }
	tests := []struct {
		name       string
		p          DefaultPolicy
		kind       Kind
		attempt    int
		retryAfter time.Duration
		wait       time.Duration
		report     bool
	}{
		{"first, no jitter", DefaultPolicy{Jitter: none}, KindTransientProvider, 1, 0, 250 * time.Millisecond, false},
		{"first, full jitter", DefaultPolicy{Jitter: full}, KindTransientProvider, 1, 0, 500 * time.Millisecond, false},
		{"doubles", DefaultPolicy{Jitter: full}, KindTransientProvider, 2, 0, time.Second, false},
		{"doubles again", DefaultPolicy{Jitter: full}, KindTransientProvider, 3, 0, 2 * time.Second, false},
		{"capped", DefaultPolicy{Jitter: full}, KindTransientProvider, 8, 0, 30 * time.Second, false},
		{"capped, no jitter", DefaultPolicy{Jitter: none}, KindTransientProvider, 8, 0, 15 * time.Second, false},
		{"no overflow", DefaultPolicy{Jitter: full}, KindTransientProvider, 200, 0, 30 * time.Second, false},
		{"attempt 0 counts as 1", DefaultPolicy{Jitter: full}, KindTransientProvider, 0, 0, 500 * time.Millisecond, false},
		{"jitter out of range is clamped", DefaultPolicy{Jitter: func(d time.Duration) time.Duration { return 10 * d }}, KindTransientProvider, 1, 0, 500 * time.Millisecond, false},
		{"retry-after honoured exactly", DefaultPolicy{Jitter: full}, KindTransientProvider, 1, 2 * time.Second, 2 * time.Second, false},
		{"retry-after at the cap is slept", DefaultPolicy{}, KindTransientProvider, 3, 30 * time.Second, 30 * time.Second, false},
		{"retry-after over the cap is reported", DefaultPolicy{}, KindTransientProvider, 1, time.Hour, time.Hour, true},
		{"custom base and cap", DefaultPolicy{BackoffBase: time.Second, BackoffCap: 3 * time.Second, Jitter: full}, KindTransientProvider, 3, 0, 3 * time.Second, false},
		{"custom cap reports", DefaultPolicy{BackoffCap: time.Second}, KindTransientProvider, 1, 2 * time.Second, 2 * time.Second, true},
		{"tool errors do not wait", DefaultPolicy{}, KindToolError, 1, 5 * time.Second, 0, false},
		{"truncation does not wait", DefaultPolicy{}, KindOutputTruncated, 1, 0, 0, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			wait, report := tt.p.Backoff(tt.kind, tt.attempt, tt.retryAfter)
			assert.Equal(t, tt.wait, wait)
			assert.Equal(t, tt.report, report)
		})
	}
}

func TestBackoffRandomJitterStaysInRange(t *testing.T) {
	t.Parallel()
	var p DefaultPolicy
	seen := map[time.Duration]bool{}
	for range 200 {
		wait, report := p.Backoff(KindTransientProvider, 2, 0)
		require.False(t, report)
		require.GreaterOrEqual(t, wait, 500*time.Millisecond)
		require.LessOrEqual(t, wait, time.Second)
		seen[wait] = true
	}
	assert.Greater(t, len(seen), 1, "the wait is jittered")
}

func TestRetryBudget(t *testing.T) {
	t.Parallel()
	want := map[Kind]int{KindTransientProvider: 3, KindOutputTruncated: 1, KindToolError: 2, KindContextOverflow: 1}
	var p DefaultPolicy
	for _, k := range Kinds() {
		assert.Equal(t, want[k], p.RetryBudget(k), k)
	}
}

type step struct {
	f       Failure
	action  Action
	attempt int
	wait    time.Duration
}

func TestDecide(t *testing.T) {
	t.Parallel()
	transient := Failure{Kind: KindTransientProvider, Explanation: "The language model had a server error."}
	rateLimited := func(after time.Duration) Failure {
		return Failure{Kind: KindTransientProvider, Explanation: "The language model is rate limiting requests.", RetryAfter: after}
	}
	toolErr := func(tool string) Failure {
		return Failure{Kind: KindToolError, Tool: tool, Code: "RETRY:tool_error", Explanation: "The tool reported an error."}
	}
	simple := func(k Kind) Failure { return Failure{Kind: k, Explanation: "x."} }
	tests := []struct {
		name  string
		steps []step
	}{
		{"transient: three retries with backoff, then handoff", []step{
			{transient, ActionRetry, 1, 250 * time.Millisecond},
			{transient, ActionRetry, 2, 500 * time.Millisecond},
			{transient, ActionRetry, 3, time.Second},
			{transient, ActionHandoff, 4, 0},
		}},
		{"retry-after 2s is waited exactly", []step{{rateLimited(2 * time.Second), ActionRetry, 1, 2 * time.Second}}},
		{"retry-after 3600s is reported, not slept", []step{{rateLimited(time.Hour), ActionHandoff, 1, time.Hour}}},
		{"truncation: one retry, then narrow scope, then handoff", []step{
			{simple(KindOutputTruncated), ActionRetry, 1, 0},
			{simple(KindOutputTruncated), ActionNarrowScope, 2, 0},
			{simple(KindOutputTruncated), ActionHandoff, 3, 0},
		}},
		{"tool error: two retries per tool, then narrow scope, then handoff", []step{
			{toolErr("demo__divide"), ActionRetry, 1, 0},
			{toolErr("demo__divide"), ActionRetry, 2, 0},
			{toolErr("demo__divide"), ActionNarrowScope, 3, 0},
			{toolErr("demo__divide"), ActionHandoff, 4, 0},
		}},
		{"tool error budgets are per tool, strikes per kind", []step{
			{toolErr("a"), ActionRetry, 1, 0},
			{toolErr("b"), ActionRetry, 1, 0},
			{toolErr("a"), ActionRetry, 2, 0},
			{toolErr("a"), ActionNarrowScope, 3, 0},
			{toolErr("b"), ActionRetry, 2, 0},
			{toolErr("b"), ActionHandoff, 3, 0},
		}},
		{"no progress: narrow scope, then handoff", []step{
			{simple(KindNoProgress), ActionNarrowScope, 1, 0},
			{simple(KindNoProgress), ActionHandoff, 2, 0},
		}},
		{"strikes of different kinds do not add up", []step{
			{simple(KindNoProgress), ActionNarrowScope, 1, 0},
			{simple(KindOutputTruncated), ActionRetry, 1, 0},
			{simple(KindOutputTruncated), ActionNarrowScope, 2, 0},
		}},
		{"loop detected asks the user each time", []step{
			{simple(KindLoopDetected), ActionAskUser, 1, 0},
			{simple(KindLoopDetected), ActionAskUser, 2, 0},
		}},
		{"ambiguous input asks the user", []step{{simple(KindAmbiguousInput), ActionAskUser, 1, 0}}},
		{"iteration limit asks the user", []step{{simple(KindIterationLimit), ActionAskUser, 1, 0}}},
		{"time limit asks the user", []step{{simple(KindTimeLimit), ActionAskUser, 1, 0}}},
		{"refusal hands off", []step{{simple(KindOutputRefused), ActionHandoff, 1, 0}}},
		{"capability gap hands off", []step{{simple(KindCapabilityGap), ActionHandoff, 1, 0}}},
		{"policy violation hands off", []step{{simple(KindPolicyViolation), ActionHandoff, 1, 0}}},
		{"an unknown kind hands off", []step{{simple("mystery"), ActionHandoff, 1, 0}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := fixedPolicy()
			var st State
			for i, s := range tt.steps {
				d := p.Decide(s.f, &st)
				assert.Equal(t, s.f.Kind, d.Kind, "step %d", i)
				assert.Equal(t, s.f.Tool, d.Tool, "step %d", i)
				assert.Equal(t, s.action, d.Action, "step %d", i)
				assert.Equal(t, s.attempt, d.Attempt, "step %d", i)
				assert.Equal(t, s.wait, d.Wait, "step %d", i)
				assert.NotEmpty(t, d.Explanation, "step %d", i)
			}
		})
	}
}

// TestEscalationOrder pins the documented order for every kind of the closed set: what
// five failures of the same kind (and tool) in a row lead to.
func TestEscalationOrder(t *testing.T) {
	t.Parallel()
	R, N, A, H := ActionRetry, ActionNarrowScope, ActionAskUser, ActionHandoff
	want := map[Kind][]Action{
		KindTransientProvider: {R, R, R, H, H},
		KindOutputTruncated:   {R, N, H, H, H},
		KindToolError:         {R, R, N, H, H},
		KindNoProgress:        {N, H, H, H, H},
		KindLoopDetected:      {A, A, A, A, A},
		KindAmbiguousInput:    {A, A, A, A, A},
		KindIterationLimit:    {A, A, A, A, A},
		KindTimeLimit:         {A, A, A, A, A},
		KindOutputRefused:     {H, H, H, H, H},
		KindCapabilityGap:     {H, H, H, H, H},
		KindPolicyViolation:   {H, H, H, H, H},
		KindContextOverflow:   {R, H, H, H, H},
	}
	require.Len(t, want, len(Kinds()), "every kind has its escalation pinned")
	for _, k := range Kinds() {
		t.Run(string(k), func(t *testing.T) {
			p := fixedPolicy()
			var st State
			var got []Action
			for range want[k] {
				got = append(got, p.Decide(Failure{Kind: k, Tool: "t", Explanation: "x."}, &st).Action)
			}
			assert.Equal(t, want[k], got)
		})
	}
}

func TestDecideExplanations(t *testing.T) {
	t.Parallel()
	p := fixedPolicy()
	tests := []struct {
		name string
		f    Failure
		want string
	}{
		{"transient retry", Failure{Kind: KindTransientProvider, Explanation: "The language model is rate limiting requests.", RetryAfter: 2 * time.Second},
			"The language model is rate limiting requests. Retrying in 2s (retry 1 of 3)."},
		{"transient reported", Failure{Kind: KindTransientProvider, Explanation: "The language model is rate limiting requests.", RetryAfter: time.Hour},
			"The language model is rate limiting requests. It asked to wait 1h0m0s before trying again, which is longer than this coordinator waits (30s)."},
		{"tool error retry", Failure{Kind: KindToolError, Tool: "demo__divide", Explanation: `The tool "demo__divide" reported an error.`},
			`The tool "demo__divide" reported an error. The model may correct the call (retry 1 of 2).`},
		{"truncation retry", Failure{Kind: KindOutputTruncated, Explanation: "The reply was cut off."},
			"The reply was cut off. Asking again (retry 1 of 1)."},
		{"no progress", Failure{Kind: KindNoProgress, Explanation: "No progress."},
			"No progress. The model is asked to change its approach."},
		{"loop", Failure{Kind: KindLoopDetected, Explanation: "Looping."},
			"Looping. Your decision is needed to go on."},
		{"handoff", Failure{Kind: KindCapabilityGap, Explanation: "No agent can do this."},
			"No agent can do this."},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var st State
			assert.Equal(t, tt.want, p.Decide(tt.f, &st).Explanation)
		})
	}
}

func TestNarrowScopeSetsOneShotCorrective(t *testing.T) {
	t.Parallel()
	p := fixedPolicy()
	var st State
	f := Failure{Kind: KindToolError, Tool: "demo__divide", Code: "ERROR", Explanation: "x."}
	for range 2 {
		p.Decide(f, &st)
		assert.Nil(t, st.Corrective, "retries set no corrective instruction")
	}
	d := p.Decide(f, &st)
	require.Equal(t, ActionNarrowScope, d.Action)
	assert.Equal(t, &Corrective{Kind: KindToolError, Tool: "demo__divide", Attempts: 3}, st.Corrective)

	text, err := st.Addendum()
	require.NoError(t, err)
	assert.Contains(t, text, "<corrective_instruction>\nThe tool `demo__divide` has failed 3 times in this run.")
	assert.Nil(t, st.Corrective, "rendered once")
	text, err = st.Addendum()
	require.NoError(t, err)
	assert.NotContains(t, text, "<corrective_instruction>")
	assert.Contains(t, text, "<lessons_learned>", "the lesson stays")
}

func TestRecoveredResetsTheBudget(t *testing.T) {
	t.Parallel()
	p := fixedPolicy()
	var st State
	f := Failure{Kind: KindToolError, Tool: "a", Explanation: "x."}
	p.Decide(f, &st)
	p.Decide(f, &st)
	assert.Equal(t, 2, st.AttemptsOf(KindToolError, "a"))
	st.Recovered(KindToolError, "b")
	assert.Equal(t, 2, st.AttemptsOf(KindToolError, "a"), "another tool's success changes nothing")
	st.Recovered(KindToolError, "a")
	d := p.Decide(f, &st)
	assert.Equal(t, ActionRetry, d.Action)
	assert.Equal(t, 1, d.Attempt)

	tr := Failure{Kind: KindTransientProvider, Explanation: "x."}
	for range 3 {
		require.Equal(t, ActionRetry, p.Decide(tr, &st).Action)
	}
	st.Recovered(KindTransientProvider, "")
	assert.Equal(t, ActionRetry, p.Decide(tr, &st).Action, "a successful call restores the budget")
}

func TestStateSurvivesSuspension(t *testing.T) {
	t.Parallel()
	p := fixedPolicy()
	var st State
	p.Decide(Failure{Kind: KindToolError, Tool: "a", Code: "RETRY:tool_error", Explanation: "x."}, &st)
	p.Decide(Failure{Kind: KindNoProgress, Explanation: "x."}, &st)
	p.Decide(Failure{Kind: KindIterationLimit, Explanation: "x."}, &st)
	st.Loops(LoopConfig{}).Observe(call("a", `{"x":1}`))
	st.Iterations, st.Active, st.NoProgress = 7, 3*time.Second, 2
	st.Budget = BudgetUsage{ToolCalls: 4, Tokens: 1200}

	raw, err := json.Marshal(&st)
	require.NoError(t, err)
	var back State
	require.NoError(t, json.Unmarshal(raw, &back))
	assert.Equal(t, st, back)

	// Decisions continue where they were: the next no_progress is the second strike, the
	// tool keeps its attempts, the pending corrective instruction is still there.
	require.NotNil(t, back.Corrective)
	assert.Equal(t, ActionHandoff, p.Decide(Failure{Kind: KindNoProgress, Explanation: "x."}, &back).Action)
	assert.Equal(t, 2, p.Decide(Failure{Kind: KindToolError, Tool: "a", Explanation: "x."}, &back).Attempt)
	assert.True(t, back.Loops(LoopConfig{SoftThreshold: 1, HardThreshold: 2}).Predict(call("a", `{"x":1}`)))
}

func TestResumeGrantsOnlyThatAllowance(t *testing.T) {
	t.Parallel()
	base := State{Iterations: 25, Active: time.Minute, NoProgress: 3, Signatures: map[string]int{"call:a:1": 2}}
	tests := []struct {
		kind Kind
		want State
	}{
		{KindIterationLimit, State{Iterations: 0, Active: time.Minute, NoProgress: 3, Signatures: map[string]int{"call:a:1": 2}}},
		{KindTimeLimit, State{Iterations: 25, Active: 0, NoProgress: 3, Signatures: map[string]int{"call:a:1": 2}}},
		{KindLoopDetected, State{Iterations: 25, Active: time.Minute, NoProgress: 3, Signatures: map[string]int{}}},
		{KindNoProgress, State{Iterations: 25, Active: time.Minute, NoProgress: 0, Signatures: map[string]int{"call:a:1": 2}}},
		{KindAmbiguousInput, base},
	}
	for _, tt := range tests {
		t.Run(string(tt.kind), func(t *testing.T) {
			st := base
			st.Signatures = map[string]int{"call:a:1": 2}
			st.Resume(tt.kind)
			assert.Equal(t, tt.want, st)
		})
	}
}

func TestMostSevere(t *testing.T) {
	t.Parallel()
	d := func(a Action, k Kind) Decision { return Decision{Action: a, Kind: k} }
	tests := []struct {
		name string
		in   []Decision
		want Decision
		ok   bool
	}{
		{"empty", nil, Decision{}, false},
		{"one", []Decision{d(ActionRetry, KindToolError)}, d(ActionRetry, KindToolError), true},
		{"handoff beats ask_user", []Decision{d(ActionAskUser, KindLoopDetected), d(ActionHandoff, KindToolError)}, d(ActionHandoff, KindToolError), true},
		{"ask_user beats narrow_scope", []Decision{d(ActionNarrowScope, KindToolError), d(ActionAskUser, KindLoopDetected), d(ActionRetry, KindToolError)}, d(ActionAskUser, KindLoopDetected), true},
		{"first of equals", []Decision{d(ActionRetry, KindToolError), d(ActionRetry, KindOutputTruncated)}, d(ActionRetry, KindToolError), true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, ok := MostSevere(tt.in)
			assert.Equal(t, tt.ok, ok)
			assert.Equal(t, tt.want, got)
		})
	}
}

func TestActionTerminal(t *testing.T) {
	t.Parallel()
	want := map[Action]bool{ActionRetry: false, ActionNarrowScope: false, ActionAskUser: true, ActionHandoff: true, ActionStop: true}
	for a, term := range want {
		assert.Equal(t, term, a.Terminal(), a)
	}
}
