package a2aserver

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/baton-dev/baton/agui"
	"github.com/baton-dev/baton/internal/principal"
)

// refusingEngine refuses every run as the engine does by policy: too deep beyond depth
// 2, else the principal's thread cap. It records the depth of each run asked for.
type refusingEngine struct {
	mu     sync.Mutex
	depths []int
}

func (e *refusingEngine) Start(_ context.Context, in *agui.RunAgentInput, _ string) (Run, error) {
	e.mu.Lock()
	e.depths = append(e.depths, in.Depth)
	e.mu.Unlock()
	if in.Depth > 2 {
		return nil, fmt.Errorf("%w: depth %d", ErrTooDeep, in.Depth)
	}
	return nil, fmt.Errorf("%w: cap reached", ErrTooManyThreads)
}

func (e *refusingEngine) Stop(string, string, string) error { return nil }

// TestRefusedByPolicy: the caller's baton/depth arrives as the run's depth (one more);
// a run refused as too deep or beyond the thread cap is a rejected task saying why
// (never an internal error), and a malformed depth is an invalid request.
func TestRefusedByPolicy(t *testing.T) {
	t.Parallel()
	e := &refusingEngine{}
	s := New(Config{Engine: e, Tasks: memPort(t), Card: CardInfo{Name: "baton"}, CancelHorizon: time.Second})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.ServeHTTP(w, r.WithContext(principal.With(r.Context(), r.Header.Get("X-Principal"))))
	}))
	t.Cleanup(srv.Close)
	withDepth := func(d any) *a2a.Message {
		m := msg("hello")
		m.Metadata = map[string]any{depthKey: d}
		return m
	}
	for _, wire := range []string{"jsonrpc", "rest"} {
		c := client(t, srv.URL, "alice", wire)
		s := stream(t, c, withDepth(2))
		assert.Equal(t, a2a.TaskStateRejected, s.last.State, wire)
		assert.Contains(t, text(s.last), "nested too deeply", wire)

		s = stream(t, c, withDepth(0))
		assert.Equal(t, a2a.TaskStateRejected, s.last.State, wire)
		assert.Contains(t, text(s.last), "DELETE /agui/threads/", wire)
		assert.Contains(t, text(s.last), "thread_retention", wire)

		res, err := c.SendMessage(context.Background(), &a2a.SendMessageRequest{Message: msg("hello")})
		require.NoError(t, err, wire)
		task, ok := res.(*a2a.Task)
		require.True(t, ok, "%s: %T", wire, res)
		assert.Equal(t, a2a.TaskStateRejected, task.Status.State, "%s: a blocking call too", wire)

		for _, bad := range []any{-1, 1.5, "3", 1 << 20} {
			_, err := c.SendMessage(context.Background(), &a2a.SendMessageRequest{Message: withDepth(bad)})
			require.ErrorIs(t, err, a2a.ErrInvalidParams, "%s: depth %v", wire, bad)
		}
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	assert.Equal(t, []int{3, 1, 0, 3, 1, 0}, e.depths, "the caller's depth plus one; none without metadata")
}
