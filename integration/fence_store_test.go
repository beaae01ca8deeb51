package integration

// Store outages (design/fencing.md): two replicas on one PostgreSQL server of the test's
// own, which the test stops (pg_ctl stop -m fast) in the middle of a run that charges four
// times and starts again on the same port. Longer than the lease, no replica may take the
// other's run while both are alive; shorter, the run must simply go on. Either way each
// charge happens at most once, each call has one result, the run ends once, and a
// reconnect replays its log without holes.

import (
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/baton-dev/baton/internal/testutil/fakellm"
	"github.com/baton-dev/baton/internal/testutil/pgtest"
)

func TestFenceStoreDownPastLease(t *testing.T) {
	t.Parallel()
	storeDown(t, 6*time.Second)
}

func TestFenceStoreDownWithinLease(t *testing.T) {
	t.Parallel()
	storeDown(t, 1500*time.Millisecond)
}

// storeDown runs the outage scenario with PostgreSQL down for outage; the replicas' lease
// is 3 s.
func storeDown(t *testing.T, outage time.Duration) {
	pg := pgtest.Private(t)
	pay := startCountingMCP(t)
	model := fakellm.Start(chargingModel)
	t.Cleanup(model.Close)
	cfg := testConfig{LLMURL: model.URL, MCP: []mcpServerEntry{{Name: "pay", URL: pay.URL}}, Store: pg.DSN, Grace: "1s"}.yaml() +
		"replication:\n  heartbeat: 500ms\n  lease: 3s\n"
	a := startHITLCoordinator(t, cfg)
	b := startHITLCoordinator(t, cfg)
	waitMCPSettled(t, a.URL)
	waitMCPSettled(t, b.URL)

	thread := newThreadID("fence-store-down")
	live := postJSON(t, a.URL+"/agui", `{"threadId":"`+thread+`","runId":"r1","protocolVersion":"1.0","messages":[{"id":"u1","role":"user","content":"charge four orders"}]}`)
	require.Equal(t, http.StatusOK, live.StatusCode)
	defer live.Body.Close()

	// The store goes away while the second charge is in flight.
	deadline := time.Now().Add(30 * time.Second)
	for pay.charges.Load() < 2 {
		require.True(t, time.Now().Before(deadline), "the second charge never reached the MCP server")
		time.Sleep(10 * time.Millisecond)
	}
	require.NoError(t, pg.Stop())
	time.Sleep(outage)
	require.NoError(t, pg.Start())
	back := time.Now()

	// Whoever drives the run now, a reconnect through either replica follows it to its end.
	frames := followRun(t, b.URL, thread, 0, 120*time.Second)
	t.Logf("followed to the end %v after the store came back: %v", time.Since(back).Round(time.Millisecond), frameTypes(frames))
	again := followRun(t, a.URL, thread, 0, 30*time.Second)
	assert.Equal(t, frameTypes(frames), frameTypes(again), "the two replicas replay different logs")
	results, terminals := resultsPerCall(frames)
	assert.Equal(t, 1, terminals, "one terminal event: %v", frameTypes(frames))
	for id, n := range results {
		assert.Equal(t, 1, n, "TOOL_CALL_RESULTs of %s: %v", id, results)
	}
	for i := 1; i <= chargeCalls+2; i++ {
		assert.LessOrEqual(t, pay.chargesOf(fmt.Sprintf("order-%d", i)), 1, "order-%d was charged more than once", i)
	}
	assertDense(t, frames)
}

// assertDense checks that a replay from the start numbers its events 1, 2, 3... (a takeover
// continues the numbering without a jump, and no event is missing).
func assertDense(t *testing.T, frames []takeoverFrame) {
	t.Helper()
	for i, f := range frames {
		if !assert.Equal(t, int64(i+1), f.ID, "event ids are not dense: %v", frameIDs(frames)) {
			return
		}
	}
}

// frameIDs lists the frames' event ids.
func frameIDs(fs []takeoverFrame) []int64 {
	out := make([]int64, len(fs))
	for i, f := range fs {
		out[i] = f.ID
	}
	return out
}
