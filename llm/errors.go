package llm

import (
	"errors"
	"fmt"
	"github.com/baton-dev/baton/internal/retry"
	"math"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// ErrNoCompletion reports a stream that ended without a Done delta or an error.
var ErrNoCompletion = errors.New("llm: stream ended without a completion")

// ErrorKind classifies a provider failure.
type ErrorKind string

// The kinds of provider error.
const (
	// ErrRateLimited is HTTP 429.
	ErrRateLimited ErrorKind = "rate_limited"
	// ErrServer is HTTP 5xx (and 408), or a malformed or error-carrying stream.
	ErrServer ErrorKind = "server"
	// ErrNetwork is a failure to reach the provider or a stream cut short.
	ErrNetwork ErrorKind = "network"
	// ErrBadRequest is any other 4xx.
	ErrBadRequest ErrorKind = "bad_request"
	// ErrAuth is HTTP 401 or 403.
	ErrAuth ErrorKind = "auth"
)

// Error is a classified provider error. The engine owns retries: providers
// never retry on their own.
type Error struct {
	Kind ErrorKind
	// Status is the HTTP status, or 0 when no response was received.
	Status int
	// RetryAfter is parsed from Retry-After (seconds or HTTP date) or
	// retry-after-ms; 0 if absent.
	RetryAfter time.Duration
	// Message is safe to show to users: no keys, URLs or stack traces.
	Message string
	// Err is the underlying error, for logs and errors.Is/As.
	Err error
}

// Error implements error. It only includes the user-safe parts.
func (e *Error) Error() string {
	var b strings.Builder
	b.WriteString("llm: ")
	b.WriteString(string(e.Kind))
	if e.Status != 0 {
		fmt.Fprintf(&b, " (HTTP %d)", e.Status)
	}
	if e.Message != "" {
		b.WriteString(": ")
		b.WriteString(e.Message)
	}
	return b.String()
}

// Unwrap returns the underlying error.
func (e *Error) Unwrap() error { return e.Err }

// Transient reports whether the kind is worth a retry (rate_limited, server,
// network, timeout).
func (e *Error) Transient() bool {
	switch e.Kind {
	case ErrRateLimited, ErrServer, ErrNetwork, ErrTimeout:
		return true
	}
	return false
}

// KindFromStatus classifies an HTTP status code. 408 counts as a server error
// because, like 5xx, it says nothing about the request being wrong.
func KindFromStatus(status int) ErrorKind {
	switch {
	case status == http.StatusTooManyRequests:
		return ErrRateLimited
	case status == http.StatusUnauthorized || status == http.StatusForbidden:
		return ErrAuth
	case status == http.StatusRequestTimeout || status >= 500:
		return ErrServer
	default:
		return ErrBadRequest
	}
}

// NewHTTPError builds a classified *Error from an HTTP status and response
// headers. detail, when non-empty, is appended to the generic message; pass
// only provider text that is safe to show (never for auth failures, whose
// provider messages echo parts of the key).
func NewHTTPError(status int, header http.Header, detail string, err error) *Error {
	kind := KindFromStatus(status)
	msg := kindMessage(kind)
	if detail != "" && kind != ErrAuth {
		msg += ": " + truncate(detail, 300)
	}
	return &Error{
		Kind:       kind,
		Status:     status,
		RetryAfter: ParseRetryAfter(header, time.Now()),
		Message:    msg,
		Err:        err,
	}
}

func kindMessage(k ErrorKind) string {
	switch k {
	case ErrRateLimited:
		return "the model provider is rate limiting requests"
	case ErrServer:
		return "the model provider had a server error"
	case ErrNetwork:
		return "the model provider could not be reached"
	case ErrAuth:
		return "the model provider refused the credentials"
	case ErrTimeout:
		return "the model provider did not answer in time"
	default:
		return "the model provider rejected the request"
	}
}

// ParseRetryAfter reads the wait a provider asked for: retry-after-ms
// (milliseconds, sent by OpenAI) or Retry-After as delay-seconds or an HTTP
// date relative to now. It returns 0 when absent, unparsable or in the past.
func ParseRetryAfter(h http.Header, now time.Time) time.Duration {
	if h == nil {
		return 0
	}
	if v := strings.TrimSpace(h.Get("Retry-After-Ms")); v != "" {
		if ms, err := strconv.ParseFloat(v, 64); err == nil && ms > 0 && !math.IsInf(ms, 0) {
			return time.Duration(ms * float64(time.Millisecond))
		}
	}
	return retry.ParseAfter(h.Get("Retry-After"), now)
}

func truncate(s string, n int) string {
	r := []rune(s)
	if len(r) <= n {
		return s
	}
	return string(r[:n]) + "…"
}
