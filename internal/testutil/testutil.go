// Package testutil holds the small helpers that tests across the module share: a log sink
// safe for concurrent writers, and the goroutine-leak check every package's TestMain runs.
// It imports nothing from Baton, so any package's internal tests can use it.
package testutil

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"sync"
	"testing"

	"go.uber.org/goleak"
)

// SyncBuffer is a bytes.Buffer safe for concurrent writers and readers: the destination of a
// logger that the code under test writes from its own goroutines while the test reads it.
// The zero value is ready to use.
type SyncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

// Write appends p to the buffer.
func (b *SyncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

// String returns everything written so far.
func (b *SyncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// VerifyTestMain runs a package's tests, then atExit (which stops what the tests shared, such
// as pgtest's server), and then, when every test passed, fails the test binary if any
// goroutine is still running: a test that passes while leaving work behind hides a leak. It
// does not return. Use it as the whole of TestMain:
//
//	func TestMain(m *testing.M) { testutil.VerifyTestMain(m) }
func VerifyTestMain(m *testing.M, atExit ...func()) {
	os.Exit(finish(m.Run(), os.Stderr, atExit))
}

// finish is VerifyTestMain after m.Run: the exit code for the tests' code.
func finish(code int, stderr io.Writer, atExit []func(), opts ...goleak.Option) int {
	for _, f := range atExit {
		f()
	}
	if code != 0 {
		return code // the failures are reported already; a leak check would add noise
	}
	if err := goleak.Find(opts...); err != nil {
		fmt.Fprintln(stderr, "goleak:", err)
		return 1
	}
	return 0
}
