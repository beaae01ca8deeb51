package startstop

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A service runs from Start until Stop, which waits for its work to return; a second
// Start and a second Stop do nothing, and a service stopped before it started never runs.
func TestService(t *testing.T) {
	t.Parallel()
	started := make(chan struct{}, 2)
	ended := make(chan struct{}, 2)
	s := NewService("beat", func(ctx context.Context) {
		started <- struct{}{}
		<-ctx.Done()
		ended <- struct{}{}
	})
	assert.Equal(t, "beat", s.Name())
	s.Start(context.Background())
	s.Start(context.Background())
	<-started
	require.NoError(t, s.Stop(context.Background()))
	select {
	case <-ended:
	default:
		t.Fatal("Stop returned before the service's work did")
	}
	require.NoError(t, s.Stop(context.Background()))
	s.Start(context.Background())
	assert.Empty(t, started, "a stopped service does not start again")

	never := NewService("never", func(context.Context) { t.Error("a service stopped before its start ran") })
	require.NoError(t, never.Stop(context.Background()))
	never.Start(context.Background())

	var none *Service
	none.Start(context.Background())
	require.NoError(t, none.Stop(context.Background()))
}

// Stop gives up waiting when its ctx ends before the work returns.
func TestServiceStopBounded(t *testing.T) {
	t.Parallel()
	release := make(chan struct{})
	s := NewService("slow", func(ctx context.Context) {
		<-ctx.Done()
		<-release
	})
	s.Start(context.Background())
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	require.ErrorIs(t, s.Stop(ctx), context.Canceled)
	close(release)
	require.NoError(t, s.Stop(context.Background()))
}
