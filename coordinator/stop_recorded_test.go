package coordinator

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/baton-dev/baton/store"
	"github.com/baton-dev/baton/subagent"
)

// A stop carried out on the replica that owns the run is recorded with the run before the
// run's downstream work is cancelled: a replica that takes the run over after this one died
// in the middle of that cancel finds the stop and stops the run too.
func TestLocalStopRecordedWithRun(t *testing.T) {
	st, err := store.Open(context.Background(), "memory:")
	require.NoError(t, err)
	t.Cleanup(func() { _ = st.Close() })
	named := make(chan struct{})
	agent := &fakeAgent{send: func(ctx context.Context, _ subagent.Request, obs subagent.Observer) (*subagent.Result, error) {
		obs.Task("task-stop", "ctx")
		close(named)
		<-ctx.Done()
		return nil, ctx.Err()
	}}
	e := newEngine(t, &fakeModel{turn: callThenReport("research", `{"prompt":"slow"}`)}, agent, func(c *Config) { c.Store = st })
	r, err := e.StartRun(context.Background(), input("stopped"), "")
	require.NoError(t, err)
	<-named
	require.NoError(t, e.StopRun("stopped", "r-stopped", ""))
	rec, err := st.GetRun(context.Background(), "stopped", "r-stopped")
	require.NoError(t, err)
	assert.True(t, rec.StopRequested, "the stop is in the store when Stop returns")
	collect(t, r)
	assert.Equal(t, []string{"task-stop"}, agent.cancelled())
}
