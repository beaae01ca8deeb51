package coordinator

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
)

// The drop signal behaves like a context with context.AfterFunc: functions registered
// before the drop run once it fires, unless stopped; ones registered after run at once;
// the channel is closed whether it was asked for before or after.
func TestDropSignal(t *testing.T) {
	var s dropSignal
	early := s.done()
	ran := make(chan string, 3)
	s.afterFunc(func() { ran <- "kept" })
	stop := s.afterFunc(func() { ran <- "stopped" })
	assert.True(t, stop(), "stopped before the drop")
	assert.False(t, stop(), "a second stop finds nothing")
	select {
	case <-early:
		t.Fatal("closed before the drop")
	default:
	}

	s.fire()
	s.fire()
	<-early
	<-s.done()
	assert.Equal(t, "kept", <-ran)
	late := s.afterFunc(func() { ran <- "late" })
	assert.Equal(t, "late", <-ran)
	assert.False(t, late(), "a function started at once cannot be stopped")
	assert.Empty(t, ran, "a stopped function never runs, a kept one runs once")
}

// Cancel hooks run once, when the run is cancelled, unless removed; one added after runs
// at once. A context from withRunCancel ends with the run without being its child.
func TestCancelHooks(t *testing.T) {
	var h cancelHooks
	var ran []string
	h.add(func() { ran = append(ran, "kept") })
	remove := h.add(func() { ran = append(ran, "removed") })
	remove()
	h.fire()
	h.fire()
	h.add(func() { ran = append(ran, "late") })
	assert.Equal(t, []string{"kept", "late"}, ran)

	r := &Run{}
	ctx, stop := context.WithCancelCause(context.Background())
	r.ctx, r.cancel = ctx, func(cause error) { stop(cause); r.hooks.fire() }
	mctx, mstop := r.withRunCancel(ctx)
	defer mstop()
	assert.NoError(t, mctx.Err())
	r.cancel(ErrClientGone)
	assert.ErrorIs(t, mctx.Err(), context.Canceled)
}
