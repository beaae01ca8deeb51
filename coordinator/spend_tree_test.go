package coordinator

import (
	"context"
	"encoding/json"
	"fmt"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/baton-dev/baton/agui"
	"github.com/baton-dev/baton/durable"
	"github.com/baton-dev/baton/failure"
	"github.com/baton-dev/baton/internal/testutil/fakellm"
	"github.com/baton-dev/baton/llm"
	"github.com/baton-dev/baton/llm/openai"
	"github.com/baton-dev/baton/spend"
	"github.com/baton-dev/baton/subagent"
)

// TestDelegationCarriesAndCountsBudget: a delegation carries the run's remaining budget
// (baton/budget), and the usage the sub-agent reports counts against the run like a model
// call of its own: it warns, it stops the run before the call that would pass the limit,
// and the thread's (and the principal's) totals include it.
func TestDelegationCarriesAndCountsBudget(t *testing.T) {
	t.Parallel()
	const limit = 10000
	rig := newSpendRig(t, 50, func(c *Config) {
		c.Guard = failure.GuardPolicy{Budget: failure.Budget{MaxTokens: limit, WarnAt: 0.8}}
	}, spend.Limits{})
	sub := subagent.Usage{InputTokens: 8000, OutputTokens: 0, CostUSD: 0.5, MessageID: "m"}
	rig.agent.send = func(_ context.Context, req subagent.Request, obs subagent.Observer) (*subagent.Result, error) {
		obs.Task("task-1", "ctx-1")
		return &subagent.Result{State: subagent.StateCompleted, TaskID: "task-1", ContextID: "ctx-1", Text: "ok", Usage: &sub}, nil
	}
	r := mustStart(t, rig.e, input("tree"))
	evs := collect(t, r)

	first := usageOf(0)
	rig.agent.mu.Lock()
	sent := rig.agent.sent
	rig.agent.mu.Unlock()
	require.Len(t, sent, 1, "the second turn's call is refused: the sub-agent's report spent the budget")
	require.NotNil(t, sent[0].Budget, "the delegation carries the run's remaining budget")
	assert.Equal(t, subagent.Budget{Tokens: limit - int64(first.InputTokens+first.OutputTokens)}, *sent[0].Budget)

	assert.Len(t, rig.fake.Requests(), 2, "no model call after the sub-agent's usage and the next call passed the limit")
	assert.Equal(t, "handoff: policy_violation", r.EndReason())
	warnings := customs(evs, CustomBudgetWarning)
	require.Len(t, warnings, 1, "the sub-agent's report crossed warn_at")
	assert.Empty(t, customs(evs, CustomUsage), "a run a user started reports no baton.usage")

	second := usageOf(1)
	got, err := rig.e.cfg.Spend.ThreadUsage(context.Background(), "tree")
	require.NoError(t, err)
	assert.Equal(t, int64(first.InputTokens+second.InputTokens)+sub.InputTokens, got.InputTokens)
	assert.Equal(t, int64(first.OutputTokens+second.OutputTokens), got.OutputTokens)
	own := testPrices.Cost(int64(first.InputTokens), int64(first.OutputTokens)) + testPrices.Cost(int64(second.InputTokens), int64(second.OutputTokens))
	assert.InDelta(t, own+sub.CostUSD, got.CostUSD, 1e-9)
}

// TestCallerBudgetCapsTheRun: a run another Baton started with a budget keeps the smaller
// of its own and the given one (a larger given budget raises nothing), passes what is left
// of it on, and reports what it used as CUSTOM baton.usage.
func TestCallerBudgetCapsTheRun(t *testing.T) {
	t.Parallel()
	first, second := usageOf(0), usageOf(1)
	spent1 := int64(first.InputTokens + first.OutputTokens)
	cases := []struct {
		name   string
		own    int
		given  int64
		remain int64
	}{
		{"given smaller", 0, 2000, 2000 - spent1},
		{"own smaller", 2000, 1_000_000, 2000 - spent1},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			rig := newSpendRig(t, 50, func(cfg *Config) {
				cfg.Guard = failure.GuardPolicy{Budget: failure.Budget{MaxTokens: c.own}}
			}, spend.Limits{})
			in := input("capped")
			in.Depth = 2
			in.Budget = &agui.CallerBudget{Tokens: c.given}
			r := mustStart(t, rig.e, in)
			evs := collect(t, r)
			assert.Len(t, rig.fake.Requests(), 2, "the second call reached the smaller budget")
			assert.Equal(t, "handoff: policy_violation", r.EndReason())
			rig.agent.mu.Lock()
			sent := rig.agent.sent
			rig.agent.mu.Unlock()
			require.NotEmpty(t, sent)
			require.NotNil(t, sent[0].Budget)
			assert.Equal(t, c.remain, sent[0].Budget.Tokens, "what is left is passed on")

			reports := customs(evs, CustomUsage)
			require.Len(t, reports, 2, "one report per model call")
			last, ok := reports[len(reports)-1].Value.(spend.Usage)
			require.True(t, ok, "%T", reports[len(reports)-1].Value)
			assert.Equal(t, int64(first.InputTokens+second.InputTokens), last.InputTokens)
			assert.Equal(t, int64(first.OutputTokens+second.OutputTokens), last.OutputTokens)
		})
	}
}

// TestDelegationCarriesThePrincipalsDay: without a run budget, a delegation carries what
// is left of the principal's day; with both, the smaller in each unit.
func TestDelegationCarriesThePrincipalsDay(t *testing.T) {
	t.Parallel()
	first := usageOf(0)
	spent := int64(first.InputTokens + first.OutputTokens)
	cases := []struct {
		name  string
		run   failure.Budget
		daily spend.Limits
		want  subagent.Budget
	}{
		{"day only", failure.Budget{}, spend.Limits{Tokens: 50_000}, subagent.Budget{Tokens: 50_000 - spent}},
		{"run smaller", failure.Budget{MaxTokens: 20_000}, spend.Limits{Tokens: 50_000}, subagent.Budget{Tokens: 20_000 - spent}},
		{"day smaller, and a cost limit of the run", failure.Budget{MaxTokens: 90_000, MaxCostUSD: 5}, spend.Limits{Tokens: 50_000},
			subagent.Budget{Tokens: 50_000 - spent, CostUSD: 5 - testPrices.Cost(int64(first.InputTokens), int64(first.OutputTokens))}},
	}
	for i, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			rig := newSpendRig(t, 2, func(cfg *Config) { cfg.Guard = failure.GuardPolicy{Budget: c.run} }, c.daily)
			r := mustStart(t, rig.e, input(fmt.Sprintf("day-%d", i)))
			collect(t, r)
			rig.agent.mu.Lock()
			sent := rig.agent.sent
			rig.agent.mu.Unlock()
			require.Len(t, sent, 1)
			require.NotNil(t, sent[0].Budget)
			assert.Equal(t, c.want.Tokens, sent[0].Budget.Tokens)
			assert.InDelta(t, c.want.CostUSD, sent[0].Budget.CostUSD, 1e-12)
		})
	}
}

// TestCallerBudgetKeptOnTakeover: the checkpoint holds what is left of the budget the
// run's caller gave it, so a replica that takes the run over keeps the same limit (and
// passes the same remainder down), not its own budget alone.
func TestCallerBudgetKeptOnTakeover(t *testing.T) {
	t.Parallel()
	// What a checkpoint keeps: given 5,000 tokens, 1,290 used so far.
	rig := newSpendRig(t, 1, nil, spend.Limits{})
	in := input("cp-budget")
	in.Depth, in.Budget = 1, &agui.CallerBudget{Tokens: 5000}
	r := mustStart(t, rig.e, in)
	collect(t, r)
	var cp durable.Checkpoint
	require.NoError(t, json.Unmarshal(r.dur.checkpointDoc([]llm.Message{{Role: llm.RoleUser, Content: "hello"}}), &cp))
	require.NotNil(t, cp.Budget)
	first := usageOf(0)
	assert.Equal(t, int64(5000-first.InputTokens-first.OutputTokens), cp.Budget.Tokens, "what is left past the state's use")

	// A run taken over with 700 tokens left of its caller's budget, 1,000 used before.
	agent := &fakeAgent{send: contextEcho()}
	e := newEngine(t, &fakeModel{turn: callThenReport("research", `{"prompt":"go"}`)}, agent)
	st := e.cfg.Store
	ctx := context.Background()
	deadRun(t, st, "budget-to", []llm.Message{{Role: llm.RoleUser, Content: "hello"}}, durable.Work{})
	tin := input("budget-to")
	tin.Messages = nil
	work := durable.Work{Checkpoint: mustJSON(durable.Checkpoint{V: durable.CheckpointVersion, Owner: "alice", Input: mustJSON(tin),
		Conv: mustJSON([]llm.Message{{Role: llm.RoleUser, Content: "hello"}}), State: mustJSON(failure.State{Iterations: 1, Budget: failure.BudgetUsage{Tokens: 1000}}),
		Depth: 1, Budget: &agui.CallerBudget{Tokens: 700}})}
	require.NoError(t, st.SaveRunWork(ctx, "budget-to", tin.RunID, 1, mustJSON(&work)))
	require.Equal(t, 1, e.jobs.Takeover().Look(ctx, false))
	waitEnded(t, st, "budget-to", tin.RunID)
	agent.mu.Lock()
	defer agent.mu.Unlock()
	require.NotEmpty(t, agent.sent)
	require.NotNil(t, agent.sent[0].Budget, "the run taken over still has its caller's budget")
	assert.Equal(t, int64(700), agent.sent[0].Budget.Tokens)
}

// TestCallerBudgetKeptAcrossResume: a run another Baton started with a budget, suspended on
// a question, keeps what is left of that budget when a resume comes without one (a door
// resumes a run after a sign-in with no message of the caller's): its delegation after the
// resume carries the given budget less both runs' use, not the Baton's own (unlimited).
func TestCallerBudgetKeptAcrossResume(t *testing.T) {
	t.Parallel()
	var n atomic.Int64
	fake := fakellm.Start(func(fakellm.Request) fakellm.Reply {
		i := int(n.Add(1)) - 1
		u := usageOf(i)
		switch i {
		case 0:
			return fakellm.Reply{ToolCalls: []llm.ToolCall{{Name: askUserTool, Arguments: `{"question":"which one?"}`}}, Usage: &u}
		case 1:
			return fakellm.Reply{ToolCalls: []llm.ToolCall{{Name: "research", Arguments: `{"prompt":"that one"}`}}, Usage: &u}
		}
		return fakellm.Reply{Text: "done", Usage: &u}
	})
	t.Cleanup(fake.Close)
	rig := newSpendRig(t, 1, nil, spend.Limits{})
	m, err := openai.New(openai.Config{BaseURL: fake.URL, Model: "fake-model"})
	require.NoError(t, err)
	rig.e.cfg.Model = m

	const given = 50_000
	in := input("resume-budget")
	in.Depth, in.Budget = 1, &agui.CallerBudget{Tokens: given}
	ins := interruptsOf(t, collect(t, mustStart(t, rig.e, in)))
	require.Len(t, ins, 1)

	resume := resumeInput("resume-budget", "r2", resolved(ins[0].ID, `{"text":"that one"}`))
	resume.Depth = 1 // the door keeps the depth; the budget comes from the suspension
	collect(t, mustStart(t, rig.e, resume))

	rig.agent.mu.Lock()
	sent := rig.agent.sent
	rig.agent.mu.Unlock()
	require.Len(t, sent, 1, "one delegation, after the resume")
	require.NotNil(t, sent[0].Budget, "the resumed run still has its caller's budget")
	first, second := usageOf(0), usageOf(1)
	assert.Equal(t, int64(given-first.InputTokens-first.OutputTokens-second.InputTokens-second.OutputTokens), sent[0].Budget.Tokens)
}
