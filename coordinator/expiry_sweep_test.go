package coordinator

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// An interrupt swept on expiry (its task cancelled, its suspension removed) is remembered:
// a resume of it that arrives afterwards gets INTERRUPT_EXPIRED, sends nothing and cancels
// nothing again, instead of running as a plain run of a thread with nothing open.
func TestResumeAfterExpirySweep(t *testing.T) {
	clk := &hitlClock{now: time.Date(2026, 11, 21, 10, 0, 0, 0, time.UTC)}
	agent := &fakeAgent{send: askingAgent("task-s")}
	e := newEngine(t, &fakeModel{turn: callThenReport("research", `{"prompt":"trip"}`)}, agent,
		func(c *Config) {
			c.Now = clk.Now
			c.InterruptTTL = time.Minute
			c.ExpiryInterval = 5 * time.Millisecond
		})
	in := interruptsOf(t, startAndCollect(t, e, input("sw")))[0]

	clk.add(2 * time.Minute)
	require.Eventually(t, func() bool { return len(agent.cancelled()) > 0 }, 10*time.Second, 5*time.Millisecond,
		"the sweep cancels the parked task")
	_, err := e.cfg.Store.LoadSuspension(t.Context(), "sw")
	require.Error(t, err, "the swept suspension is gone")

	evs := startAndCollect(t, e, resumeInput("sw", "r2", resolved(in.ID, `{"text":"x"}`)))
	assert.Equal(t, "INTERRUPT_EXPIRED", runErrorCode(t, evs))
	assert.Equal(t, "RUN_STARTED", string(evs[0].EventType()))
	assert.Equal(t, []string{"task-s"}, agent.cancelled(), "cancelled once")
	assert.Len(t, agent.sent, 1, "nothing was sent to the expired task")
}
