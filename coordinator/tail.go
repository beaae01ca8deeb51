package coordinator

import (
	"context"
	"encoding/json"
	"sync"
	"time"

	"github.com/baton-dev/baton/agui"
	"github.com/baton-dev/baton/store"
)

// tailWindow bounds the events a tail keeps for its followers: a follower further behind
// reads its own pages from the store until it is within them.
const tailWindow = 1024

// tails holds the shared tail of every run followed on this process: all reconnect streams
// of one run read its new events from one reader of the event log, woken together, instead
// of each polling the store (1,000 followers of one run were 1,000 poll loops). The zero
// value is ready.
type tails struct {
	mu sync.Mutex
	m  map[string]*tail
}

// tailSource is what a tail reads: the run's event log, whether the run is still going on,
// and, on the replica that owns the run, a channel closed when more of its events are in
// the log.
type tailSource struct {
	st       store.EventLog
	goingOn  func(ctx context.Context) bool
	changed  func() <-chan struct{}
	threadID string
	runID    string
}

// acquire returns the tail of the run for a follower at position from, starting one when
// none is running; the follower releases it when it leaves.
func (ts *tails) acquire(key string, src tailSource, from int64) *tail {
	ts.mu.Lock()
	defer ts.mu.Unlock()
	if t := ts.m[key]; t != nil && !t.failed() {
		t.refs++
		return t
	}
	if ts.m == nil {
		ts.m = map[string]*tail{}
	}
	// A tail is shared by every stream following the run: it ends when its last reader
	// lets go, not with the request that started it.
	ctx, cancel := context.WithCancel(context.Background())
	t := &tail{owner: ts, key: key, src: src, from: from, last: from, wake: make(chan struct{}),
		refs: 1, cancel: cancel, stopped: make(chan struct{})}
	ts.m[key] = t
	go t.run(ctx)
	return t
}

// tail is one run's shared reader of its event log: it reads every event after from, keeps
// the last tailWindow of them, and wakes its followers when more came or the run is over.
type tail struct {
	owner   *tails
	key     string
	src     tailSource
	cancel  context.CancelFunc
	stopped chan struct{}

	mu     sync.Mutex
	refs   int
	window []store.Event // the events after from, up to last, in order
	from   int64         // every event with Seq <= from is before the window
	last   int64         // the last Seq read
	wake   chan struct{} // closed (and replaced) when the state changes
	state  tailState
}

// tailState is how a tail's reading ended: it goes on (zero), read the terminal event,
// found the run ended without one (lost), or could not read the store.
type tailState int

const (
	tailReading tailState = iota
	tailDone
	tailLost
	tailFailed
)

func (t *tail) failed() bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.state == tailFailed
}

// release drops a follower; the last one stops the reader and waits for it.
func (t *tail) release() {
	t.owner.mu.Lock()
	t.mu.Lock()
	t.refs--
	last := t.refs == 0
	t.mu.Unlock()
	if last && t.owner.m[t.key] == t {
		delete(t.owner.m, t.key)
	}
	t.owner.mu.Unlock()
	if last {
		t.cancel()
		<-t.stopped
	}
}

// since returns the window's events after position after (at most store.MaxEventsRead),
// a channel closed when there is more, and the tail's state. covered is false when after
// is before the window: the follower reads the store itself.
func (t *tail) since(after int64) (evs []store.Event, wake <-chan struct{}, state tailState, covered bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if after < t.from {
		return nil, t.wake, t.state, false
	}
	i := len(t.window)
	for i > 0 && t.window[i-1].Seq > after {
		i--
	}
	evs = t.window[i:]
	if len(evs) > store.MaxEventsRead {
		evs = evs[:store.MaxEventsRead]
	}
	return evs, t.wake, t.state, true
}

// publish adds events to the window and wakes the followers. t.mu is not held.
func (t *tail) publish(evs []store.Event, state tailState) {
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, ev := range evs {
		t.window = append(t.window, ev)
		t.last = ev.Seq
	}
	if over := len(t.window) - tailWindow; over > 0 {
		t.from = t.window[over-1].Seq
		t.window = append(t.window[:0:0], t.window[over:]...)
	}
	t.state = state
	close(t.wake)
	t.wake = make(chan struct{})
}

// run reads the log until the run's terminal event, its loss, a store error or the last
// follower's release.
func (t *tail) run(ctx context.Context) {
	defer close(t.stopped)
	poll := time.NewTicker(followPoll)
	defer poll.Stop()
	var endedSince time.Time
	after := t.last
	for {
		changed := t.src.changed()
		rctx, cancel := context.WithTimeout(ctx, portTimeout)
		evs, err := t.src.st.Events(rctx, t.src.threadID, t.src.runID, after, store.MaxEventsRead)
		cancel()
		if ctx.Err() != nil {
			return
		}
		if err != nil {
			t.publish(nil, tailFailed) // the followers end; their clients reconnect
			return
		}
		state := tailReading
		for i, ev := range evs {
			after = ev.Seq
			if terminalEvent(ev.Data) {
				evs, state = evs[:i+1], tailDone
				break
			}
		}
		if len(evs) > 0 || state != tailReading {
			t.publish(evs, state)
		}
		if state != tailReading {
			return
		}
		if len(evs) == store.MaxEventsRead {
			continue
		}
		if len(evs) == 0 {
			if t.src.goingOn(ctx) {
				endedSince = time.Time{}
			} else if endedSince.IsZero() {
				endedSince = time.Now()
			} else if time.Since(endedSince) > lostGrace {
				// The run ended without a terminal event in its log (its replica died).
				t.publish(nil, tailLost)
				return
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-changed: // nil when the run is not on this replica: never fires
		case <-poll.C:
		}
	}
}

// terminalEvent reports whether a logged event ends its run's stream.
func terminalEvent(data json.RawMessage) bool {
	var ev logEvent
	if json.Unmarshal(data, &ev) != nil {
		return false
	}
	switch agui.EventType(ev.Type) {
	case agui.EventRunFinished, agui.EventRunError:
		return true
	}
	return false
}
