package coordinator

import (
	"sync"
	"sync/atomic"

	"github.com/baton-dev/baton/agui"
)

// DefaultStreamBufferBytes is the default bound of the events waiting for one client.
const DefaultStreamBufferBytes = 4 << 20

// eventQueue carries a run's events to whoever streams them.
//
// Design note (design/stream-backpressure.md): a run is detached from the HTTP request that
// started it, so the run never blocks on a slow or vanished client. Events are appended to a
// slice and the single consumer takes everything pending in one call; a 1-slot channel wakes
// it. The slice is bounded by bytes (agui.SizeHint): a push that would take it past limit
// drops the client instead of growing, since the alternatives are unbounded memory or a run
// that waits for its slowest reader. An event always fits into an empty queue, so that one
// large event (a snapshot) never drops a client that keeps up. The queue is closed by the
// terminal event, after which pushes are dropped.
type eventQueue struct {
	mu      sync.Mutex
	events  []agui.Event
	bytes   int
	limit   int
	closed  bool
	dropped bool
	wake    chan struct{}
	// gone fires when the client is dropped, so that a stream can register what to do
	// then (Run.AfterDropped) without a goroutine that waits.
	gone dropSignal
	// onDrop runs once, outside the lock, when the client is dropped.
	onDrop func()
	// taken counts the events taken so far: the next one taken has sequence number taken+1.
	taken int64
	// notify, when set (Run.OnWake), is called wherever wake is signalled: a consumer
	// that keeps no goroutine waiting on wake is told this way.
	notify atomic.Pointer[func()]
}

// newEventQueue returns a queue bounded by limit bytes (0: DefaultStreamBufferBytes).
func newEventQueue(limit int, onDrop func()) *eventQueue {
	if limit <= 0 {
		limit = DefaultStreamBufferBytes
	}
	return &eventQueue{limit: limit, wake: make(chan struct{}, 1), onDrop: onDrop}
}

// push is the Sequencer's sink; the Sequencer has already checked ordering. It never
// blocks on the consumer.
func (q *eventQueue) push(ev agui.Event) error {
	size := agui.SizeHint(ev)
	q.mu.Lock()
	if q.closed {
		q.mu.Unlock()
		return nil
	}
	drop := len(q.events) > 0 && q.bytes+size > q.limit
	if drop {
		// The client has not taken what is pending and this would pass the bound: it is
		// dropped, and what waited for it released at once.
		q.dropped, q.closed = true, true
		clear(q.events)
		q.events, q.bytes = nil, 0
	} else {
		q.events = append(q.events, ev)
		q.bytes += size
		switch ev.EventType() {
		case agui.EventRunFinished, agui.EventRunError:
			q.closed = true
		}
	}
	q.mu.Unlock()
	if drop {
		q.gone.fire()
		if q.onDrop != nil {
			q.onDrop()
		}
	}
	select {
	case q.wake <- struct{}{}:
	default:
	}
	if f := q.notify.Load(); f != nil {
		(*f)()
	}
	return nil
}

// take returns every pending event, the sequence number of the first, and whether the
// stream has ended (terminal event taken, or client dropped).
func (q *eventQueue) take() (int64, []agui.Event, bool) {
	q.mu.Lock()
	defer q.mu.Unlock()
	evs := q.events
	q.events, q.bytes = nil, 0
	first := q.taken + 1
	q.taken += int64(len(evs))
	return first, evs, q.closed
}

// wasDropped reports whether the client was dropped for falling behind.
func (q *eventQueue) wasDropped() bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.dropped
}

// abandon closes the queue without a drop: its consumer has gone (a detached run), so
// what is pending is released and later pushes are discarded.
func (q *eventQueue) abandon() {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.closed = true
	clear(q.events)
	q.events, q.bytes = nil, 0
}
