package durable

import (
	"context"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/baton-dev/baton/agui"
	"github.com/baton-dev/baton/store"
)

// parkedWork records the suspensions whose parked work it was asked to cancel.
type parkedWork struct {
	mu      sync.Mutex
	threads []string
}

func (p *parkedWork) AbandonExpired(_ context.Context, susp *store.Suspension) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.threads = append(p.threads, susp.ThreadID)
}

// TestExpiryRemembersWhatExpired: a suspension a resume finds expired is removed, its
// parked work cancelled once, and its interrupt ids remembered as expired for a resume
// that comes later; an interrupt that did not expire is not named.
func TestExpiryRemembersWhatExpired(t *testing.T) {
	t.Parallel()
	st := memoryStore(t)
	parked := &parkedWork{}
	x := NewExpiry(ExpiryConfig{Store: st, CancelTimeout: time.Second, Parked: parked, Logger: slog.New(slog.DiscardHandler)})
	ctx := context.Background()
	susp := &store.Suspension{ThreadID: "t1", Owner: "alice", Interrupts: []store.Interrupt{{ID: "int-1"}, {ID: "int-2"}}}
	x.Expire(ctx, susp)
	assert.Equal(t, []string{"t1"}, parked.threads)
	ids, err := x.Expired(ctx, "t1", []agui.ResumeEntry{{InterruptID: "int-2"}, {InterruptID: "int-3"}, {InterruptID: "int-1"}})
	require.NoError(t, err)
	assert.Equal(t, []string{"int-2", "int-1"}, ids)
	// Not a resolved answer: an expired id is kept under a key of its own.
	answered, err := st.IsResolved(ctx, "t1", "int-1")
	require.NoError(t, err)
	assert.False(t, answered)
	// Not configured: the janitor is not started, and a stop does nothing.
	x.Start(ctx)
	require.NoError(t, x.Stop(ctx))
}
