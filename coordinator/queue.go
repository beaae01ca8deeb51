package coordinator

import (
	"sync"

	"github.com/baton-dev/baton/agui"
)

// eventQueue carries a run's events to whoever streams them.
//
// Design note: a run is detached from the HTTP request that started it, so the run never
// blocks on a slow or vanished client. Events are appended to an unbounded slice and the
// single consumer takes everything pending in one call; a 1-slot channel wakes it. The queue
// is closed by the terminal event, after which pushes are dropped.
type eventQueue struct {
	mu     sync.Mutex
	events []agui.Event
	closed bool
	wake   chan struct{}
	// taken counts the events taken so far: the next one taken has sequence number taken+1.
	taken int64
}

func newEventQueue() *eventQueue {
	return &eventQueue{wake: make(chan struct{}, 1)}
}

// push is the Sequencer's sink; the Sequencer has already checked ordering.
func (q *eventQueue) push(ev agui.Event) error {
	q.mu.Lock()
	if q.closed {
		q.mu.Unlock()
		return nil
	}
	q.events = append(q.events, ev)
	switch ev.EventType() {
	case agui.EventRunFinished, agui.EventRunError:
		q.closed = true
	}
	q.mu.Unlock()
	select {
	case q.wake <- struct{}{}:
	default:
	}
	return nil
}

// take returns every pending event, the sequence number of the first, and whether the
// stream has ended.
func (q *eventQueue) take() (int64, []agui.Event, bool) {
	q.mu.Lock()
	defer q.mu.Unlock()
	evs := q.events
	q.events = nil
	first := q.taken + 1
	q.taken += int64(len(evs))
	return first, evs, q.closed
}
