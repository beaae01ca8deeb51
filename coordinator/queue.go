package coordinator

import (
	"sync"
	"sync/atomic"

	"github.com/baton-dev/baton/agui"
)

// eventQueue carries a run's events to whoever streams them live.
//
// Design note (design/streams.md): a run is detached from the HTTP request that started it,
// so the run never blocks on a slow or vanished client. Events are appended to a slice and
// the single consumer takes everything pending in one call; a 1-slot channel wakes it. The
// slice is bounded by bytes (agui.SizeHint): a push that would take it past limit releases
// what is pending instead of growing, and the consumer then sees a gap in the numbering
// (take's first is beyond what it has sent) which it fills from the run's event log in the
// store (Stream.Backlog) before it goes on with the live events. So a client that falls
// behind is never dropped while it reads, loses nothing, and costs at most the bound plus
// one page of the log. An event always fits into an empty queue, so that one large event
// (a snapshot) never sends a client that keeps up to the log. The queue is closed by the
// terminal event, after which pushes are ignored.
type eventQueue struct {
	mu     sync.Mutex
	events []agui.Event
	bytes  int
	limit  int
	closed bool
	wake   chan struct{}
	// taken is the sequence number of the last event taken or released: the next one in
	// events has sequence number taken+1.
	taken int64
	// overflows counts the releases (each one sends the consumer to the event log).
	overflows int
	// onOverflow, when set, is called once, outside the lock, on the first release.
	onOverflow func()
	// notify, when set (Stream.OnWake), is called wherever wake is signalled: a consumer
	// that keeps no goroutine waiting on wake is told this way.
	notify atomic.Pointer[func()]
	// gated: take returns only events whose sequence number is at most stored (the run's
	// event log has them), so that a client is never shown an event that a replica taking
	// the run over would not find in the log: its numbering can then go on densely.
	gated  bool
	stored int64
}

// newEventQueue returns a queue bounded by limit bytes (0: DefaultStreamBufferBytes).
func newEventQueue(limit int, onOverflow func()) *eventQueue {
	if limit <= 0 {
		limit = DefaultStreamBufferBytes
	}
	return &eventQueue{limit: limit, wake: make(chan struct{}, 1), onOverflow: onOverflow}
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
	first := false
	if len(q.events) > 0 && q.bytes+size > q.limit {
		// The client has not taken what is pending and this would pass the bound: what is
		// pending is released (it is in the event log, or on its way there) and the
		// consumer reads it from the log.
		q.taken += int64(len(q.events))
		clear(q.events)
		q.events, q.bytes = q.events[:0], 0
		q.overflows++
		first = q.overflows == 1
	}
	q.events = append(q.events, ev)
	q.bytes += size
	switch ev.EventType() {
	case agui.EventRunFinished, agui.EventRunError:
		q.closed = true
	}
	// Gated, the event may be shown now only when the log stored it before it got here
	// (the log is written first, by another goroutine); else storedUpTo wakes the consumer.
	visible := !q.gated || q.taken+int64(len(q.events)) <= q.stored
	q.mu.Unlock()
	if first && q.onOverflow != nil {
		q.onOverflow()
	}
	if visible {
		q.signal()
	}
	return nil
}

// signal wakes the consumer.
func (q *eventQueue) signal() {
	select {
	case q.wake <- struct{}{}:
	default:
	}
	if f := q.notify.Load(); f != nil {
		(*f)()
	}
}

// storedUpTo says that the run's event log holds every event up to seq: a gated queue
// may show them now.
func (q *eventQueue) storedUpTo(seq int64) {
	q.mu.Lock()
	more := seq > q.stored
	q.stored = max(q.stored, seq)
	q.mu.Unlock()
	if more {
		q.signal()
	}
}

// take returns every pending event, the sequence number of the first (when it is beyond
// the last one the consumer has, the events between were released and are in the log),
// and whether the stream has ended (terminal event taken).
func (q *eventQueue) take() (int64, []agui.Event, bool) {
	q.mu.Lock()
	defer q.mu.Unlock()
	evs := q.events
	q.events, q.bytes = nil, 0
	if n := int(max(0, q.stored-q.taken)); q.gated && n < len(evs) {
		// The rest is not in the log yet: it stays for a later take.
		rest := evs[n:]
		evs = evs[:n:n]
		q.events = append(make([]agui.Event, 0, len(rest)), rest...)
		for _, ev := range rest {
			q.bytes += agui.SizeHint(ev)
		}
	}
	first := q.taken + 1
	q.taken += int64(len(evs))
	return first, evs, q.closed && len(q.events) == 0
}

// abandon closes the queue: its consumer has gone (a detached run), so what is pending is
// released and later pushes are discarded.
func (q *eventQueue) abandon() {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.closed = true
	clear(q.events)
	q.events, q.bytes = nil, 0
}
