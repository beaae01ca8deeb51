package server

import (
	"bytes"
	"context"
	"net"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/baton-dev/baton/agui"
)

// Event streams on a taken-over connection (design/sse-hijack.md).
//
// An HTTP/1.x stream takes over (hijacks) its connection once every refusal has been
// decided, and its handler returns: net/http's per-connection state (its buffers, its serve
// goroutine and its background read) is freed, and Baton frames the response itself:
// chunked transfer coding, one chunk per flush, the terminating chunk only on a clean end,
// and Connection: close. One goroutine per stream waits in conn.Read to notice the client
// going away; writers run only while there is something to write.

// Streams tracks the event streams that have taken over their connection. http.Server's
// Shutdown neither waits for such connections nor closes them: a process that shuts down
// calls Wait after the engine's drain, so that the terminal events of ending runs reach
// their clients, and what is left at its deadline is closed. The zero value is not usable:
// call NewStreams.
type Streams struct {
	mu sync.Mutex
	// conns are the open streams; n counts them and the goroutines that serve them.
	conns map[*sseConn]struct{}
	n     int
	// changed is closed, and replaced, whenever n goes down.
	changed chan struct{}
	// closed: Wait's deadline passed; a stream that takes over its connection from now on
	// is closed at once.
	closed bool
}

// NewStreams returns an empty registry, for Config.Streams.
func NewStreams() *Streams {
	return &Streams{conns: map[*sseConn]struct{}{}, changed: make(chan struct{})}
}

// Wait waits until every stream has ended and its goroutines have returned, or ctx is
// done: then it closes the connections of the streams still open (their clients see a cut
// stream), waits briefly for their goroutines, and returns ctx's error.
func (t *Streams) Wait(ctx context.Context) error {
	if t.wait(ctx) {
		return nil
	}
	t.mu.Lock()
	t.closed = true
	left := make([]*sseConn, 0, len(t.conns))
	for c := range t.conns {
		left = append(left, c)
	}
	t.mu.Unlock()
	for _, c := range left {
		c.close(false)
	}
	// Closed connections end their goroutines at once (a read or a write fails); a
	// goroutine inside a store read ends with its timeout.
	wctx, cancel := context.WithTimeout(context.Background(), storeTimeout)
	defer cancel()
	t.wait(wctx)
	return ctx.Err()
}

// Open reports how many streams are open.
func (t *Streams) Open() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return len(t.conns)
}

// wait waits until nothing is tracked (true) or ctx is done (false).
func (t *Streams) wait(ctx context.Context) bool {
	for {
		t.mu.Lock()
		n, ch := t.n, t.changed
		t.mu.Unlock()
		if n == 0 {
			return true
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return false
		}
	}
}

// add registers c; false when the registry is closed.
func (t *Streams) add(c *sseConn) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.closed {
		return false
	}
	t.conns[c] = struct{}{}
	t.n++
	return true
}

// remove unregisters c (once, from c.close).
func (t *Streams) remove(c *sseConn) {
	t.mu.Lock()
	delete(t.conns, c)
	t.mu.Unlock()
	t.dec()
}

// goTrack runs f on a goroutine of its own that Wait waits for. The caller holds a
// registered stream, so the count cannot be zero meanwhile.
func (t *Streams) goTrack(f func()) {
	t.mu.Lock()
	t.n++
	t.mu.Unlock()
	go func() {
		defer t.dec()
		f()
	}()
}

func (t *Streams) dec() {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.n--
	close(t.changed)
	t.changed = make(chan struct{})
}

// sseConn is a taken-over connection carrying one event stream.
type sseConn struct {
	conn    net.Conn
	timeout time.Duration
	streams *Streams
	// done is closed when the stream ends (close): the reader's error is then ours.
	done chan struct{}
	once sync.Once
	// gone is called, once, when the client goes away (its side closed or reset) before
	// the stream ended. Set before the reader starts.
	gone func()
	// onClose runs once when the stream ends, however it ends. Set before registration.
	onClose func()
	aborted atomic.Bool
	// broken: a write failed; the stream can only be cut.
	broken atomic.Bool
	// ended: the terminating chunk has been written.
	ended atomic.Bool
}

// Bytes of the chunked framing (RFC 9112 §7.1).
const (
	chunkHeadRoom = 18 // up to 16 hex digits and CRLF, written in front of the data
	lastChunk     = "0\r\n\r\n"
)

// pingChunk is the keep-alive comment ": ping\n\n" as one chunk.
var pingChunk = []byte("8\r\n: ping\n\n\r\n")

// maxPooledBuffer is the largest write buffer returned to the pool.
const maxPooledBuffer = 64 << 10

// bufPool holds write buffers: a stream holds one only while it writes.
var bufPool = sync.Pool{New: func() any { b := make([]byte, 0, 4<<10); return &b }}

// takeOver hijacks an HTTP/1.1 request's connection and writes the stream's status line
// and headers (those already set on w, and the event stream's). ok is false, with w
// untouched, when the connection cannot be taken over (HTTP/1.0 or /2, a ResponseWriter without
// Hijacker, a hijack error): the caller streams through w as before. A connection taken
// over while the registry is closing is closed, and c is nil.
// onClose runs once when the stream ends, however it ends (even before takeOver returns).
// headSent: net/http has written the status line and chunks of this response already (a
// late takeover, Config.TakeOverAfter): the response goes on in the same chunked coding,
// and the connection closes after it although its head did not say so.
func (s *server) takeOver(w http.ResponseWriter, r *http.Request, onClose func(), headSent bool) (c *sseConn, ok bool) {
	if !canTakeOver(r) {
		return nil, false
	}
	conn, _, err := http.NewResponseController(w).Hijack()
	if err != nil {
		return nil, false
	}
	// Bytes the client sent after its request (buffered by net/http, or read later) are
	// ignored: an SSE client has nothing more to say, and this response closes the
	// connection.
	_ = conn.SetDeadline(time.Time{})
	c = &sseConn{conn: conn, timeout: s.cfg.WriteTimeout, streams: s.streams, done: make(chan struct{}), onClose: onClose}
	if !s.streams.add(c) {
		_ = conn.Close()
		return nil, true
	}
	if headSent {
		return c, true
	}
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-cache")
	h.Set("X-Accel-Buffering", "no")
	h.Set("Transfer-Encoding", "chunked")
	h.Set("Connection", "close")
	h.Set("Date", time.Now().UTC().Format(http.TimeFormat))
	h.Del("Content-Length")
	bp := bufPool.Get().(*[]byte)
	buf := bytes.NewBuffer((*bp)[:0])
	buf.WriteString("HTTP/1.1 200 OK\r\n")
	_ = h.Write(buf)
	buf.WriteString("\r\n")
	err = c.write(buf.Bytes())
	putBuf(bp, buf.Bytes())
	if err != nil {
		s.log.Debug("event stream: writing the headers failed", "err", err)
		// The client is gone already; the reader notices it at once.
	}
	return c, true
}

// canTakeOver reports whether r's connection can carry a stream Baton frames itself:
// HTTP/1.0 has no chunked coding, HTTP/2 no hijacking; both stream through net/http.
func canTakeOver(r *http.Request) bool { return r.ProtoMajor == 1 && r.ProtoMinor >= 1 }

func putBuf(bp *[]byte, b []byte) {
	if cap(b) <= maxPooledBuffer {
		*bp = b[:0]
		bufPool.Put(bp)
	}
}

// startReader starts the goroutine that notices the client going away.
func (c *sseConn) startReader() { c.streams.goTrack(c.read) }

// read blocks in conn.Read until the connection fails or closes; bytes are discarded.
func (c *sseConn) read() {
	var b [1]byte
	for {
		if _, err := c.conn.Read(b[:]); err != nil {
			select {
			case <-c.done:
			default:
				c.gone()
			}
			return
		}
	}
}

// write writes b under the write deadline.
func (c *sseConn) write(b []byte) error {
	if c.aborted.Load() {
		return agui.ErrAborted
	}
	if c.timeout > 0 {
		_ = c.conn.SetWriteDeadline(time.Now().Add(c.timeout))
		if c.aborted.Load() {
			// abort ran while the deadline moved: its deadline may have been overwritten.
			_ = c.conn.SetWriteDeadline(pastDeadline)
			return agui.ErrAborted
		}
	}
	if _, err := c.conn.Write(b); err != nil {
		c.broken.Store(true)
		return err
	}
	return nil
}

// pastDeadline makes every write fail at once.
var pastDeadline = time.Unix(1, 0)

// abort makes a write in progress, and every later one, fail at once; it does not wait for
// a blocked write.
func (c *sseConn) abort() {
	c.aborted.Store(true)
	c.broken.Store(true)
	_ = c.conn.SetWriteDeadline(pastDeadline)
}

// chunk writes what fill appends as one chunk, with one write from a pooled buffer; last
// appends the terminating chunk (a clean end). Nothing to write and not last writes nothing.
func (c *sseConn) chunk(fill func([]byte) ([]byte, error), last bool) error {
	bp := bufPool.Get().(*[]byte)
	buf, err := fill((*bp)[:chunkHeadRoom])
	if err != nil {
		putBuf(bp, (*bp)[:0])
		return err
	}
	start := chunkHeadRoom
	if n := len(buf) - chunkHeadRoom; n > 0 {
		head := strconv.AppendInt(buf[:0:0], int64(n), 16)
		start -= len(head) + 2
		copy(buf[start:], head)
		copy(buf[start+len(head):], "\r\n")
		buf = append(buf, '\r', '\n')
	}
	if last {
		buf = append(buf, lastChunk...)
	}
	if len(buf) > start {
		err = c.write(buf[start:])
	}
	putBuf(bp, buf)
	if err == nil && last {
		c.ended.Store(true)
	}
	return err
}

// WriteRaw writes stored frames as one chunk (the reconnect stream's sink).
func (c *sseConn) WriteRaw(frames []agui.RawFrame) error {
	if len(frames) == 0 {
		return nil
	}
	return c.chunk(func(dst []byte) ([]byte, error) { return agui.AppendRawFrames(dst, frames) }, false)
}

// Ping writes the keep-alive comment as one chunk.
func (c *sseConn) Ping() error { return c.write(pingChunk) }

// Start does nothing: the status line went out with the takeover.
func (c *sseConn) Start() error { return nil }

// close ends the stream: a clean end writes the terminating chunk first (unless a write
// failed, which leaves the stream cut), then the connection is closed. Only the first call
// counts.
func (c *sseConn) close(clean bool) {
	c.once.Do(func() {
		close(c.done)
		if clean && !c.broken.Load() && !c.ended.Load() {
			_ = c.write([]byte(lastChunk))
		}
		if tc, ok := c.conn.(interface{ CloseWrite() error }); ok && clean {
			// The FIN goes out before the close, so that the client reads the end of the
			// stream rather than a reset.
			_ = tc.CloseWrite()
		}
		_ = c.conn.Close()
		if c.onClose != nil {
			c.onClose()
		}
		c.streams.remove(c)
	})
}
