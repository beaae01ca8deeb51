package fence

import (
	"sync"
	"time"
)

// Contact tracks this replica's contact with the store, for the claim rule: a lapsed
// lease means that its owner could not renew it only if the store was reachable
// meanwhile. After an outage longer than a lease every lease looks lapsed though their
// owners are alive (and paused by Lease.Wait); a replica that claimed them at once would
// swap runs with the others. So a replica that lost contact claims lapsed runs again only
// after a lease of unbroken contact, by which time every live owner has renewed its own. A
// replica that never lost contact (since it started) claims at once. A hand-off's released
// runs are not lapsed leases (they have no owner left): the takeover claims them whatever
// the contact says.
type Contact struct {
	mu sync.Mutex
	// broken: the last heartbeat failed. since is when contact came back after the last
	// failure (zero: it never failed); last is when the last acknowledged heartbeat was
	// sent.
	broken      bool
	since, last time.Time
}

// Renewed records a heartbeat the store acknowledged, sent at sent.
func (c *Contact) Renewed(sent time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.broken {
		c.broken, c.since = false, sent
	}
	if sent.After(c.last) {
		c.last = sent
	}
}

// Failed records a heartbeat the store did not acknowledge: the contact is broken.
func (c *Contact) Failed() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.broken = true
}

// Last returns when the last acknowledged heartbeat was sent (zero: none).
func (c *Contact) Last() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.last
}

// MayClaim reports whether this replica may claim lapsed runs: its contact with the store
// never broke, or has been unbroken for at least lease since it last did.
func (c *Contact) MayClaim(lease time.Duration) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.broken {
		return false
	}
	return c.since.IsZero() || time.Since(c.since) >= lease
}
