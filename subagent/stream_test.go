package subagent

import (
	"context"
	"net"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
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

// Streams work over HTTP/2 (agents behind https usually speak it), through NewHTTPTransport,
// and several streams of one agent share one connection.
func TestStreamsOverHTTP2(t *testing.T) {
	srv := httptest.NewUnstartedServer(nil)
	srv.EnableHTTP2 = true
	srv.StartTLS()
	defer srv.Close()
	agent := benchagent.New(srv.URL, benchagent.Options{Chunks: []string{"one ", "two"}})
	srv.Config.Handler = agent
	tr := NewHTTPTransport()
	tr.TLSClientConfig = srv.Client().Transport.(*http.Transport).TLSClientConfig
	var conns atomic.Int32
	tr.DialContext = func(ctx context.Context, network, addr string) (net.Conn, error) {
		conns.Add(1)
		return (&net.Dialer{}).DialContext(ctx, network, addr)
	}
	ag, err := Resolve(context.Background(), AgentConfig{Name: "bench", URL: srv.URL}, Options{HTTPClient: &http.Client{Transport: tr}})
	require.NoError(t, err)
	defer ag.Close()
	var wg sync.WaitGroup
	for range 5 {
		wg.Go(func() {
			res, err := ag.Send(context.Background(), Request{Prompt: "go"}, Observer{})
			if assert.NoError(t, err) {
				assert.Equal(t, StateCompleted, res.State)
				assert.Equal(t, "one two", res.Text)
			}
		})
	}
	wg.Wait()
	assert.Equal(t, int32(1), conns.Load(), "one connection for the card and every stream")
}
