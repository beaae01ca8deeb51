package coordinator

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/baton-dev/baton/subagent"
)

// An agent that has not named its task when the timeout fires: the run goes on at once with
// [TIMEOUT:task_id=none]; a task id that arrives later still gets its CancelTask.
func TestDelegationTimeoutWithoutTaskID(t *testing.T) {
	named := make(chan struct{})
	agent := &fakeAgent{send: func(ctx context.Context, req subagent.Request, obs subagent.Observer) (*subagent.Result, error) {
		<-named // the id comes only after the timeout
		obs.Task("late-1", "ctx")
		<-ctx.Done()
		return nil, ctx.Err()
	}}
	e := newEngine(t, &fakeModel{turn: callThenReport("research", `{"prompt":"slow"}`)}, agent, func(c *Config) { c.Agents[0].Timeout = 50 * time.Millisecond })
	r, err := e.StartRun(context.Background(), input("t"), "")
	require.NoError(t, err)
	res := toolResults(collect(t, r))
	require.Len(t, res, 1)
	assert.True(t, strings.HasPrefix(res[0], "[TIMEOUT:task_id=none]\n"), res[0])
	assert.Contains(t, res[0], "no cancel could be sent")
	close(named)
	require.Eventually(t, func() bool { return len(agent.cancelled()) == 1 }, 10*time.Second, time.Millisecond, "the late task id was never cancelled")
	assert.Equal(t, []string{"late-1"}, agent.cancelled())
}

// refusingAgent answers every cancel as subagent.Agent does for TaskNotCancelable.
type refusingAgent struct{ *fakeAgent }

func (r refusingAgent) Cancel(ctx context.Context, taskID string) error {
	_ = r.fakeAgent.Cancel(ctx, taskID)
	return fmt.Errorf("a2a: agent %q: canceling task %s: %w", "research", taskID, subagent.ErrNotCancelable)
}

// The [TIMEOUT] text says when the agent refused the cancel.
func TestDelegationTimeoutNotCancelable(t *testing.T) {
	agent := &fakeAgent{send: func(ctx context.Context, req subagent.Request, obs subagent.Observer) (*subagent.Result, error) {
		obs.Task("slow-1", "ctx")
		<-ctx.Done()
		return nil, ctx.Err()
	}}
	e := newEngine(t, &fakeModel{turn: callThenReport("research", `{"prompt":"slow"}`)}, agent, func(c *Config) {
		c.Agents[0].Timeout = 50 * time.Millisecond
		c.Agents[0].Client = refusingAgent{agent}
	})
	r, err := e.StartRun(context.Background(), input("t"), "")
	require.NoError(t, err)
	res := toolResults(collect(t, r))
	require.Len(t, res, 1)
	assert.True(t, strings.HasPrefix(res[0], "[TIMEOUT:task_id=slow-1]\n"), res[0])
	assert.Contains(t, res[0], "cannot be canceled")
	assert.NotContains(t, res[0], "confirmed the cancellation")
	assert.Equal(t, []string{"slow-1"}, agent.cancelled())
}
