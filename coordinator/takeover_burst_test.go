package coordinator

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/baton-dev/baton/durable"
	"github.com/baton-dev/baton/llm"
	"github.com/baton-dev/baton/store"
)

// burstThreads records n runs of a replica that died mid-turn, all with lapsed leases.
func burstThreads(t *testing.T, st store.Store, n int) []string {
	t.Helper()
	threads := make([]string, n)
	for i := range threads {
		threads[i] = fmt.Sprintf("burst-%03d", i)
		deadRun(t, st, threads[i], []llm.Message{{Role: llm.RoleUser, Content: "hello"}}, durable.Work{})
	}
	return threads
}

// answerTurn answers at once.
func answerTurn(*llm.Request) []llm.Delta {
	return []llm.Delta{{Text: "done"}, {Done: &llm.Completion{FinishReason: "stop"}}}
}

// TestTakeOverBurstInOneTick: a dead replica's runs, more than one claim batch of them, are
// all taken over by one look for lapsed runs (not one batch per tick), each claimed once
// (the epoch moved on by one) and continued to its end here.
func TestTakeOverBurstInOneTick(t *testing.T) {
	e := newEngine(t, &fakeModel{turn: answerTurn}, &fakeAgent{})
	st := e.Store()
	threads := burstThreads(t, st, 2*reapBatch+7)

	e.takeOverLapsed(false)
	ctx := context.Background()
	for _, th := range threads {
		run, err := st.GetRun(ctx, th, "r-"+th)
		require.NoError(t, err)
		assert.Equal(t, e.cfg.Replica, run.Replica, "run of %s taken over in the first look", th)
		assert.Equal(t, int64(2), run.Epoch, "run of %s claimed once", th)
	}
	for _, th := range threads {
		run, _ := waitEnded(t, st, th, "r-"+th)
		assert.Equal(t, string(OutcomeCompleted), run.State, "run of %s continued to its end", th)
	}
}

// TestTakeOverBurstTwoClaimers: two replicas looking for lapsed runs at the same time split
// a burst between them: every run is claimed by exactly one of them, once, and ends once.
func TestTakeOverBurstTwoClaimers(t *testing.T) {
	st, err := store.Open(context.Background(), "memory:")
	require.NoError(t, err)
	t.Cleanup(func() { _ = st.Close() })
	threads := burstThreads(t, st, 2*reapBatch+7)
	finals := map[string]int{}
	newClaimer := func() *Engine {
		return newEngine(t, &fakeModel{turn: answerTurn}, &fakeAgent{},
			func(c *Config) { c.Store = st })
	}
	a, b := newClaimer(), newClaimer()
	require.NotEqual(t, a.cfg.Replica, b.cfg.Replica)
	var wg sync.WaitGroup
	wg.Go(func() { a.takeOverLapsed(false) })
	wg.Go(func() { b.takeOverLapsed(false) })
	wg.Wait()
	ctx := context.Background()
	for _, th := range threads {
		run, err := st.GetRun(ctx, th, "r-"+th)
		require.NoError(t, err)
		assert.Contains(t, []string{a.cfg.Replica, b.cfg.Replica}, run.Replica, "run of %s taken over", th)
		assert.Equal(t, int64(2), run.Epoch, "run of %s claimed once", th)
	}
	for _, th := range threads {
		_, evs := waitEnded(t, st, th, "r-"+th)
		for _, ev := range evs {
			var head struct {
				Type string `json:"type"`
			}
			require.NoError(t, json.Unmarshal(ev.Data, &head))
			if head.Type == "RUN_FINISHED" || head.Type == "RUN_ERROR" {
				finals[th]++
			}
		}
	}
	for _, th := range threads {
		assert.Equal(t, 1, finals[th], "run of %s ended once in its log", th)
	}
}
