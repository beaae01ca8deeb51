package stackcount

import "testing"

func parked(ready chan<- struct{}, stop <-chan struct{}) {
	close(ready)
	<-stop
}

func TestCount(t *testing.T) {
	const fn = "stackcount.parked"
	if n := Count(fn); n != 0 {
		t.Fatalf("Count before = %d, want 0", n)
	}
	stop := make(chan struct{})
	for range 3 {
		ready := make(chan struct{})
		go parked(ready, stop)
		<-ready
	}
	if n := Count(fn, "no such function"); n != 3 {
		t.Errorf("Count = %d, want 3 (one per goroutine, however many names match)", n)
	}
	close(stop)
}
