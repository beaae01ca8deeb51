// Package stackcount counts goroutines by what their stacks hold, for tests that check
// which goroutines a mechanism keeps (or leaves behind) without timing anything.
//
//	before := stackcount.Count("net/http.(*persistConn).readLoop")
//	// ... open streams ...
//	assert.Equal(t, before, stackcount.Count("net/http.(*persistConn).readLoop"))
package stackcount

import (
	"runtime"
	"strings"
)

// Count returns how many goroutines have a stack that mentions at least one of subs
// (function names, as runtime.Stack prints them).
func Count(subs ...string) int {
	buf := make([]byte, 1<<20)
	for {
		n := runtime.Stack(buf, true)
		if n < len(buf) {
			buf = buf[:n]
			break
		}
		buf = make([]byte, 2*len(buf))
	}
	c := 0
	for g := range strings.SplitSeq(string(buf), "\n\n") {
		for _, s := range subs {
			if strings.Contains(g, s) {
				c++
				break
			}
		}
	}
	return c
}
