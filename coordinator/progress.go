package coordinator

import (
	"sync"
	"time"

	"github.com/baton-dev/baton/agui"
	"github.com/baton-dev/baton/mcpclient"
)

// progressInterval is the least time between two progress events of one call: a server
// may send progress as fast as it can (100,000 notifications of one call were 99,950
// stored events), and a snapshot nobody could read before the next replaces it is worth
// nothing. Zero passes every notification through (the comparison in the benchmarks).
var progressInterval = 100 * time.Millisecond

// progressCoalescer turns one call's progress notifications into at most one
// ACTIVITY_SNAPSHOT per progressInterval: the first goes out at once, those that follow
// within the interval replace each other, and the latest goes out when the interval is
// over (or when the call ends: flush), so the last value the server sent is always shown.
type progressCoalescer struct {
	send func(mcpclient.Progress)

	mu      sync.Mutex
	last    time.Time // when the last event went out
	pending mcpclient.Progress
	has     bool // pending holds a value not sent yet
	timer   *time.Timer
	armed   bool
	noted   time.Time // when the last notification came
}

// progressGrace and progressGraceMax bound flush's wait for the notifications still on
// their way when a call returns: the SDK hands a call its result as soon as it is read,
// while the notifications read before it are queued to be handled one by one on another
// goroutine, so the last one (often sent just before the result) may not have reached note
// yet. progressGrace is counted from the later of the call's return and the last
// notification: long enough for a queued handler to be scheduled on a loaded machine.
const (
	progressGrace    = 50 * time.Millisecond
	progressGraceMax = time.Second
)

func newProgressCoalescer(send func(mcpclient.Progress)) *progressCoalescer {
	return &progressCoalescer{send: send}
}

// note takes one notification. Events go out under the lock, so that they leave in the
// order their values arrived.
func (c *progressCoalescer) note(p mcpclient.Progress) {
	c.mu.Lock()
	defer c.mu.Unlock()
	now := time.Now()
	c.noted = now
	if !c.armed && now.Sub(c.last) >= progressInterval {
		c.last, c.has = now, false
		c.send(p)
		return
	}
	c.pending, c.has = p, true
	if c.armed {
		return
	}
	c.armed = true
	wait := c.last.Add(progressInterval).Sub(now)
	if c.timer == nil {
		c.timer = time.AfterFunc(wait, c.fire)
	} else {
		c.timer.Reset(wait)
	}
}

// fire sends the latest value held back, once the interval since the last event is over.
func (c *progressCoalescer) fire() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.armed = false
	if c.has {
		c.last, c.has = time.Now(), false
		c.send(c.pending)
	}
}

// flush sends the value held back now: the call has ended, and its last progress goes out
// before its result. A call that had progress waits first until no notification came for
// progressGrace since it returned (at most progressGraceMax), so that the last one the
// server sent is the one that goes out.
func (c *progressCoalescer) flush() {
	returned := time.Now()
	for deadline := returned.Add(progressGraceMax); ; {
		c.mu.Lock()
		hadProgress, since := !c.noted.IsZero(), c.noted
		c.mu.Unlock()
		if !hadProgress {
			break
		}
		if since.Before(returned) {
			since = returned
		}
		quiet := time.Since(since)
		if quiet >= progressGrace || time.Now().After(deadline) {
			break
		}
		time.Sleep(progressGrace - quiet)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.timer != nil {
		c.timer.Stop()
	}
	c.armed = false
	if c.has {
		c.last, c.has = time.Now(), false
		c.send(c.pending)
	}
}

// progressEvent is the ACTIVITY_SNAPSHOT of one call's progress.
func progressEvent(toolCallID string, p mcpclient.Progress) *agui.ActivitySnapshot {
	content := map[string]any{"toolCallId": toolCallID, "progress": p.Progress, "message": p.Message}
	if p.Total > 0 {
		content["total"] = p.Total
	}
	return &agui.ActivitySnapshot{MessageID: "progress-" + toolCallID, ActivityType: "progress", Content: content}
}
