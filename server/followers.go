package server

import "sync"

// DefaultMaxFollowersPerRun is Config.MaxFollowersPerRun's default.
const DefaultMaxFollowersPerRun = 100

// followerCount counts the reconnect streams open per run on this process, for
// server.max_followers_per_run. The zero value is ready.
type followerCount struct {
	mu sync.Mutex
	n  map[string]int
}

// join adds a follower of key unless max (> 0) are open; leave removes it.
func (f *followerCount) join(key string, max int) (leave func(), ok bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if max > 0 && f.n[key] >= max {
		return nil, false
	}
	if f.n == nil {
		f.n = map[string]int{}
	}
	f.n[key]++
	return func() {
		f.mu.Lock()
		defer f.mu.Unlock()
		if f.n[key]--; f.n[key] <= 0 {
			delete(f.n, key)
		}
	}, true
}
