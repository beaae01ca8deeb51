package coordinator

import (
	"errors"
	"sync/atomic"

	"github.com/baton-dev/baton/agui"
)

// CodeEventLimit is the RUN_ERROR code of a run that reached its event limit.
const CodeEventLimit = "EVENT_LIMIT"

// ErrEventLimit: the run produced server.max_events_per_run events; its work is cancelled
// and it ends with RUN_ERROR EVENT_LIMIT.
var ErrEventLimit = errors.New("event limit reached")

// eventLimitReserve is how many of a run's events are kept for its end: once max minus
// this many have been sent, only structural events (starts, ends, the terminal event)
// pass, so that the run can still close what it opened and end properly.
const eventLimitReserve = 64

// eventLimit counts a run's events against its limit (server.max_events_per_run): a run
// that produces more, such as a sub-agent or MCP server that floods progress, would
// otherwise fill the event log and every stream without bound.
type eventLimit struct {
	max int
	n   atomic.Int64
	hit atomic.Bool
	// reached is called once, inside the emit that reaches the soft limit.
	reached func()
}

// admit counts ev and reports whether it is sent. Past max-eventLimitReserve content
// events are dropped and the run is told (reached); past max only the terminal event passes.
func (l *eventLimit) admit(ev agui.Event) bool {
	if l.max <= 0 {
		return true
	}
	terminal := false
	switch ev.EventType() {
	case agui.EventRunFinished, agui.EventRunError:
		terminal = true
	}
	n := l.n.Load()
	soft := int64(max(l.max-eventLimitReserve, l.max/2))
	if n >= soft && !terminal {
		if l.hit.CompareAndSwap(false, true) && l.reached != nil {
			l.reached()
		}
		if n >= int64(l.max) || isContent(ev) {
			return false
		}
	}
	l.n.Add(1)
	return true
}

// isContent reports whether ev only adds content to something open (a delta, a progress
// update), so that dropping it leaves the stream well formed.
func isContent(ev agui.Event) bool {
	switch ev.EventType() {
	case agui.EventTextMessageContent, agui.EventToolCallArgs, agui.EventActivitySnapshot,
		agui.EventStateDelta, agui.EventStateSnapshot, agui.EventCustom:
		return true
	}
	return false
}
