package agui

import (
	"errors"
	"fmt"
	"net/http"
	"sync"
	"sync/atomic"
	"time"
)

// SSEWriter writes AG-UI events to an HTTP response as Server-Sent Events, one flushed frame
// per event. It is safe for concurrent use, so a keep-alive ticker may Ping while events are
// being written.
type SSEWriter struct {
	mu sync.Mutex
	w  http.ResponseWriter
	rc *http.ResponseController
	// bp is the frame buffer of the write in progress, from framePool: the hot path
	// allocates nothing per event, and a stream that waits keeps no buffer.
	bp *[]byte
	// timeout bounds each write; 0 leaves the connection's deadline alone.
	timeout time.Duration
	// aborted is set by Abort; it is read without mu, which a blocked write holds.
	aborted atomic.Bool
}

// ErrAborted is returned by writes after Abort.
var ErrAborted = errors.New("agui: stream aborted")

// maxKeptBuffer is the largest frame buffer kept for later frames (in framePool).
const maxKeptBuffer = 16 << 10

// framePool holds the frame buffers of the streams between their writes: an open stream
// that waits for its run (most of its life) retains none.
var framePool = sync.Pool{New: func() any { b := make([]byte, 0, 512); return &b }}

var pingFrame = []byte(": ping\n\n")

// NewSSEWriter prepares w for an event stream: it sets Content-Type text/event-stream,
// Cache-Control no-cache and X-Accel-Buffering no (so that proxies such as nginx do not hold
// frames back). The status line goes out with the first frame, or with Start.
func NewSSEWriter(w http.ResponseWriter) *SSEWriter {
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-cache")
	h.Set("X-Accel-Buffering", "no")
	return &SSEWriter{w: w, rc: http.NewResponseController(w)}
}

// SetWriteTimeout bounds every later write (events and pings) by d: a client that does not
// take a frame within d makes the write fail, instead of holding the writer forever. Call
// Close when the stream ends, so that the deadline does not outlive it on a kept-alive
// connection. Writers whose connection has no deadlines ignore it.
func (s *SSEWriter) SetWriteTimeout(d time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.timeout = d
}

// Abort makes a write in progress, and every later one, fail at once. It does not wait
// for a blocked write, so it may be called while another goroutine writes.
func (s *SSEWriter) Abort() {
	s.aborted.Store(true)
	_ = s.rc.SetWriteDeadline(pastDeadline)
}

// pastDeadline makes every write fail at once.
var pastDeadline = time.Unix(1, 0)

// Close clears the write deadline set by SetWriteTimeout.
func (s *SSEWriter) Close() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.timeout > 0 {
		_ = s.rc.SetWriteDeadline(time.Time{})
	}
}

// deadline arms the write deadline before a write; the caller holds s.mu.
func (s *SSEWriter) deadline() error {
	if s.aborted.Load() {
		return ErrAborted
	}
	if s.timeout <= 0 {
		return nil
	}
	err := s.rc.SetWriteDeadline(time.Now().Add(s.timeout))
	if err != nil && !errors.Is(err, http.ErrNotSupported) {
		return fmt.Errorf("agui: write deadline: %w", err)
	}
	if s.aborted.Load() {
		// Abort ran while the deadline was being moved: its deadline may have been
		// overwritten.
		_ = s.rc.SetWriteDeadline(pastDeadline)
		return ErrAborted
	}
	return nil
}

// Start sends the 200 status and headers at once, before the first event, so that the client
// sees the stream open even while the run is still preparing.
func (s *SSEWriter) Start() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.w.WriteHeader(http.StatusOK)
	return s.flush()
}

// WriteEvent encodes ev as one frame, writes it and flushes it. Its signature matches the
// Sequencer's sink.
func (s *SSEWriter) WriteEvent(ev Event) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	buf, err := appendFrame(s.frame(), ev)
	if err != nil {
		return err
	}
	return s.send(buf)
}

// WriteEvents writes the frames of several events that are ready at the same moment with one
// write and one flush. No event waits for another: this only saves a syscall and a client
// wake-up per event when a producer emits a burst.
func (s *SSEWriter) WriteEvents(evs []Event) error {
	if len(evs) == 0 {
		return nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	buf := s.frame()
	for _, ev := range evs {
		var err error
		if buf, err = appendFrame(buf, ev); err != nil {
			return err
		}
	}
	return s.send(buf)
}

// frame returns an empty frame buffer from framePool. The caller holds s.mu.
func (s *SSEWriter) frame() []byte {
	s.bp = framePool.Get().(*[]byte)
	return (*s.bp)[:0]
}

// send writes the frames in buf with one write and one flush, under the write deadline,
// and gives buf back to framePool unless it grew large: a rare huge frame (a snapshot)
// must not pin its buffer. The caller holds s.mu.
func (s *SSEWriter) send(buf []byte) error {
	defer func() {
		if bp := s.bp; bp != nil && cap(buf) <= maxKeptBuffer {
			*bp = buf[:0]
			framePool.Put(bp)
		}
		s.bp = nil
	}()
	// The deadline is re-armed for each piece, so that it bounds how long the client takes
	// nothing (server.stream_write_timeout), not how long a large frame takes to a client
	// that reads it slowly.
	for rest := buf; len(rest) > 0; {
		n := len(rest)
		if s.timeout > 0 {
			n = min(n, writePiece)
		}
		if err := s.deadline(); err != nil {
			return err
		}
		if _, err := s.w.Write(rest[:n]); err != nil {
			return fmt.Errorf("agui: write events: %w", err)
		}
		rest = rest[n:]
	}
	return s.flush()
}

// writePiece is the most written under one write deadline.
const writePiece = 32 << 10

// Ping writes the keep-alive comment ": ping" and flushes it; clients ignore comments.
func (s *SSEWriter) Ping() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.deadline(); err != nil {
		return err
	}
	if _, err := s.w.Write(pingFrame); err != nil {
		return fmt.Errorf("agui: write ping: %w", err)
	}
	return s.flush()
}

// flush pushes buffered bytes to the client. A writer that cannot flush is an error: events
// would sit in a buffer and the stream would look dead to the user.
func (s *SSEWriter) flush() error {
	if err := s.rc.Flush(); err != nil {
		return fmt.Errorf("agui: flush: %w", err)
	}
	return nil
}
