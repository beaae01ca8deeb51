package coordinator

import (
	"context"
	"fmt"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/baton-dev/baton/agui"
	"github.com/baton-dev/baton/internal/config"
	"github.com/baton-dev/baton/internal/testutil/pgtest"
	"github.com/baton-dev/baton/llm"
	"github.com/baton-dev/baton/spend"
	"github.com/baton-dev/baton/store"
	"github.com/baton-dev/baton/subagent"
)

// TestPrincipalDayAcrossReplicas runs one principal's runs on two replicas of one
// PostgreSQL store at once, under a daily token budget: the day is shared, and the spend
// passes the limit by at most the calls in flight when it was reached (one per run).
func TestPrincipalDayAcrossReplicas(t *testing.T) {
	t.Parallel()
	const (
		perCall = 100
		limit   = 1000
		runs    = 6
	)
	dsn := pgtest.DSN(t)
	var seq atomic.Int64
	var calls atomic.Int64
	gate := make(chan struct{})
	turn := func(*llm.Request) []llm.Delta {
		calls.Add(1)
		return []llm.Delta{
			{ToolCall: &llm.ToolCallDelta{Index: 0, ID: fmt.Sprintf("c%d", seq.Add(1)), Name: "research", Arguments: fmt.Sprintf(`{"prompt":"p%d"}`, seq.Load())}},
			{Done: &llm.Completion{FinishReason: llm.FinishToolCalls, Usage: llm.Usage{InputTokens: perCall - 10, OutputTokens: 10}}},
		}
	}
	var engines [2]*Engine
	var stores [2]store.Store
	for i := range engines {
		st, err := store.Open(context.Background(), dsn)
		require.NoError(t, err)
		t.Cleanup(func() { _ = st.Close() })
		stores[i] = st
		meter := spend.NewMeter(spend.MeterConfig{Pricer: spend.NewPricer(config.LLM{Model: "m"}), Ledger: st.(spend.Ledger),
			Daily: spend.Limits{Tokens: limit}, WarnAt: 0.8})
		engines[i] = newEngine(t, &fakeModel{turn: turn, block: gate}, &fakeAgent{send: finalResult(subagent.StateCompleted, "ok")}, func(c *Config) {
			c.Store = st
			c.Spend = meter
			c.Replica = fmt.Sprintf("replica-%d", i)
			c.Heartbeat = 50 * time.Millisecond
		})
	}
	var started []*Run
	for i := range runs {
		in := input(fmt.Sprintf("rep%d", i))
		r, err := engines[i%2].StartRun(context.Background(), in, "alice")
		require.NoError(t, err)
		started = append(started, r)
	}
	close(gate)
	warnings := 0
	for _, r := range started {
		evs := collect(t, r)
		assert.Equal(t, "handoff: policy_violation", r.EndReason(), "every run stops on the principal's day")
		for _, e := range evs {
			if c, ok := e.(*agui.Custom); ok && c.Name == CustomBudgetWarning {
				warnings++
			}
		}
	}
	day, err := stores[0].(spend.Ledger).DaySpend(context.Background(), "alice", spend.Day(time.Now()))
	require.NoError(t, err)
	total := day.InputTokens + day.OutputTokens
	assert.Equal(t, calls.Load()*perCall, total, "every call is counted once")
	assert.GreaterOrEqual(t, total, int64(limit))
	assert.LessOrEqual(t, total, int64(limit+runs*perCall), "overshoot at most the calls in flight")
	assert.Equal(t, 1, warnings, "one warning for the principal at 80%, on whichever replica crossed it")

	_, err = engines[1].StartRun(context.Background(), input("late"), "alice")
	var be *BudgetExceededError
	assert.ErrorAs(t, err, &be, "a new run on either replica is refused")
}

// TestPrincipalDaySurvivesRestart: a coordinator restarted on the same SQLite file keeps
// the principal's day: the spent day refuses a new run after the restart.
func TestPrincipalDaySurvivesRestart(t *testing.T) {
	t.Parallel()
	dsn := "sqlite:" + filepath.Join(t.TempDir(), "baton.db")
	turn := func(*llm.Request) []llm.Delta {
		return []llm.Delta{{Text: "ok"}, {Done: &llm.Completion{FinishReason: llm.FinishStop, Usage: llm.Usage{InputTokens: 600, OutputTokens: 100}}}}
	}
	open := func() (*Engine, store.Store) {
		st, err := store.Open(context.Background(), dsn)
		require.NoError(t, err)
		meter := spend.NewMeter(spend.MeterConfig{Pricer: spend.NewPricer(config.LLM{Model: "m"}), Ledger: st.(spend.Ledger), Daily: spend.Limits{Tokens: 1000}})
		e, err := New(Config{Model: &fakeModel{turn: turn}, Store: st, Spend: meter})
		require.NoError(t, err)
		require.NoError(t, e.Start(context.Background()))
		return e, st
	}
	stop := func(e *Engine, st store.Store) {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		require.NoError(t, e.Stop(ctx))
		require.NoError(t, st.Close())
	}

	e, st := open()
	r, err := e.StartRun(context.Background(), input("before"), "alice")
	require.NoError(t, err)
	collect(t, r)
	r, err = e.StartRun(context.Background(), input("before2"), "alice")
	require.NoError(t, err, "700 of 1000 tokens: the day lasts")
	collect(t, r)
	stop(e, st)

	e, st = open()
	defer stop(e, st)
	_, err = e.StartRun(context.Background(), input("after"), "alice")
	var be *BudgetExceededError
	require.ErrorAs(t, err, &be, "1400 tokens spent before the restart: the day is over")
	r, err = e.StartRun(context.Background(), input("bob"), "bob")
	require.NoError(t, err, "another principal's day is untouched")
	collect(t, r)
}
