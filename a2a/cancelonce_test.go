package a2a

import (
	"context"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/baton-dev/baton/internal/testutil/benchagent"
)

// CancelOnce makes one attempt and leaves the retrying to its caller: a refused cancel is
// one CancelTask call, and the next attempt cancels.
func TestCancelOnce(t *testing.T) {
	srv := httptest.NewUnstartedServer(nil)
	srv.Start()
	defer srv.Close()
	agent := benchagent.New(srv.URL, benchagent.Options{Hold: true, FailCancels: 1})
	srv.Config.Handler = agent
	defer agent.Release()
	ag, err := Resolve(context.Background(), AgentConfig{Name: "bench", URL: srv.URL}, Options{RetryBackoff: time.Millisecond})
	require.NoError(t, err)
	defer ag.Close()

	ids := make(chan string, 1)
	done := make(chan *Result, 1)
	go func() {
		res, _ := ag.Send(context.Background(), Request{Prompt: "go"}, Observer{Task: func(id, _ string) { ids <- id }})
		done <- res
	}()
	id := <-ids

	_, err = ag.CancelOnce(context.Background(), id)
	require.Error(t, err, "the agent refused the first cancel")
	assert.Equal(t, 1, agent.CancelCalls(), "no retry inside CancelOnce")
	assert.NotErrorIs(t, err, ErrInvalidTransition)

	terminal, err := ag.CancelOnce(context.Background(), id)
	require.NoError(t, err)
	assert.False(t, terminal, "canceled by this call, not over before it")
	res := <-done
	require.NotNil(t, res)
	assert.Equal(t, StateCanceled, res.State)
}
