// Package followers counts the streams that follow runs on this process, per run and per
// principal, for every surface at once (AG-UI's reconnect streams, A2A's SubscribeToTask):
// server.max_followers_per_run and server.max_followers_per_principal.
package followers

import (
	"errors"
	"sync"
)

// DefaultMaxPerPrincipal is server.max_followers_per_principal's default (as in
// internal/config).
const DefaultMaxPerPrincipal = 500

// Errors of Join: which cap a refused follower reached.
var (
	ErrRunFull       = errors.New("followers: too many streams follow this run")
	ErrPrincipalFull = errors.New("followers: this principal follows too many streams")
)

// Counter counts the open followers. Its methods are safe for concurrent use.
type Counter struct {
	maxPerPrincipal int

	mu           sync.Mutex
	perRun       map[string]int
	perPrincipal map[string]int
}

// New returns a counter that caps each principal at maxPerPrincipal followers (0:
// DefaultMaxPerPrincipal; negative: no cap).
func New(maxPerPrincipal int) *Counter {
	if maxPerPrincipal == 0 {
		maxPerPrincipal = DefaultMaxPerPrincipal
	}
	return &Counter{maxPerPrincipal: maxPerPrincipal, perRun: map[string]int{}, perPrincipal: map[string]int{}}
}

// Join adds a follower of run (any key naming it) for principal unless maxPerRun (if
// positive) follow the run or the principal's cap is reached: both checks and both counts
// are one step, so that concurrent joins never pass a cap. leave removes the follower.
func (c *Counter) Join(principal, run string, maxPerRun int) (leave func(), err error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if maxPerRun > 0 && c.perRun[run] >= maxPerRun {
		return nil, ErrRunFull
	}
	if c.maxPerPrincipal > 0 && c.perPrincipal[principal] >= c.maxPerPrincipal {
		return nil, ErrPrincipalFull
	}
	c.perRun[run]++
	c.perPrincipal[principal]++
	var once sync.Once
	return func() {
		once.Do(func() {
			c.mu.Lock()
			defer c.mu.Unlock()
			if c.perRun[run]--; c.perRun[run] <= 0 {
				delete(c.perRun, run)
			}
			if c.perPrincipal[principal]--; c.perPrincipal[principal] <= 0 {
				delete(c.perPrincipal, principal)
			}
		})
	}, nil
}
