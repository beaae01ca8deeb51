package a2a

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httputil"
	"sync"
	"time"
)

// directConn is a connection of the direct path. While a request is written it counts
// the bytes that reached the connection (a failed write of nothing may be retried);
// while a response header is read it bounds the bytes read.
type directConn struct {
	conn    net.Conn
	addr    string
	written int64
	left    int64 // bytes the header may still take; < 0: no limit (the body)

	// Idle state, under the transport's mu.
	idleSince time.Time
	idleTimer *time.Timer
}

func (pc *directConn) Write(p []byte) (int, error) {
	n, err := pc.conn.Write(p)
	pc.written += int64(n)
	return n, err
}

func (pc *directConn) Read(p []byte) (int, error) {
	if pc.left >= 0 {
		if pc.left == 0 {
			return 0, errStreamHeaderTooLarge
		}
		if int64(len(p)) > pc.left {
			p = p[:pc.left]
		}
	}
	n, err := pc.conn.Read(p)
	if pc.left >= 0 {
		pc.left -= int64(n)
	}
	return n, err
}

func (pc *directConn) stopIdleTimer() {
	if pc.idleTimer != nil {
		pc.idleTimer.Stop()
	}
}

// writerPool recycles the write buffers of the direct path: a buffer is held only while
// a request is written.
var writerPool = sync.Pool{New: func() any { return bufio.NewWriterSize(nil, directWriteBuffer) }}

// exchange writes req on pc and reads the response header. The request's context closes
// the connection when it ends (context.AfterFunc: nothing waits for it), which unblocks
// a write or read in progress. The connection's read buffer comes from readerPool (the
// SSE reader's pool: same size) and goes back when the body is done.
func (t *StreamTransport) exchange(ctx context.Context, pc *directConn, req *http.Request) (*http.Response, error) {
	pc.written = 0
	pc.left = -1
	stop := context.AfterFunc(ctx, func() { _ = pc.conn.Close() })
	bw := writerPool.Get().(*bufio.Writer)
	bw.Reset(pc)
	err := req.Write(bw)
	if err == nil {
		err = bw.Flush()
	}
	bw.Reset(nil)
	writerPool.Put(bw)
	if err != nil {
		stop()
		_ = pc.conn.Close()
		return nil, ctxErr(ctx, err)
	}
	br := readerPool.Get().(*bufio.Reader)
	br.Reset(pc)
	pc.left = t.maxHeader
	resp, err := readResponse(br, req)
	pc.left = -1
	if err != nil {
		stop()
		_ = pc.conn.Close()
		br.Reset(nil)
		readerPool.Put(br)
		if errors.Is(err, errStreamHeaderTooLarge) {
			err = fmt.Errorf("%w (%d bytes)", errStreamHeaderTooLarge, t.maxHeader)
		}
		return nil, ctxErr(ctx, err)
	}
	b := &directBody{t: t, ctx: ctx, pc: pc, br: br, stop: stop,
		keep: !resp.Close && !req.Close && t.maxIdle > 0}
	if resp.Body == http.NoBody {
		b.mu.Lock()
		b.finish(b.keep)
		b.mu.Unlock()
		return resp, nil
	}
	// The body is read from br directly, not through the body ReadResponse made (never
	// read, dropped here): that one holds the response and through it the request for
	// the stream's whole life, to fill in trailers nobody reads here.
	b.src, b.chunked = bodyReader(resp, br)
	resp.Body = b
	return resp, nil
}

// bodyReader returns the reader of resp's body on br: net/http's chunked decoding, a read
// of Content-Length bytes, or everything up to the close.
func bodyReader(resp *http.Response, br *bufio.Reader) (src io.Reader, chunked bool) {
	switch {
	case len(resp.TransferEncoding) > 0 && resp.TransferEncoding[0] == "chunked":
		return httputil.NewChunkedReader(br), true
	case resp.ContentLength >= 0:
		return &lengthReader{r: br, left: resp.ContentLength}, false
	default:
		return br, false
	}
}

// lengthReader reads a body of a known length; a connection that ends before is an
// io.ErrUnexpectedEOF, as net/http reports it.
type lengthReader struct {
	r    io.Reader
	left int64
}

func (l *lengthReader) Read(p []byte) (int, error) {
	if l.left <= 0 {
		return 0, io.EOF
	}
	if int64(len(p)) > l.left {
		p = p[:l.left]
	}
	n, err := l.r.Read(p)
	l.left -= int64(n)
	if errors.Is(err, io.EOF) && l.left > 0 {
		err = io.ErrUnexpectedEOF
	}
	if err == nil && l.left == 0 {
		err = io.EOF
	}
	return n, err
}

// maxTrailer bounds the trailer section read after a chunked body.
const maxTrailer = 16 << 10

// skipTrailer reads the trailer section after the last chunk (trailers are not used),
// so that the connection is at the next response.
func skipTrailer(br *bufio.Reader) error {
	read := 0
	for {
		line, err := br.ReadSlice('\n')
		read += len(line)
		if err != nil {
			return err
		}
		if read > maxTrailer {
			return errors.New("the chunked body's trailer is larger than the limit")
		}
		if len(line) == 1 || (len(line) == 2 && line[0] == '\r') {
			return nil
		}
	}
}

// readResponse reads the final response header, skipping informational (1xx) ones; all of
// them together are bounded by the connection's header limit.
func readResponse(br *bufio.Reader, req *http.Request) (*http.Response, error) {
	for {
		resp, err := http.ReadResponse(br, req)
		if err != nil {
			return nil, err
		}
		switch {
		case resp.StatusCode == http.StatusSwitchingProtocols:
			return nil, errors.New("the agent switched protocols on a request that asked for no upgrade")
		case resp.StatusCode >= 100 && resp.StatusCode < 200:
			continue
		}
		return resp, nil
	}
}

// ctxErr is the context's error when it ended (the connection was closed for it), err
// otherwise.
func ctxErr(ctx context.Context, err error) error {
	if cerr := ctx.Err(); cerr != nil {
		return cerr
	}
	return err
}

// directBody is the body of a direct response. It releases everything once the stream is
// done: read to its end (the connection goes back to the idle pool when the response
// allows it and the cancel hook was stopped before it ran), failed, or closed (the
// connection is closed: an unfinished stream is not drained). Close may be called while
// a Read is blocked: it closes the connection, and the Read releases the rest.
type directBody struct {
	t    *StreamTransport
	ctx  context.Context
	stop func() bool
	keep bool

	mu      sync.Mutex
	pc      *directConn
	br      *bufio.Reader
	src     io.Reader
	chunked bool
	reading bool
	closed  bool
	done    bool
	err     error
}

// Read implements io.Reader.
func (b *directBody) Read(p []byte) (int, error) {
	b.mu.Lock()
	switch {
	case b.closed:
		b.mu.Unlock()
		return 0, errStreamBodyClosed
	case b.done:
		err := b.err
		b.mu.Unlock()
		return 0, err
	}
	b.reading = true
	src, br, chunked := b.src, b.br, b.chunked
	b.mu.Unlock()
	n, err := src.Read(p)
	reuse := true
	if err == io.EOF && chunked {
		reuse = skipTrailer(br) == nil
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	b.reading = false
	switch {
	case err == io.EOF:
		b.err = err
		b.finish(reuse && b.keep && !b.closed)
	case err != nil:
		err = ctxErr(b.ctx, err)
		b.err = err
		b.finish(false)
	case b.closed:
		b.finish(false)
	}
	return n, err
}

// Close implements io.Closer.
func (b *directBody) Close() error {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed {
		return nil
	}
	b.closed = true
	switch {
	case b.done:
	case b.reading:
		_ = b.pc.conn.Close() // the blocked Read returns and releases
	default:
		b.finish(false)
	}
	return nil
}

// finish releases the exchange (b.mu held, no Read in progress): the connection goes to
// the idle pool if reuse is allowed, nothing is left buffered and the cancel hook did not
// run, and is closed otherwise; the read buffer goes back to its pool.
func (b *directBody) finish(reuse bool) {
	if b.done {
		return
	}
	b.done = true
	if b.err == nil {
		b.err = io.EOF
	}
	stopped := b.stop()
	if reuse && stopped && b.br.Buffered() == 0 {
		b.t.putIdle(b.pc)
	} else {
		_ = b.pc.conn.Close()
	}
	b.br.Reset(nil)
	readerPool.Put(b.br)
	b.pc, b.br, b.src, b.ctx = nil, nil, nil, nil
}

// getIdle takes the most recently used idle connection to addr that is still alive.
func (t *StreamTransport) getIdle(addr string) *directConn {
	for {
		t.mu.Lock()
		list := t.idle[addr]
		if len(list) == 0 {
			t.mu.Unlock()
			return nil
		}
		pc := list[len(list)-1]
		list[len(list)-1] = nil
		if len(list) == 1 {
			delete(t.idle, addr)
		} else {
			t.idle[addr] = list[:len(list)-1]
		}
		expired := t.idleTimeout > 0 && time.Since(pc.idleSince) >= t.idleTimeout
		t.mu.Unlock()
		pc.stopIdleTimer()
		if !expired && connAlive(pc.conn) {
			return pc
		}
		_ = pc.conn.Close()
	}
}

// putIdle pools pc, or closes it when the pool of its host is full.
func (t *StreamTransport) putIdle(pc *directConn) {
	t.mu.Lock()
	if len(t.idle[pc.addr]) >= t.maxIdle {
		t.mu.Unlock()
		_ = pc.conn.Close()
		return
	}
	t.idle[pc.addr] = append(t.idle[pc.addr], pc)
	pc.idleSince = time.Now()
	if t.idleTimeout > 0 {
		if pc.idleTimer == nil {
			pc.idleTimer = time.AfterFunc(t.idleTimeout, func() { t.expire(pc) })
		} else {
			pc.idleTimer.Reset(t.idleTimeout)
		}
	}
	t.mu.Unlock()
}

// expire closes pc if it is still idle and has been for the idle timeout (a timer of an
// earlier idle period may fire late: it finds pc in use, or idle too briefly).
func (t *StreamTransport) expire(pc *directConn) {
	t.mu.Lock()
	list := t.idle[pc.addr]
	i := -1
	for j, c := range list {
		if c == pc {
			i = j
			break
		}
	}
	if i < 0 || time.Since(pc.idleSince) < t.idleTimeout {
		t.mu.Unlock()
		return
	}
	copy(list[i:], list[i+1:])
	list[len(list)-1] = nil
	if len(list) == 1 {
		delete(t.idle, pc.addr)
	} else {
		t.idle[pc.addr] = list[:len(list)-1]
	}
	t.mu.Unlock()
	_ = pc.conn.Close()
}
