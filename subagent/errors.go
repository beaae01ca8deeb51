package subagent

import (
	"context"
	"errors"
	"fmt"
	"github.com/baton-dev/baton/internal/retry"
	"io"
	"iter"
	"net"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"syscall"
	"time"

	sdk "github.com/a2aproject/a2a-go/v2/a2a"
)

// Errors of this package. They are wrapped together with the SDK error that caused them, so
// errors.Is works with both (for example with sdk.ErrTaskNotFound).
var (
	// ErrUnreachable: the agent could not be reached (network failure, 429 or 5xx) after
	// the retry budget, or its card could not be fetched.
	ErrUnreachable = errors.New("a2a: agent unreachable")
	// ErrInvalidTransition: a continuation names a task that is unknown or already
	// finished (-32001 task not found, -32602 invalid params on a finished task).
	ErrInvalidTransition = errors.New("a2a: task cannot be continued")
	// ErrAuth: the agent refused the caller (-31401 unauthenticated, -31403 unauthorized).
	ErrAuth = errors.New("a2a: agent requires authentication")
	// ErrCapabilityGap: the agent does not support the operation or content type (-32004,
	// -32005), or offers no interface this client speaks.
	ErrCapabilityGap = errors.New("a2a: agent does not support the request")
	// ErrNotCancelable: the agent refused to cancel a task that is not over
	// (-32002 TaskNotCancelable): it may still be running.
	ErrNotCancelable = errors.New("a2a: the agent refused to cancel the task")
)

// RetryAfterError carries the wait an agent asked for (Retry-After) with a call that failed:
// a caller that tries again later (the cancel follow-up) waits at least that long.
type RetryAfterError struct {
	After time.Duration
	Err   error
}

func (e *RetryAfterError) Error() string { return e.Err.Error() }

func (e *RetryAfterError) Unwrap() error { return e.Err }

// RetryAfterOf returns the wait the agent asked for with err (0 when it asked for none).
func RetryAfterOf(err error) time.Duration {
	var ra *RetryAfterError
	if errors.As(err, &ra) {
		return ra.After
	}
	return 0
}

// withRetryAfter wraps err with the Retry-After of the last response, if it had one.
func withRetryAfter(err error, rec *httpStatus) error {
	if _, ra := rec.get(); ra > 0 {
		return &RetryAfterError{After: ra, Err: err}
	}
	return err
}

// errSDKPanic marks an agent's answer that made the A2A SDK panic while reading it.
var errSDKPanic = errors.New("the A2A SDK failed on the agent's answer")

// recoverStream passes seq on, turning a panic of the SDK while it reads the stream into an
// error (a protocol error for classify): a2a-go v2.4.0 dereferences every entry of a JSON-RPC
// error's "data" array, so a null entry sent by an agent would otherwise take the whole
// process down. A panic of the caller's loop body is not the SDK's and goes on. Its frame
// sits on the stack of a goroutine that waits on a stream for as long as the task runs:
// the first stream of a delegation (delegation.streamOnce) has the same guard in place
// instead, which kept that goroutine's stack at 8 KiB with an HTTP/1.1 agent (BENCHMARKS.md,
// "Per open streaming run: the delegation's stack and the thread's contexts"); a resumed
// stream (delegation.resume) is rarer and keeps this one.
func recoverStream(seq iter.Seq2[sdk.Event, error]) iter.Seq2[sdk.Event, error] {
	return func(yield func(sdk.Event, error) bool) {
		inBody := false
		defer func() {
			if inBody {
				return
			}
			if r := recover(); r != nil {
				yield(nil, fmt.Errorf("%w: %v", errSDKPanic, r))
			}
		}()
		for ev, err := range seq {
			inBody = true
			if !yield(ev, err) {
				return
			}
			inBody = false
		}
	}
}

// errEmptyStream marks a stream that ended before its first event.
var errEmptyStream = errors.New("stream ended before any event")

// TaskError carries the task a failed delegation was about. Errors of [Agent.Send] are
// wrapped in it once a task id is known, so the caller can cancel or report the task.
type TaskError struct {
	TaskID    string
	ContextID string
	Err       error
}

func (e *TaskError) Error() string { return e.Err.Error() }

func (e *TaskError) Unwrap() error { return e.Err }

// TaskIDOf returns the task id carried by err (see [TaskError]), or "".
func TaskIDOf(err error) string {
	var te *TaskError
	if errors.As(err, &te) {
		return te.TaskID
	}
	return ""
}

// classify maps an SDK or transport error onto this package's sentinels. continuation tells
// whether the request named an existing task (task-not-found then means a bad transition).
func classify(name string, err error, rec *httpStatus, continuation bool) error {
	switch {
	case errors.Is(err, sdk.ErrUnauthenticated), errors.Is(err, sdk.ErrUnauthorized):
		return fmt.Errorf("a2a: agent %q: %w: %w", name, ErrAuth, err)
	case errors.Is(err, sdk.ErrUnsupportedOperation), errors.Is(err, sdk.ErrUnsupportedContentType):
		return fmt.Errorf("a2a: agent %q: %w: %w", name, ErrCapabilityGap, err)
	case continuation && (errors.Is(err, sdk.ErrTaskNotFound) || errors.Is(err, sdk.ErrInvalidParams)):
		return fmt.Errorf("a2a: agent %q: %w: %w", name, ErrInvalidTransition, err)
	case isTransient(err, rec):
		return fmt.Errorf("a2a: agent %q: %w: %w", name, ErrUnreachable, err)
	default:
		// A protocol error (invalid JSON-RPC, a frame that is not JSON, 404 on the
		// endpoint, an error code this client does not know): the agent is not usable
		// as the card describes it, which is not a failed task.
		return fmt.Errorf("a2a: agent %q: %w: protocol error: %w", name, ErrUnreachable, err)
	}
}

// isProtocolError reports whether a failed call got an answer that this client cannot use
// as one (see classify's default): worth a retry with a freshly read card.
func isProtocolError(err error, rec *httpStatus) bool {
	if err == nil || errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return false
	}
	if definiteRefusal(err) && !errors.Is(err, sdk.ErrMethodNotFound) {
		return false
	}
	if errors.Is(err, sdk.ErrTaskNotCancelable) {
		return false
	}
	return !isTransient(err, rec)
}

// isTransient reports whether a failed call may succeed when repeated: 429, 5xx and
// network failures. JSON-RPC errors are answers, not transient failures.
func isTransient(err error, rec *httpStatus) bool {
	if rec != nil {
		if code, _ := rec.get(); code == http.StatusTooManyRequests || code >= 500 {
			return true
		}
	}
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return false
	}
	return isNetworkError(err) || errors.Is(err, errEmptyStream) ||
		errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, io.EOF)
}

func isNetworkError(err error) bool {
	var ue *url.Error
	var ne net.Error
	var oe *net.OpError
	return errors.As(err, &ue) || errors.As(err, &ne) || errors.As(err, &oe) ||
		errors.Is(err, syscall.ECONNREFUSED) || errors.Is(err, syscall.ECONNRESET) ||
		errors.Is(err, syscall.EPIPE)
}

// httpStatus records the HTTP status of the last non-2xx response of one call: the SDK
// reports those only as text, and the retry logic needs the code and Retry-After.
type httpStatus struct {
	mu         sync.Mutex
	code       int
	retryAfter time.Duration
}

func (s *httpStatus) set(code int, retryAfter time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.code, s.retryAfter = code, retryAfter
}

func (s *httpStatus) get() (int, time.Duration) {
	if s == nil {
		return 0, 0
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.code, s.retryAfter
}

type statusKey struct{}

// withStatus returns a context whose HTTP calls record their status into a fresh recorder.
func withStatus(ctx context.Context) (context.Context, *httpStatus) {
	rec := &httpStatus{}
	return context.WithValue(ctx, statusKey{}, rec), rec
}

// recordingTransport adds the configured headers to requests for the configured origins
// (checked on every hop, so a redirect never carries them elsewhere) and fills the
// [httpStatus] found in the request context.
type recordingTransport struct {
	base    http.RoundTripper
	headers http.Header
	home    originSet
}

func (t *recordingTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	if len(t.headers) > 0 && t.home[origin(req.URL)] {
		req = req.Clone(req.Context())
		for k, vs := range t.headers {
			req.Header[k] = append([]string(nil), vs...)
		}
	}
	resp, err := t.base.RoundTrip(req)
	if err == nil && !strings.HasPrefix(strings.ToLower(resp.Header.Get("Content-Type")), "text/event-stream") {
		// A JSON answer is decoded whole by the SDK: cap it, whatever the peer sends.
		// (SSE streams are read line by line, each line capped by the SDK.)
		resp.Body = &cappedBody{rc: resp.Body, left: maxResponseBytes}
	}
	if err == nil && (resp.StatusCode < 200 || resp.StatusCode > 299) {
		if rec, ok := req.Context().Value(statusKey{}).(*httpStatus); ok {
			rec.set(resp.StatusCode, parseRetryAfter(resp.Header.Get("Retry-After"), time.Now()))
		}
	}
	return resp, err
}

// maxResponseBytes caps a response that is not a stream.
var maxResponseBytes int64 = 64 << 20

// errResponseTooLarge: a response that is not a stream exceeded maxResponseBytes.
var errResponseTooLarge = errors.New("the agent's response is larger than the limit")

// cappedBody fails a read once more than left bytes were read.
type cappedBody struct {
	rc   io.ReadCloser
	left int64
}

func (b *cappedBody) Read(p []byte) (int, error) {
	if b.left <= 0 {
		return 0, errResponseTooLarge
	}
	if int64(len(p)) > b.left {
		p = p[:b.left]
	}
	n, err := b.rc.Read(p)
	b.left -= int64(n)
	return n, err
}

func (b *cappedBody) Close() error { return b.rc.Close() }

// CloseIdleConnections forwards to the wrapped transport (http.Client looks for it).
func (t *recordingTransport) CloseIdleConnections() {
	if c, ok := t.base.(interface{ CloseIdleConnections() }); ok {
		c.CloseIdleConnections()
	}
}

// parseRetryAfter reads a Retry-After header: delay seconds or an HTTP date.
func parseRetryAfter(v string, now time.Time) time.Duration { return retry.ParseAfter(v, now) }

// retryDelay returns how long to wait before attempt+1, and false when the server asks for
// a wait longer than maxRetryWait (reported rather than slept).
func retryDelay(base time.Duration, attempt int, rec *httpStatus) (time.Duration, bool) {
	if _, ra := rec.get(); ra > 0 {
		return ra, ra <= maxRetryWait
	}
	return retry.Backoff(base, maxRetryWait, attempt), true
}

// sleep waits d or until ctx is done.
func sleep(ctx context.Context, d time.Duration) error {
	if !retry.Sleep(ctx, d) {
		return ctx.Err()
	}
	return nil
}
