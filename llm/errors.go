package llm

import (
	"errors"
	"fmt"
	"math"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/baton-dev/baton/internal/retry"
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
	// URL is the endpoint that failed, for logs: scheme, host and path only (no
	// userinfo, no query); "" when unknown.
	URL string
}

// ErrUnknownModel is wrapped by a probe's error when the provider answers but does not
// list the configured model.
var ErrUnknownModel = errors.New("unknown model")

// Cause is the underlying failure for logs: the network error (connection refused, a DNS
// failure, a TLS error) or the provider's status and message. For an auth failure only the
// status: providers' messages about a bad key quote part of it. Never shown to users.
func (e *Error) Cause() string {
	if e.Kind == ErrAuth {
		return fmt.Sprintf("HTTP %d %s (the provider's message is not logged: it may quote the key)", e.Status, http.StatusText(e.Status))
	}
	if e.Err == nil {
		return e.Message
	}
	var ue *url.Error
	if errors.As(e.Err, &ue) && ue.Err != nil {
		return truncate(ue.Err.Error(), 500)
	}
	return truncate(e.Err.Error(), 500)
}

// LogAttrs are the log attributes that say where a model call failed and why (slog
// key-value pairs): "cause" (Cause), "url" and "status" when known. nil when err is not an
// *Error. Never the key.
func LogAttrs(err error) []any {
	var e *Error
	if !errors.As(err, &e) {
		return nil
	}
	out := []any{"cause", e.Cause()}
	if e.URL != "" {
		out = append(out, "url", e.URL)
	}
	if e.Status != 0 {
		out = append(out, "status", e.Status)
	}
	return out
}

// SafeURL is u without userinfo, query or fragment: what may be logged of an endpoint.
func SafeURL(u *url.URL) string {
	if u == nil {
		return ""
	}
	c := url.URL{Scheme: u.Scheme, Host: u.Host, Path: u.Path}
	return c.String()
}

// EndpointOf finds the URL of the request that err is about (an *url.Error from the HTTP
// client), as SafeURL; "" when err does not say.
func EndpointOf(err error) string {
	var ue *url.Error
	if errors.As(err, &ue) {
		if u, perr := url.Parse(ue.URL); perr == nil {
			return SafeURL(u)
		}
	}
	return ""
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

// kindFromStatus classifies an HTTP status code. 408 counts as a server error
// because, like 5xx, it says nothing about the request being wrong.
func kindFromStatus(status int) ErrorKind {
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
	kind := kindFromStatus(status)
	msg := kindMessage(kind)
	if detail != "" && kind != ErrAuth {
		msg += ": " + truncate(detail, 300)
	}
	return &Error{
		Kind:       kind,
		Status:     status,
		RetryAfter: parseRetryAfter(header, time.Now()),
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

// parseRetryAfter reads the wait a provider asked for: retry-after-ms
// (milliseconds, sent by OpenAI) or Retry-After as delay-seconds or an HTTP
// date relative to now. It returns 0 when absent, unparsable or in the past.
func parseRetryAfter(h http.Header, now time.Time) time.Duration {
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
