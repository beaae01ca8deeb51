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

// A consumer that keeps up never falls behind, whatever the total volume.
func TestQueueKeepsAConsumerThatKeepsUp(t *testing.T) {
	overflows := 0
	q := newEventQueue(4<<10, func() { overflows++ })
	for i := range 1000 {
		require.NoError(t, q.push(text(1<<10)))
		first, evs, ended := q.take()
		require.Len(t, evs, 1)
		require.Equal(t, int64(i+1), first)
		require.False(t, ended)
	}
	assert.Zero(t, overflows)
}

// One event larger than the bound still goes to a consumer that has taken everything.
func TestQueueTakesOneLargeEventWhenEmpty(t *testing.T) {
	q := newEventQueue(1<<10, nil)
	require.NoError(t, q.push(text(64<<10)))
	first, evs, ended := q.take()
	require.Len(t, evs, 1)
	assert.Equal(t, int64(1), first)
	assert.False(t, ended)
	assert.Zero(t, q.overflows)
}

// A consumer that falls behind by more than the bound is not dropped: what was pending is
// released (the memory stays bounded), the numbering goes on, and the consumer sees the gap
// it must read from the log; the terminal event is always kept.
func TestQueueReleasesWhatAConsumerFellBehindOn(t *testing.T) {
	overflows := 0
	q := newEventQueue(8<<10, func() { overflows++ })
	for range 100 {
		require.NoError(t, q.push(text(1<<10)))
		assert.LessOrEqual(t, q.bytes, 8<<10+agui.SizeHint(text(1<<10)))
	}
	require.NoError(t, q.push(&agui.RunFinished{ThreadID: "t", RunID: "r"}))
	assert.Equal(t, 1, overflows, "told once")
	first, evs, ended := q.take()
	require.NotEmpty(t, evs)
	assert.True(t, ended)
	assert.Equal(t, int64(101), first-1+int64(len(evs)), "the last event taken is the 101st")
	assert.Greater(t, first, int64(1), "a gap: the first events are in the log only")
	assert.Equal(t, agui.EventRunFinished, evs[len(evs)-1].EventType())
	assert.Zero(t, q.bytes)
}

// The terminal event closes the queue; later pushes are ignored.
func TestQueueClosesOnTerminalEvent(t *testing.T) {
	q := newEventQueue(0, nil)
	require.NoError(t, q.push(text(10)))
	require.NoError(t, q.push(&agui.RunFinished{ThreadID: "t", RunID: "r"}))
	require.NoError(t, q.push(text(10)))
	_, evs, ended := q.take()
	assert.Len(t, evs, 2)
	assert.True(t, ended)
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

// OnWake's function is called on every push, an overflow included, until it is stopped.
func TestOnWakeIsToldOfEveryPushUntilStopped(t *testing.T) {
	r := &Run{stream: Stream{q: newEventQueue(2<<10, nil)}}
	woken := 0
	stop := r.Stream().OnWake(func() { woken++ })
	require.NoError(t, r.stream.q.push(text(10)))
	require.NoError(t, r.stream.q.push(text(10)))
	assert.Equal(t, 2, woken)
	require.NoError(t, r.stream.q.push(text(4<<10))) // past the bound: the pending events are released
	assert.Equal(t, 3, woken, "the overflow wakes too")
	stop()
	q2 := newEventQueue(0, nil)
	r.stream.q = q2
	stop = r.Stream().OnWake(func() { woken += 100 })
	stop()
	require.NoError(t, r.stream.q.push(text(10)))
	assert.Equal(t, 3, woken, "a stopped function is not called")
}
