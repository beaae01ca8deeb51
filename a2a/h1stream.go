package a2a

import (
	"context"
	"errors"
	"net"
	"net/http"
	"strings"
	"sync"
	"time"
)

// Defaults of the direct HTTP/1.1 stream path (design/lean-transport.md).
const (
	// directWriteBuffer is the pooled buffer a request is written through.
	directWriteBuffer = 1024
	// defaultMaxStreamHeader bounds a stream's response header when the inner transport
	// sets no MaxResponseHeaderBytes.
	defaultMaxStreamHeader = 1 << 20
)

// errStreamHeaderTooLarge: the agent's response header exceeded the limit.
var errStreamHeaderTooLarge = errors.New("the agent's response header is larger than the limit")

// errStreamBodyClosed is a read on a stream body after Close (net/http's text).
var errStreamBodyClosed = errors.New("http: read on closed response body")

// streamRequestKey marks a request's context as an SSE stream that may go direct.
type streamRequestKey struct{}

// withStreamRequest marks ctx for the direct path of a [StreamTransport].
func withStreamRequest(ctx context.Context) context.Context {
	return context.WithValue(ctx, streamRequestKey{}, true)
}

func isStreamRequest(ctx context.Context) bool {
	v, _ := ctx.Value(streamRequestKey{}).(bool)
	return v
}

// StreamTransport is an http.RoundTripper for the agents' client: the streams of package
// a2a (SendStreamingMessage, SubscribeToTask) to plain http:// agents without a proxy are
// exchanged on connections it owns and read in the caller's goroutine, without net/http's
// per-connection read and write goroutines and buffers; everything else (other calls,
// https, proxies, Expect: 100-continue, upgrades) goes to the inner transport unchanged.
// Put it at the bottom of the client's chain, so that the wrappers above it (headers,
// tracing) and the client's redirect policy apply to both paths. Use NewStreamTransport.
type StreamTransport struct {
	inner       *http.Transport
	dial        func(ctx context.Context, network, addr string) (net.Conn, error)
	maxHeader   int64
	maxIdle     int
	idleTimeout time.Duration

	mu   sync.Mutex
	idle map[string][]*directConn // per host:port, most recently used last
}

// NewStreamTransport returns a StreamTransport over inner (nil: [NewHTTPTransport]). The
// direct path dials with inner's DialContext (so a dial guard applies), and takes inner's
// MaxResponseHeaderBytes (default 1 MiB), MaxIdleConnsPerHost (default 2, negative: no
// reuse), IdleConnTimeout and DisableKeepAlives.
func NewStreamTransport(inner *http.Transport) *StreamTransport {
	if inner == nil {
		inner = NewHTTPTransport()
	}
	t := &StreamTransport{inner: inner, maxHeader: inner.MaxResponseHeaderBytes, idleTimeout: inner.IdleConnTimeout, idle: map[string][]*directConn{}}
	switch {
	case inner.DialContext != nil:
		t.dial = inner.DialContext
	//lint:ignore SA1019 a caller's deprecated Dial is honoured, as net/http honours it
	case inner.Dial != nil:
		//lint:ignore SA1019 a caller's deprecated Dial is honoured, as net/http honours it
		t.dial = func(_ context.Context, network, addr string) (net.Conn, error) { return inner.Dial(network, addr) }
	default:
		t.dial = (&net.Dialer{Timeout: 30 * time.Second, KeepAlive: 30 * time.Second}).DialContext
	}
	if t.maxHeader <= 0 {
		t.maxHeader = defaultMaxStreamHeader
	}
	switch n := inner.MaxIdleConnsPerHost; {
	case inner.DisableKeepAlives || n < 0:
		t.maxIdle = 0
	case n == 0:
		t.maxIdle = http.DefaultMaxIdleConnsPerHost
	default:
		t.maxIdle = n
	}
	return t
}

// RoundTrip implements http.RoundTripper.
func (t *StreamTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	if !t.direct(req) {
		return t.inner.RoundTrip(req)
	}
	return t.roundTripDirect(req)
}

// direct reports whether req takes the direct path: a marked stream over plain HTTP/1.1
// with nothing net/http would have to negotiate (TLS and HTTP/2, a proxy, 100-continue,
// a protocol upgrade).
func (t *StreamTransport) direct(req *http.Request) bool {
	if !isStreamRequest(req.Context()) || req.URL == nil || req.URL.Scheme != "http" || req.URL.Host == "" {
		return false
	}
	if hasToken(req.Header, "Expect", "100-continue") || req.Header.Get("Upgrade") != "" || hasToken(req.Header, "Connection", "upgrade") {
		return false
	}
	if t.inner.Proxy != nil {
		if u, err := t.inner.Proxy(req); err != nil || u != nil {
			return false // the inner transport reports the error or uses the proxy
		}
	}
	return true
}

// hasToken reports whether a comma-separated header field holds token (case-insensitive).
func hasToken(h http.Header, key, token string) bool {
	for _, v := range h.Values(key) {
		for f := range strings.SplitSeq(v, ",") {
			if strings.EqualFold(strings.TrimSpace(f), token) {
				return true
			}
		}
	}
	return false
}

// CloseIdleConnections closes the idle connections of both paths.
func (t *StreamTransport) CloseIdleConnections() {
	t.closeDirectIdle()
	t.inner.CloseIdleConnections()
}

// closeDirectIdle closes the idle connections of the direct path.
func (t *StreamTransport) closeDirectIdle() {
	t.mu.Lock()
	idle := t.idle
	t.idle = map[string][]*directConn{}
	t.mu.Unlock()
	for _, conns := range idle {
		for _, pc := range conns {
			pc.stopIdleTimer()
			_ = pc.conn.Close()
		}
	}
}

// Unwrap returns the inner transport.
func (t *StreamTransport) Unwrap() http.RoundTripper { return t.inner }

// hostPort is the pool key and dial address of u: host:port, port 80 by default.
func hostPort(host string) string {
	if _, _, err := net.SplitHostPort(host); err == nil {
		return host
	}
	return net.JoinHostPort(strings.Trim(host, "[]"), "80")
}

// roundTripDirect makes the exchange on a pooled or new connection. A pooled connection
// found dead before anything was written is replaced by a new one; so is one whose write
// failed before a byte reached it, when the body can be replayed.
func (t *StreamTransport) roundTripDirect(req *http.Request) (*http.Response, error) {
	ctx := req.Context()
	addr := hostPort(req.URL.Host)
	for retried := false; ; retried = true {
		pc := t.getIdle(addr)
		reused := pc != nil
		if pc == nil {
			conn, err := t.dial(ctx, "tcp", addr)
			if err != nil {
				closeBody(req)
				return nil, err
			}
			pc = &directConn{conn: conn, addr: addr}
		}
		resp, err := t.exchange(ctx, pc, req)
		if err == nil || !reused || retried || pc.written > 0 || ctx.Err() != nil {
			return resp, err
		}
		next, ok := rewind(req)
		if !ok {
			return nil, err
		}
		req = next
	}
}

// rewind returns req with a fresh body for a second attempt.
func rewind(req *http.Request) (*http.Request, bool) {
	if req.Body == nil || req.Body == http.NoBody {
		return req, true
	}
	if req.GetBody == nil {
		return nil, false
	}
	body, err := req.GetBody()
	if err != nil {
		return nil, false
	}
	cp := *req
	cp.Body = body
	return &cp, true
}

func closeBody(req *http.Request) {
	if req.Body != nil {
		_ = req.Body.Close()
	}
}
