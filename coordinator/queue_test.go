package coordinator

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/baton-dev/baton/agui"
)

func text(n int) agui.Event {
	return &agui.TextMessageContent{MessageID: "m", Delta: strings.Repeat("x", n)}
}

// A consumer that keeps up is never dropped, whatever the total volume.
func TestQueueKeepsAConsumerThatKeepsUp(t *testing.T) {
	drops := 0
	q := newEventQueue(4<<10, func() { drops++ })
	for range 1000 {
		require.NoError(t, q.push(text(1<<10)))
		_, evs, ended := q.take()
		require.Len(t, evs, 1)
		require.False(t, ended)
	}
	assert.Zero(t, drops)
	assert.False(t, q.wasDropped())
}

// One event larger than the bound still goes to a consumer that has taken everything.
func TestQueueTakesOneLargeEventWhenEmpty(t *testing.T) {
	q := newEventQueue(1<<10, nil)
	require.NoError(t, q.push(text(64<<10)))
	_, evs, ended := q.take()
	require.Len(t, evs, 1)
	assert.False(t, ended)
	assert.False(t, q.wasDropped())
}

// A consumer that falls behind by more than the bound is dropped once: what was pending is
// released, the stream ends, later events (the terminal one too) are not kept.
func TestQueueDropsAConsumerThatFallsBehind(t *testing.T) {
	drops := 0
	q := newEventQueue(8<<10, func() { drops++ })
	for range 100 {
		require.NoError(t, q.push(text(1<<10)))
	}
	require.NoError(t, q.push(&agui.RunFinished{ThreadID: "t", RunID: "r"}))
	assert.Equal(t, 1, drops)
	assert.True(t, q.wasDropped())
	select {
	case <-q.gone.done():
	default:
		t.Fatal("gone is not closed")
	}
	_, evs, ended := q.take()
	assert.Empty(t, evs, "nothing is held for a dropped client")
	assert.True(t, ended)
	assert.Zero(t, q.bytes)
}

// The terminal event closes the queue; later pushes are dropped without a client drop.
func TestQueueClosesOnTerminalEvent(t *testing.T) {
	q := newEventQueue(0, nil)
	require.NoError(t, q.push(text(10)))
	require.NoError(t, q.push(&agui.RunFinished{ThreadID: "t", RunID: "r"}))
	require.NoError(t, q.push(text(10)))
	_, evs, ended := q.take()
	assert.Len(t, evs, 2)
	assert.True(t, ended)
	assert.False(t, q.wasDropped())
}

// BenchmarkQueueHandOff is the run side of the event write path: size accounting, append,
// and the consumer's take, in batches of 16 as a burst arrives.
func BenchmarkQueueHandOff(b *testing.B) {
	q := newEventQueue(0, nil)
	ev := text(64)
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		_ = q.push(ev)
		if i++; i%16 == 0 {
			q.take()
		}
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "events/s")
}

// OnWake's function is called on every push, the drop included, until it is stopped.
func TestOnWakeIsToldOfEveryPushUntilStopped(t *testing.T) {
	r := &Run{q: newEventQueue(2<<10, nil)}
	woken := 0
	stop := r.OnWake(func() { woken++ })
	require.NoError(t, r.q.push(text(10)))
	require.NoError(t, r.q.push(text(10)))
	assert.Equal(t, 2, woken)
	require.NoError(t, r.q.push(text(4<<10))) // past the bound: the client is dropped
	assert.Equal(t, 3, woken, "the drop wakes too")
	stop()
	q2 := newEventQueue(0, nil)
	r.q = q2
	stop = r.OnWake(func() { woken += 100 })
	stop()
	require.NoError(t, r.q.push(text(10)))
	assert.Equal(t, 3, woken, "a stopped function is not called")
}
