package retry

import (
	"context"
	"net/http"
	"testing"
	"time"
)

func TestParseAfter(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	cases := map[string]time.Duration{
		"":      0,
		"2":     2 * time.Second,
		" 1.5 ": 1500 * time.Millisecond,
		"0":     0,
		"-3":    0,
		"NaN":   0,
		"+Inf":  0,
		"1e300": 0,
		"soon":  0,
		now.Add(10 * time.Second).Format(http.TimeFormat): 10 * time.Second,
		now.Add(-time.Minute).Format(http.TimeFormat):     0,
	}
	for in, want := range cases {
		if got := ParseAfter(in, now); got != want {
			t.Errorf("ParseAfter(%q) = %v, want %v", in, got, want)
		}
	}
}

func TestBackoff(t *testing.T) {
	t.Parallel()
	base, limit := 100*time.Millisecond, time.Second
	want := []time.Duration{100, 200, 400, 800, 1000, 1000}
	for i, w := range want {
		if got := Backoff(base, limit, i+1); got != w*time.Millisecond {
			t.Errorf("attempt %d: %v, want %v", i+1, got, w*time.Millisecond)
		}
	}
	if got := Backoff(base, limit, 0); got != base {
		t.Errorf("attempt 0: %v", got)
	}
	if got := Backoff(time.Hour, 30*time.Second, 100); got != 30*time.Second {
		t.Errorf("overflow: %v", got)
	}
}

func TestSleep(t *testing.T) {
	t.Parallel()
	if !Sleep(context.Background(), time.Millisecond) {
		t.Fatal("a short sleep did not pass")
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if Sleep(ctx, time.Hour) {
		t.Fatal("a cancelled sleep passed")
	}
}
