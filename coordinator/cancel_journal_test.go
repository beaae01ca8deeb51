package coordinator

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/baton-dev/baton/store"
	"github.com/baton-dev/baton/subagent"
)

// authRefusingAgent is a fakeAgent whose CancelTask is refused for good (an authentication
// failure: not retried).
type authRefusingAgent struct{ *fakeAgent }

func (authRefusingAgent) Cancel(context.Context, string) error {
	return fmt.Errorf("cancel refused: %w", subagent.ErrAuth)
}

// A run's downstream cancel that is not confirmed is journaled (kind cancel, outcome
// error, "<kind> <result>"), so that a replica that does not run the task can name it in
// its CancelTask answer; a confirmed cancel is not.
func TestUnconfirmedCancelJournaled(t *testing.T) {
	st, err := store.Open(context.Background(), "memory:")
	require.NoError(t, err)
	t.Cleanup(func() { _ = st.Close() })
	for _, c := range []struct {
		name   string
		refuse bool
	}{{"refused", true}, {"confirmed", false}} {
		t.Run(c.name, func(t *testing.T) {
			named := make(chan struct{})
			fa := &fakeAgent{send: func(ctx context.Context, _ subagent.Request, obs subagent.Observer) (*subagent.Result, error) {
				obs.Task("task-"+c.name, "ctx")
				close(named)
				<-ctx.Done()
				return nil, ctx.Err()
			}}
			var client Delegate = fa
			if c.refuse {
				client = authRefusingAgent{fa}
			}
			e := newEngine(t, &fakeModel{turn: callThenReport("research", `{"prompt":"slow"}`)}, fa, func(cfg *Config) {
				cfg.Store = st
				cfg.Agents[0].Client = client
			})
			thread := "cj-" + c.name
			r, err := e.StartRun(context.Background(), input(thread), "")
			require.NoError(t, err)
			<-named
			require.NoError(t, e.StopRun(thread, "r-"+thread, ""))
			collect(t, r)
			<-r.Done()
			var got []store.Step
			require.Eventually(t, func() bool {
				steps, err := st.Steps(context.Background(), thread, 0, 0)
				require.NoError(t, err)
				got = got[:0]
				for _, s := range steps {
					if s.Kind == store.StepCancel {
						got = append(got, s)
					}
				}
				return !c.refuse || len(got) > 0
			}, 5*time.Second, 10*time.Millisecond)
			if !c.refuse {
				assert.Empty(t, got)
				return
			}
			require.Len(t, got, 1)
			assert.Equal(t, store.StepError, got[0].Outcome)
			assert.Equal(t, "research", got[0].Target)
			assert.Equal(t, "task-refused", got[0].Ref)
			assert.Equal(t, "a2a_task failed", got[0].Detail)
		})
	}
}
