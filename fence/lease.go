// Package fence keeps a replica from acting for a run once it can no longer be sure that it
// still owns it (design/fencing.md).
//
// The store fences what it can: every write that belongs to a run carries the run's epoch
// and is refused once another replica took the run over. What it cannot fence are the side
// effects outside it (model calls, MCP calls, A2A sends, cancels). A Lease tracks, on this
// process's monotonic clock, how long the run's lease in the store is known to hold, and
// Wait holds back new side effects from the moment it might not any more: the lease's last
// acknowledged renewal was sent at some instant, the store's clock set its end at least a
// lease after that, so another replica can take the run over no earlier than that; the
// replica stops starting work one margin before (Margin: in-flight work, a late heartbeat,
// clock drift).
package fence

import (
	"context"
	"errors"
	"sync"
	"time"
)

// ErrLost is returned by Lease.Wait once the lease was lost for good: the store says that
// another replica owns the run (or that it ended elsewhere).
var ErrLost = errors.New("fence: the run's lease is lost")

// Margin is how long before a lease can lapse for the other replicas this one stops
// starting side effects: one heartbeat for the work already in flight, one for a heartbeat
// that is late, and the drift of the clocks over a lease (NTP slews at most 500 ppm; ten
// times that, and 10 ms, are allowed). It is at most half the lease.
func Margin(lease, heartbeat time.Duration) time.Duration {
	m := 2*heartbeat + lease/200 + 10*time.Millisecond
	return min(m, lease/2)
}

// Lease is one run's lease as this replica knows it. The zero value is not usable; a nil
// *Lease never holds anything back (no heartbeat is configured, so nothing can take the
// run over).
type Lease struct {
	ttl, margin time.Duration
	// onLapse is called once, from a Wait, when the lease may have lapsed for the others
	// (the run may be taken over now): the replica tells its client the run moved.
	onLapse func()

	mu      sync.Mutex
	sent    time.Time // when the last acknowledged renewal was sent (monotonic)
	lost    bool
	lapsed  bool
	changed chan struct{} // closed at the next renewal or loss; made by the first waiter
}

// New returns the lease of a run whose claim (its start or its takeover) was sent at
// sent, with the store's lease ttl; margin is Margin's. onLapse may be nil.
func New(sent time.Time, ttl, margin time.Duration, onLapse func()) *Lease {
	return &Lease{ttl: ttl, margin: margin, onLapse: onLapse, sent: sent}
}

// Renew records a renewal the store acknowledged, sent at sent. An older one changes
// nothing.
func (l *Lease) Renew(sent time.Time) {
	if l == nil {
		return
	}
	l.mu.Lock()
	if !l.lost && sent.After(l.sent) {
		l.sent = sent
		l.wakeLocked()
	}
	l.mu.Unlock()
}

// Lose records that the run is no longer this replica's: every Wait returns ErrLost.
func (l *Lease) Lose() {
	if l == nil {
		return
	}
	l.mu.Lock()
	l.lost = true
	l.wakeLocked()
	l.mu.Unlock()
}

// Sent returns when the last acknowledged renewal (or the claim) was sent.
func (l *Lease) Sent() time.Time {
	if l == nil {
		return time.Time{}
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.sent
}

// Lost reports whether Lose was called.
func (l *Lease) Lost() bool {
	if l == nil {
		return false
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.lost
}

func (l *Lease) wakeLocked() {
	if l.changed != nil {
		close(l.changed)
		l.changed = nil
	}
}

// Wait returns nil at once while the replica may start a side effect for the run (the
// lease holds for more than the margin); otherwise it waits for a renewal. It returns
// ErrLost when the lease is lost, and ctx's error when ctx ends first.
func (l *Lease) Wait(ctx context.Context) error {
	if l == nil {
		return nil
	}
	for {
		l.mu.Lock()
		if l.lost {
			l.mu.Unlock()
			return ErrLost
		}
		now := time.Now()
		stopAt := l.sent.Add(l.ttl - l.margin)
		if now.Before(stopAt) {
			l.mu.Unlock()
			return nil
		}
		lapseAt := l.sent.Add(l.ttl)
		lapse := !l.lapsed && !now.Before(lapseAt)
		if lapse {
			l.lapsed = true
		}
		if l.changed == nil {
			l.changed = make(chan struct{})
		}
		changed := l.changed
		l.mu.Unlock()
		if lapse && l.onLapse != nil {
			l.onLapse()
		}
		// Woken at the lapse (to tell the client), by a renewal or a loss, or by ctx.
		var timer *time.Timer
		var at <-chan time.Time
		if d := time.Until(lapseAt); d > 0 {
			timer = time.NewTimer(d)
			at = timer.C
		}
		select {
		case <-ctx.Done():
		case <-changed:
		case <-at:
		}
		if timer != nil {
			timer.Stop()
		}
		if err := ctx.Err(); err != nil {
			return err
		}
	}
}
