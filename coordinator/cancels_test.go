package coordinator

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/baton-dev/baton/agui"
)

// busyAgent refuses the first n cancels with an error that retrying may change.
type busyAgent struct {
	*fakeAgent
	n     int32
	calls atomic.Int32
}

func (b *busyAgent) Cancel(ctx context.Context, taskID string) error {
	if b.calls.Add(1) <= b.n {
		return errors.New("agent busy, try again")
	}
	return b.fakeAgent.Cancel(ctx, taskID)
}

// A parked task whose interrupt is answered "cancelled" is cancelled through the confirmer:
// a refused cancel is retried until the agent applies it (it used to get one try).
func TestCancelledResumeRetriedUntilConfirmed(t *testing.T) {
	agent := &busyAgent{fakeAgent: &fakeAgent{send: askingAgent("task-b")}, n: 2}
	e := newEngine(t, &fakeModel{turn: callThenReport("research", `{"prompt":"trip"}`)}, agent.fakeAgent,
		func(c *Config) { c.Agents[0].Client = agent })
	in := interruptsOf(t, startAndCollect(t, e, input("cb")))[0]
	evs := startAndCollect(t, e, resumeInput("cb", "r2", agui.ResumeEntry{InterruptID: in.ID, Status: "cancelled"}))
	require.Len(t, toolResults(evs), 1)
	require.NoError(t, e.cancels.confirm.Wait(context.Background()))
	assert.Equal(t, []string{"task-b"}, agent.cancelled(), "applied once the agent accepted")
	assert.Equal(t, int32(3), agent.calls.Load(), "two refusals, then the cancel")
}
