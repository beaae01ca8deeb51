// Package retry holds the small pieces every client that retries needs, once: reading a
// Retry-After header, exponential backoff with a cap, and a sleep that ends with its
// context. The A2A client, the LLM providers, the MCP client and the engine's failure
// policy share them, so that they agree on what a header means and how waits grow.
package retry

import (
	"context"
	"math"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// ParseAfter reads a Retry-After value: delay-seconds (fractions accepted) or an HTTP date
// relative to now. It returns 0 when the value is empty, unparsable, not positive, in the
// past or too large to represent.
func ParseAfter(v string, now time.Time) time.Duration {
	v = strings.TrimSpace(v)
	if v == "" {
		return 0
	}
	if secs, err := strconv.ParseFloat(v, 64); err == nil {
		if secs <= 0 || math.IsInf(secs, 0) || math.IsNaN(secs) || secs > math.MaxInt64/float64(time.Second) {
			return 0
		}
		return time.Duration(secs * float64(time.Second))
	}
	if at, err := http.ParseTime(v); err == nil {
		if d := at.Sub(now); d > 0 {
			return d
		}
	}
	return 0
}

// Backoff is the wait before retry attempt (1-based): base, 2×base, 4×base…, at most
// limit. A non-positive base or an overflow gives limit.
func Backoff(base, limit time.Duration, attempt int) time.Duration {
	if attempt < 1 {
		attempt = 1
	}
	if base <= 0 || attempt > 62 {
		return limit
	}
	d := base << (attempt - 1)
	if d <= 0 || d > limit || d>>(attempt-1) != base {
		return limit
	}
	return d
}

// Sleep waits d or until ctx is done; it reports whether d passed.
func Sleep(ctx context.Context, d time.Duration) bool {
	if d <= 0 {
		return ctx.Err() == nil
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}
