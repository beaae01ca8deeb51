package testutil

import (
	"fmt"
	"strings"
	"sync"
	"testing"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { VerifyTestMain(m) }

func TestSyncBufferConcurrentWriters(t *testing.T) {
	t.Parallel()
	var b SyncBuffer
	var wg sync.WaitGroup
	for i := range 8 {
		wg.Go(func() {
			for j := range 100 {
				fmt.Fprintf(&b, "w%d-%d\n", i, j)
				_ = b.String()
			}
		})
	}
	wg.Wait()
	lines := strings.Split(strings.TrimSuffix(b.String(), "\n"), "\n")
	if len(lines) != 800 {
		t.Fatalf("got %d lines, want 800", len(lines))
	}
	seen := map[string]bool{}
	for _, l := range lines {
		seen[l] = true
	}
	if len(seen) != 800 {
		t.Fatalf("got %d distinct lines, want 800 (writes interleaved)", len(seen))
	}
}

func TestFinish(t *testing.T) {
	// Only this test's goroutine counts: the others of the test binary are ignored.
	ignore := goleak.IgnoreCurrent()
	var ran []string
	atExit := []func(){func() { ran = append(ran, "a") }, func() { ran = append(ran, "b") }}

	var out strings.Builder
	if code := finish(0, &out, atExit, ignore); code != 0 || out.Len() != 0 {
		t.Fatalf("no leak: code %d, output %q; want 0 and nothing", code, out.String())
	}
	if strings.Join(ran, "") != "ab" {
		t.Fatalf("atExit ran %q, want a then b", ran)
	}

	stop := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		<-stop
	}()
	defer func() { close(stop); <-done }()

	out.Reset()
	if code := finish(0, &out, nil, ignore); code != 1 || !strings.Contains(out.String(), "goleak:") {
		t.Errorf("a leaked goroutine: code %d, output %q; want 1 and the goleak report", code, out.String())
	}
	out.Reset()
	if code := finish(3, &out, nil, ignore); code != 3 || out.Len() != 0 {
		t.Errorf("failed tests with a leak: code %d, output %q; want 3 and nothing", code, out.String())
	}
}
