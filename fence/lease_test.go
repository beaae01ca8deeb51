package fence

import (
	"context"
	"errors"
	"testing"
	"testing/synctest"
	"time"
)

func TestMargin(t *testing.T) {
	if got, want := Margin(10*time.Second, 2*time.Second), 4*time.Second+50*time.Millisecond+10*time.Millisecond; got != want {
		t.Fatalf("Margin(10s, 2s) = %v, want %v", got, want)
	}
	if got := Margin(time.Second, time.Second); got != 500*time.Millisecond {
		t.Fatalf("Margin(1s, 1s) = %v, want half the lease", got)
	}
}

// TestLeaseHoldsBackAfterMargin: side effects go ahead while the lease holds by more than
// the margin, wait from then on, go on after a renewal, and stop for good once the lease
// is lost; the client is told once, at the lease's end.
func TestLeaseHoldsBackAfterMargin(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		lapses := 0
		l := New(time.Now(), 2*time.Second, 500*time.Millisecond, func() { lapses++ })
		ctx := context.Background()
		if err := l.Wait(ctx); err != nil {
			t.Fatalf("Wait on a fresh lease: %v", err)
		}
		time.Sleep(1600 * time.Millisecond) // past lease - margin
		done := make(chan error, 1)
		go func() { done <- l.Wait(ctx) }()
		synctest.Wait()
		select {
		case err := <-done:
			t.Fatalf("Wait returned %v past the margin without a renewal", err)
		default:
		}
		time.Sleep(time.Second) // past the lease's end: the client is told
		synctest.Wait()
		if lapses != 1 {
			t.Fatalf("onLapse called %d times at the lease's end, want 1", lapses)
		}
		l.Renew(time.Now())
		if err := <-done; err != nil {
			t.Fatalf("Wait after a renewal: %v", err)
		}
		time.Sleep(1600 * time.Millisecond)
		go func() { done <- l.Wait(ctx) }()
		synctest.Wait()
		l.Lose()
		if err := <-done; !errors.Is(err, ErrLost) {
			t.Fatalf("Wait after Lose = %v, want ErrLost", err)
		}
		if err := l.Wait(ctx); !errors.Is(err, ErrLost) {
			t.Fatalf("Wait on a lost lease = %v, want ErrLost", err)
		}
	})
}

// TestLeaseWaitEndsWithContext: a waiter whose context ends gets its error.
func TestLeaseWaitEndsWithContext(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l := New(time.Now().Add(-time.Hour), time.Second, 100*time.Millisecond, nil)
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		if err := l.Wait(ctx); !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("Wait = %v, want the context's deadline", err)
		}
	})
}

// TestNilLease: without a heartbeat nothing is held back.
func TestNilLease(t *testing.T) {
	var l *Lease
	if err := l.Wait(context.Background()); err != nil {
		t.Fatal(err)
	}
	l.Renew(time.Now())
	l.Lose()
}

func TestContactClaimRule(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var c Contact
		if !c.MayClaim(time.Second) {
			t.Fatal("may not claim although the contact never broke")
		}
		c.Failed()
		if c.MayClaim(time.Second) {
			t.Fatal("may claim while the store is unreachable")
		}
		c.Renewed(time.Now())
		time.Sleep(500 * time.Millisecond)
		c.Renewed(time.Now())
		if c.MayClaim(time.Second) {
			t.Fatal("may claim after half a lease of contact")
		}
		time.Sleep(600 * time.Millisecond)
		if !c.MayClaim(time.Second) {
			t.Fatal("may not claim after a lease of unbroken contact")
		}
		c.Failed()
		c.Renewed(time.Now())
		if c.MayClaim(time.Second) {
			t.Fatal("may claim right after the contact broke")
		}
	})
}
