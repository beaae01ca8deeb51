package durable

import (
	"sync"
	"sync/atomic"
	"time"
)

// LogBudget bounds the bytes that all runs of an engine hold for the store's event log:
// encoded events pending or being written. A run whose event would pass it waits, while
// the store is taking writes, for the writers to free room; the store's pace then paces
// the runs (their model streams wait), where a bound per run alone (maxPendingBytes)
// let every run hold its own megabytes, and dropped events from the log once a run's were
// full. While a writer's store refuses writes (an outage), nothing waits: a run's own bound
// and its drops apply, as before, and its live stream is unaffected.
type LogBudget struct {
	max     int64
	used    atomic.Int64
	failing atomic.Int32 // writers whose store is refusing their writes

	mu    sync.Mutex
	freed chan struct{} // closed (and replaced) when bytes are released
}

// DefaultLogBytes is an engine's budget for the event log's bytes in memory.
const DefaultLogBytes = 32 << 20

// maxLogWait bounds one event's wait for room: a store that takes writes this slowly is
// treated as one that does not (the event is admitted over the budget).
const maxLogWait = 2 * time.Second

// NewLogBudget returns a budget of max bytes, to share between the logs of an engine's
// runs (EventLog.SetBudget).
func NewLogBudget(max int64) *LogBudget {
	return &LogBudget{max: max, freed: make(chan struct{})}
}

// take counts n more bytes, first waiting (at most maxLogWait, and not once quit closes)
// while they would pass the budget and the store takes writes. Something held elsewhere
// always lets one event in, so that an event larger than the budget cannot wait forever.
func (b *LogBudget) take(n int, quit <-chan struct{}) {
	if b == nil {
		return
	}
	var deadline <-chan time.Time
	for b.used.Load() > 0 && b.used.Load()+int64(n) > b.max && b.failing.Load() == 0 {
		if deadline == nil {
			t := time.NewTimer(maxLogWait)
			defer t.Stop()
			deadline = t.C
		}
		b.mu.Lock()
		freed := b.freed
		b.mu.Unlock()
		if b.used.Load()+int64(n) <= b.max {
			break
		}
		select {
		case <-freed:
		case <-quit:
			b.used.Add(int64(n))
			return
		case <-deadline:
			b.used.Add(int64(n))
			return
		}
	}
	b.used.Add(int64(n))
}

// release frees n bytes and wakes the waiters.
func (b *LogBudget) release(n int) {
	if b == nil || n <= 0 {
		return
	}
	b.used.Add(-int64(n))
	b.mu.Lock()
	close(b.freed)
	b.freed = make(chan struct{})
	b.mu.Unlock()
}

// storeFailing counts a writer whose store refuses its writes (up) or takes them again.
func (b *LogBudget) storeFailing(up bool) {
	if b == nil {
		return
	}
	if up {
		b.failing.Add(1)
	} else {
		b.failing.Add(-1)
	}
	b.mu.Lock()
	close(b.freed)
	b.freed = make(chan struct{})
	b.mu.Unlock()
}
