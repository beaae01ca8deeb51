package durable

import (
	"testing"
	"testing/synctest"
	"time"

	"github.com/baton-dev/baton/agui"
	"github.com/stretchr/testify/assert"
)

// An event that would pass the budget waits until the writers free room; it does not wait
// while a writer's store refuses writes, nor past maxLogWait, nor once quit closes; and
// one event always gets in when nothing else is held.
func TestLogBudget(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		b := NewLogBudget(100)
		b.take(500, nil) // larger than the budget, nothing held: in at once
		assert.Equal(t, int64(500), b.used.Load())
		b.release(500)

		b.take(80, nil)
		got := make(chan struct{})
		go func() { b.take(40, nil); close(got) }()
		synctest.Wait()
		select {
		case <-got:
			t.Fatal("the event passed the budget without waiting")
		default:
		}
		b.release(80)
		synctest.Wait()
		<-got
		assert.Equal(t, int64(40), b.used.Load())

		b.take(60, nil) // 100 held
		b.storeFailing(true)
		start := time.Now()
		b.take(10, nil)
		assert.Zero(t, time.Since(start), "no wait while the store refuses writes")
		b.storeFailing(false)

		start = time.Now()
		b.take(10, nil)
		assert.Equal(t, maxLogWait, time.Since(start), "a wait is bounded")

		quit := make(chan struct{})
		close(quit)
		start = time.Now()
		b.take(10, quit)
		assert.Zero(t, time.Since(start), "no wait once the engine stops")
		assert.Equal(t, int64(130), b.used.Load())
	})
}

// A run's log gives back the budget it took: what it stored, and what a complete log
// refuses, leave nothing held.
func TestEventLogReleasesItsBudget(t *testing.T) {
	t.Parallel()
	l, _, _, release := heldLog(t)
	b := NewLogBudget(1 << 20)
	l.budget = b
	for range 50 {
		l.Add(&agui.TextMessageContent{MessageID: "m", Delta: "x"})
	}
	assert.Positive(t, b.used.Load(), "pending events are held")
	release()
	l.Add(&agui.RunFinished{ThreadID: "t", RunID: "r"})
	l.RunEnded()
	<-l.Done()
	l.Add(&agui.Custom{Name: "late"})
	assert.Zero(t, b.used.Load(), "nothing held once the log is complete")
}
