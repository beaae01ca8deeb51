package coordinator

import (
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
