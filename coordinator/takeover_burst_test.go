package coordinator

import (
	"context"
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/baton-dev/baton/durable"
	"github.com/baton-dev/baton/llm"
	"github.com/baton-dev/baton/store"
)

// The claim loop itself (batches, rounds, two claimers, retries) is tested in package
// durable with a fake Adopter; here the engine (Engine.Adopt) continues what it is handed.

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
// all taken over by one look of the engine's takeover (not one batch per look), each
// claimed once (the epoch moved on by one), and the engine (Engine.Adopt) continues each to its
// end here, several at a time.
func TestTakeOverBurstInOneTick(t *testing.T) {
	e := newEngine(t, &fakeModel{turn: answerTurn}, &fakeAgent{})
	st := e.cfg.Store
	threads := burstThreads(t, st, 2*durable.TakeoverBatch+7)

	ctx := context.Background()
	require.Equal(t, len(threads), e.jobs.Takeover().Look(ctx, false))
	for _, th := range threads {
		run, err := st.GetRun(ctx, th, "r-"+th)
		require.NoError(t, err)
		assert.Equal(t, e.cfg.Replica, run.Replica, "run of %s taken over in the first look", th)
		assert.Equal(t, int64(2), run.Epoch, "run of %s claimed once", th)
	}
	for _, th := range threads {
		run, evs := waitEnded(t, st, th, "r-"+th)
		assert.Equal(t, string(OutcomeCompleted), run.State, "run of %s continued to its end", th)
		typs := checkStream(t, evs)
		assert.Equal(t, "RUN_FINISHED", typs[len(typs)-1], "run of %s ended once, at the end of its log", th)
	}
	assert.Zero(t, e.jobs.Takeover().Pending(), "nothing left for the next look")
}
