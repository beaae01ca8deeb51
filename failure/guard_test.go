package failure

import (
	"encoding/json"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/baton-dev/baton/bridge"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// clock is a settable test clock.
type clock struct {
	mu  sync.Mutex
	now time.Time
}

func newClock() *clock { return &clock{now: time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)} }

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *clock) advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

// signal decodes the JSON of a [RETRY:<code>] result.
func signal(t *testing.T, result string) (code string, s map[string]any) {
	t.Helper()
	tag, code, ok := bridge.ParseTag(result)
	require.True(t, ok, result)
	require.Equal(t, bridge.TagRetry, tag)
	_, raw, _ := strings.Cut(result, "] ")
	require.NoError(t, json.Unmarshal([]byte(raw), &s))
	return code, s
}

var demoTools = []string{"research", "travel", "demo__deploy", "demo__divide", "demo__count_slowly"}

func demoGuard(p GuardPolicy, clk *clock, used *BudgetUsage) *Guard {
	return NewGuard(GuardConfig{
		Policy: p,
		Agents: []string{"research", "travel"},
		Tools:  demoTools,
		Always: []string{"ask_user", "show_map"},
		Used:   used,
		Now:    clk.Now,
	})
}

func TestGuardPermitted(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		p       GuardPolicy
		allowed []string
	}{
		{"no policy", GuardPolicy{}, demoTools},
		{"deny an agent", GuardPolicy{Agents: AccessList{Deny: []string{"travel"}}}, []string{"research", "demo__deploy", "demo__divide", "demo__count_slowly"}},
		{"allow agents", GuardPolicy{Agents: AccessList{Allow: []string{"research"}}}, []string{"research", "demo__deploy", "demo__divide", "demo__count_slowly"}},
		{"deny a tool", GuardPolicy{Tools: AccessList{Deny: []string{"demo__deploy"}}}, []string{"research", "travel", "demo__divide", "demo__count_slowly"}},
		{"allow a pattern", GuardPolicy{Tools: AccessList{Allow: []string{"demo__d*"}}}, []string{"research", "travel", "demo__deploy", "demo__divide"}},
		{"deny wins over allow", GuardPolicy{Tools: AccessList{Allow: []string{"demo__*"}, Deny: []string{"demo__divide"}}}, []string{"research", "travel", "demo__deploy", "demo__count_slowly"}},
		{"tool lists do not touch agents", GuardPolicy{Tools: AccessList{Deny: []string{"*"}}}, []string{"research", "travel"}},
		{"bad patterns match nothing", GuardPolicy{Tools: AccessList{Deny: []string{"demo__[", "["}}}, demoTools},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := demoGuard(tt.p, newClock(), nil)
			var got []string
			for _, name := range demoTools {
				if g.Permitted(name) {
					got = append(got, name)
				}
			}
			assert.Equal(t, tt.allowed, got)
			assert.True(t, g.Permitted("ask_user"), "ask_user is never denied")
			assert.True(t, g.Permitted("show_map"), "frontend tools are never denied")
		})
	}
}

func TestGuardPolicyDeny(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name       string
		p          GuardPolicy
		call       string
		message    string
		resolution string
		valid      []any
	}{
		{"denied agent", GuardPolicy{Agents: AccessList{Deny: []string{"travel"}}}, "travel",
			`The coordinator's policy does not allow delegating to the sub-agent "travel". Use one of valid_next_actions instead.`,
			ResolutionUseOtherTool, []any{"ask_user", "demo__count_slowly", "demo__deploy", "demo__divide", "research", "show_map"}},
		{"denied tool", GuardPolicy{Tools: AccessList{Deny: []string{"demo__deploy"}}}, "demo__deploy",
			`The coordinator's policy does not allow calling the tool "demo__deploy". Use one of valid_next_actions instead.`,
			ResolutionUseOtherTool, []any{"ask_user", "demo__count_slowly", "demo__divide", "research", "show_map", "travel"}},
		{"nothing else left", GuardPolicy{Agents: AccessList{Deny: []string{"*"}}, Tools: AccessList{Deny: []string{"*"}}}, "research",
			`The coordinator's policy does not allow delegating to the sub-agent "research".`,
			ResolutionHandoff, []any{"ask_user", "show_map"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			used := &BudgetUsage{}
			g := demoGuard(tt.p, newClock(), used)
			out, ok := g.Check(tt.call)
			require.False(t, ok)
			code, s := signal(t, out)
			assert.Equal(t, "policy_deny", code)
			assert.Equal(t, map[string]any{
				"error":              "policy_deny",
				"requested":          tt.call,
				"message":            tt.message,
				"valid_next_actions": tt.valid,
				"resolution":         map[string]any{"type": tt.resolution},
			}, s)
			assert.Equal(t, BudgetUsage{}, *used, "a refused call uses nothing")
			f := DetectToolResult(tt.call, typed(out))
			require.NotNil(t, f)
			assert.Equal(t, KindPolicyViolation, f.Kind)
			assert.Equal(t, tt.message, f.Explanation)
		})
	}
}

func TestGuardRateLimit(t *testing.T) {
	t.Parallel()
	clk := newClock()
	limiter := NewRateLimiter([]RateLimit{{Tool: "demo__divide", MaxCalls: 2, Per: time.Minute}, {Tool: "ignored", MaxCalls: 0, Per: time.Minute}})
	g := NewGuard(GuardConfig{Limiter: limiter, Tools: demoTools, Agents: []string{"research", "travel"}, Now: clk.Now})

	_, ok := g.Check("demo__divide")
	require.True(t, ok)
	clk.advance(10 * time.Second)
	_, ok = g.Check("demo__divide")
	require.True(t, ok)
	clk.advance(500 * time.Millisecond)

	out, ok := g.Check("demo__divide")
	require.False(t, ok)
	code, s := signal(t, out)
	assert.Equal(t, "rate_exceeded", code)
	assert.Equal(t, map[string]any{
		"error":              "rate_exceeded",
		"requested":          "demo__divide",
		"message":            `The tool "demo__divide" may be called at most 2 times per 1m0s; it can be called again in 50s.`,
		"valid_next_actions": []any{"demo__count_slowly", "demo__deploy", "research", "travel"},
		"resolution":         map[string]any{"type": "wait", "retry_after_seconds": 50.0, "resets_at": "2026-03-01T12:01:00Z"},
	}, s)
	assert.NotContains(t, g.ValidNextActions(), "demo__divide")
	assert.Equal(t, 2, g.Used().ToolCalls, "the refused call is not counted")

	_, ok = g.Check("demo__deploy")
	assert.True(t, ok, "other tools are not limited")

	clk.advance(49*time.Second + 500*time.Millisecond) // the first call leaves the window
	assert.Contains(t, g.ValidNextActions(), "demo__divide")
	_, ok = g.Check("demo__divide")
	require.True(t, ok)
	out, ok = g.Check("demo__divide")
	require.False(t, ok)
	_, s = signal(t, out)
	assert.Equal(t, 10.0, s["resolution"].(map[string]any)["retry_after_seconds"], "the second call leaves the window 10 s later")

	// The limiter is shared: another run's guard sees the same window.
	other := NewGuard(GuardConfig{Limiter: limiter, Tools: demoTools, Now: clk.Now})
	_, ok = other.Check("demo__divide")
	assert.False(t, ok)
}

func TestRateLimiterConcurrent(t *testing.T) {
	t.Parallel()
	clk := newClock()
	limiter := NewRateLimiter([]RateLimit{{Tool: "x", MaxCalls: 5, Per: time.Hour}})
	var allowed atomic.Int32
	var wg sync.WaitGroup
	for range 8 {
		g := NewGuard(GuardConfig{Limiter: limiter, Tools: []string{"x"}, Now: clk.Now})
		wg.Go(func() {
			for range 10 {
				if _, ok := g.Check("x"); ok {
					allowed.Add(1)
				}
				g.ValidNextActions()
			}
		})
	}
	wg.Wait()
	assert.Equal(t, int32(5), allowed.Load())
}

func TestGuardBudget(t *testing.T) {
	t.Parallel()
	t.Run("tool calls", func(t *testing.T) {
		used := &BudgetUsage{ToolCalls: 1} // continued from an earlier part of the run
		g := demoGuard(GuardPolicy{Budget: Budget{MaxToolCalls: 3}}, newClock(), used)
		for range 2 {
			_, ok := g.Check("research")
			require.True(t, ok)
		}
		out, ok := g.Check("travel")
		require.False(t, ok)
		code, s := signal(t, out)
		assert.Equal(t, "budget_exceeded", code)
		assert.Equal(t, map[string]any{
			"error":              "budget_exceeded",
			"requested":          "travel",
			"message":            "This run has used its budget of 3 tool calls. No more tool calls can be made in this run: answer with what you have.",
			"valid_next_actions": []any{"ask_user", "show_map"},
			"resolution":         map[string]any{"type": "handoff"},
		}, s)
		assert.Equal(t, BudgetUsage{ToolCalls: 3}, *used, "usage is written to the run's state")
		assert.Equal(t, []string{"ask_user", "show_map"}, g.ValidNextActions())
		f := DetectToolResult("travel", typed(out))
		require.NotNil(t, f)
		assert.Equal(t, KindPolicyViolation, f.Kind)
		_, ok = g.Check("ask_user")
		assert.True(t, ok, "ask_user is never refused")
	})
	t.Run("tokens", func(t *testing.T) {
		used := &BudgetUsage{}
		g := demoGuard(GuardPolicy{Budget: Budget{MaxTokens: 1000}}, newClock(), used)
		assert.Nil(t, g.AddTokens(600))
		assert.Nil(t, g.AddTokens(-5), "negative counts are ignored")
		_, ok := g.Check("research")
		require.True(t, ok)
		f := g.AddTokens(400)
		require.NotNil(t, f)
		assert.Equal(t, KindPolicyViolation, f.Kind)
		assert.Equal(t, "RETRY:budget_exceeded", f.Code)
		assert.Equal(t, "This run has used its budget of 1000 tokens; an operator can raise policy.budget.max_tokens.", f.Explanation)
		out, ok := g.Check("research")
		require.False(t, ok)
		_, s := signal(t, out)
		assert.Equal(t, "This run has used its budget of 1000 tokens; an operator can raise policy.budget.max_tokens. No more tool calls can be made in this run: answer with what you have.", s["message"])
		assert.Equal(t, BudgetUsage{ToolCalls: 1, Tokens: 1000}, g.Used())
	})
	t.Run("zero is unlimited", func(t *testing.T) {
		g := demoGuard(GuardPolicy{}, newClock(), nil)
		for range 100 {
			_, ok := g.Check("research")
			require.True(t, ok)
		}
		assert.Nil(t, g.AddTokens(1<<30))
	})
	t.Run("budget before rate limit", func(t *testing.T) {
		g := demoGuard(GuardPolicy{Budget: Budget{MaxToolCalls: 1}, RateLimits: []RateLimit{{Tool: "research", MaxCalls: 1, Per: time.Hour}}}, newClock(), nil)
		_, ok := g.Check("research")
		require.True(t, ok)
		out, _ := g.Check("research")
		code, _ := signal(t, out)
		assert.Equal(t, "budget_exceeded", code)
	})
}

func TestGuardUngovernedNames(t *testing.T) {
	t.Parallel()
	g := demoGuard(GuardPolicy{Tools: AccessList{Deny: []string{"*"}}, Budget: Budget{MaxToolCalls: 1}}, newClock(), nil)
	for _, name := range []string{"ask_user", "show_map", "no_such_tool"} {
		out, ok := g.Check(name)
		assert.True(t, ok, name)
		assert.Empty(t, out)
	}
	assert.Equal(t, 0, g.Used().ToolCalls, "only governed calls are counted")
	assert.Equal(t, []string{"ask_user", "research", "show_map", "travel"}, g.ValidNextActions())
}

func TestGuardValidNextActionsNeverNull(t *testing.T) {
	t.Parallel()
	g := NewGuard(GuardConfig{Tools: []string{"a"}, Policy: GuardPolicy{Tools: AccessList{Deny: []string{"a"}}}})
	assert.Equal(t, []string{}, g.ValidNextActions())
	out, ok := g.Check("a")
	require.False(t, ok)
	assert.Contains(t, out, `"valid_next_actions":[]`)
	assert.Contains(t, out, `"resolution":{"type":"handoff"}`)
}
