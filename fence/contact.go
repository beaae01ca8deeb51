package fence

import (
	"sync"
	"time"
)

// Contact tracks this replica's unbroken contact with the store, for the claim rule: a
// lapsed lease means that its owner could not renew it only if the store was reachable
// meanwhile. After an outage longer than a lease every lease looks lapsed though their
// owners are alive (and paused by Lease.Wait); a replica that claimed them at once would
// swap runs with the others. So a replica claims lapsed runs only after a lease of unbroken
// contact, by which time every live owner has renewed its own.
type Contact struct {
	mu sync.Mutex
	// since is when the current unbroken contact began (zero: none yet, or it broke);
	// last is when the last acknowledged renewal was sent.
	since, last time.Time
}

// Renewed records a heartbeat the store acknowledged, sent at sent.
func (c *Contact) Renewed(sent time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.since.IsZero() {
		c.since = sent
	}
	if sent.After(c.last) {
		c.last = sent
	}
}

// Failed records a heartbeat the store did not acknowledge: the contact is broken.
func (c *Contact) Failed() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.since = time.Time{}
}

// Last returns when the last acknowledged heartbeat was sent (zero: none).
func (c *Contact) Last() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.last
}

// MayClaim reports whether the contact has been unbroken for at least lease.
func (c *Contact) MayClaim(lease time.Duration) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return !c.since.IsZero() && time.Since(c.since) >= lease
}
