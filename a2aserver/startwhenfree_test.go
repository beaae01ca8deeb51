package a2aserver

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"testing"
	"testing/synctest"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/baton-dev/baton/agui"
	"github.com/baton-dev/baton/internal/principal"
)

// busyEngine answers ErrBusy to its first busy starts, then starts a run.
type busyEngine struct {
	busy   int
	starts []time.Time
}

func (e *busyEngine) Start(_ context.Context, _ *agui.RunAgentInput, _ string) (Run, error) {
	e.starts = append(e.starts, time.Now())
	if len(e.starts) <= e.busy {
		return nil, fmt.Errorf("thread t: %w", ErrBusy)
	}
	return newFakeRun(), nil
}

func (e *busyEngine) Stop(string, string, string) error { return nil }

// A message that arrives while the conversation's previous run is still storing its end
// waits for the thread (backing off from 20 ms) instead of being refused at once; a thread
// that stays busy is refused after busyWait, and a caller that leaves stops the wait.
func TestStartWhenFree(t *testing.T) {
	in := &agui.RunAgentInput{ThreadID: "t", RunID: "r"}
	t.Run("freed", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			eng := &busyEngine{busy: 3}
			x := &executor{engine: eng, log: slog.New(slog.DiscardHandler)}
			began := time.Now()
			run, err := x.startWhenFree(t.Context(), in, "alice")
			require.NoError(t, err)
			require.NotNil(t, run)
			assert.Len(t, eng.starts, 4)
			assert.Equal(t, (20+40+80)*time.Millisecond, time.Since(began), "backoff 20, 40, 80 ms")
		})
	})
	t.Run("still busy", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			eng := &busyEngine{busy: 1 << 20}
			x := &executor{engine: eng, log: slog.New(slog.DiscardHandler)}
			began := time.Now()
			_, err := x.startWhenFree(t.Context(), in, "alice")
			require.ErrorIs(t, err, ErrBusy)
			assert.LessOrEqual(t, time.Since(began), busyWait)
			assert.Greater(t, time.Since(began), busyWait/2, "it waited")
		})
	})
	t.Run("caller gone", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			eng := &busyEngine{busy: 1 << 20}
			x := &executor{engine: eng, log: slog.New(slog.DiscardHandler)}
			ctx, cancel := context.WithTimeout(t.Context(), 50*time.Millisecond)
			defer cancel()
			_, err := x.startWhenFree(ctx, in, "alice")
			require.True(t, errors.Is(err, ErrBusy))
			assert.Len(t, eng.starts, 2, "no start after the caller left")
		})
	})
}

// A message refused for load is a server error that says to retry (JSON-RPC -32000 with
// a RetryInfo detail; on REST the SDK's status for it), never an invalid request, which a
// client cannot tell from its own mistake.
func TestBusyIsServerError(t *testing.T) {
	t.Parallel()
	s := New(Config{Engine: &busyEngine{busy: 1 << 20}, Tasks: memPort(t), Card: CardInfo{Name: "baton"}})
	defer s.Close()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.ServeHTTP(w, r.WithContext(principal.With(r.Context(), r.Header.Get("X-Principal"))))
	}))
	defer srv.Close()
	for _, wire := range []string{"jsonrpc", "rest"} {
		c := client(t, srv.URL, "alice", wire)
		_, err := c.SendMessage(t.Context(), &a2a.SendMessageRequest{Message: msg("hello")})
		require.Error(t, err, wire)
		assert.ErrorIs(t, err, a2a.ErrServerError, wire)
		assert.NotErrorIs(t, err, a2a.ErrInvalidRequest, wire)
		assert.Contains(t, err.Error(), "retry", wire)
	}
}
