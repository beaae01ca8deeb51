package integration

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/baton-dev/baton/metrics"
)

// TestDisconnectConfirmedInProcess: 200 concurrent runs delegating to the demo agent's slow
// task are disconnected at once, and the agent answers the first three CancelTask requests
// of every task with 503: more than one call's own retries absorb, so each cancellation is
// confirmed only by the engine's background follow-up. Every task still ends canceled at the
// agent, the engine reports each cancellation once, as confirmed, and
// baton_cancellations_total counts them as confirmed (never as failed), while the runs end
// (and free their threads) without waiting for the confirmation.
func TestDisconnectConfirmedInProcess(t *testing.T) {
	const n = 200
	m := metrics.New()
	ib := startInProcess(t, inprocOptions{CancelTimeout: 120 * time.Second, SlowStep: 15 * time.Second, FailCancels: 3, Metrics: m})
	slow := func(i int) string { return fmt.Sprintf("research: slow survey %d", i) }

	s := startStorm(t, ib.URL, n, slow, "SUBAGENT_STARTED")
	s.Disconnect()
	for i, r := range s.Runs {
		assert.Empty(t, eventsOfType(r.Events, "RUN_FINISHED"), "run %d finished before the disconnect", i)
	}
	assertAgentCancelledAll(t, ib.Rec, n)
	ib.waitIdle(t)
	assert.EventuallyWithT(t, func(c *assert.CollectT) {
		assert.Equal(c, map[string]int{"a2a_task/confirmed": n}, ib.Log.cancelResults(), "the engine's final cancellation reports")
		assert.Equal(c, map[string]float64{"confirmed": n}, cancellationCounts(t, m), "baton_cancellations_total")
	}, stormWait, 50*time.Millisecond)

	ib.mu.Lock()
	defer ib.mu.Unlock()
	require.Len(t, ib.refused, n, "every task's first CancelTask requests were refused")
	for id, k := range ib.refused {
		assert.Equal(t, 3, k, "refused CancelTask requests for task %s", id)
	}
}

// cancellationCounts reads baton_cancellations_total by result (only the non-zero ones).
func cancellationCounts(t *testing.T, m *metrics.Metrics) map[string]float64 {
	t.Helper()
	families, err := m.Registry().Gather()
	require.NoError(t, err)
	out := map[string]float64{}
	for _, f := range families {
		if f.GetName() != "baton_cancellations_total" {
			continue
		}
		for _, s := range f.GetMetric() {
			if v := s.GetCounter().GetValue(); v > 0 {
				for _, l := range s.GetLabel() {
					if l.GetName() == "result" {
						out[l.GetValue()] += v
					}
				}
			}
		}
	}
	return out
}
