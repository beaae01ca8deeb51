package server

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/baton-dev/baton/coordinator"
	"github.com/baton-dev/baton/internal/testutil/stackcount"
	"github.com/baton-dev/baton/telemetry"
)

// hijackServer is a test server whose taken-over streams are tracked in streams. Its
// handler is wrapped as cmd/coordinator wraps it (telemetry.Extract), so that the tests see
// the production chain of wrappers take the connection over.
// Its streams take over at once (TakeOverAfter < 0); hijackServerAfter sets the delay.
func hijackServer(t *testing.T, cfg coordinator.Config) (*httptest.Server, *coordinator.Engine, *Streams) {
	t.Helper()
	return hijackServerAfter(t, cfg, -1, nil)
}

// hijackServerAfter is hijackServer with Config.TakeOverAfter = after; newConn, when set,
// is called for every connection the server accepts.
func hijackServerAfter(t *testing.T, cfg coordinator.Config, after time.Duration, newConn func()) (*httptest.Server, *coordinator.Engine, *Streams) {
	t.Helper()
	e, err := coordinator.New(cfg)
	require.NoError(t, err)
	streams := NewStreams()
	srv := httptest.NewUnstartedServer(telemetry.Extract(New(Config{Engine: e, Streams: streams, TakeOverAfter: after})))
	srv.Config.ConnState = func(_ net.Conn, st http.ConnState) {
		if st == http.StateNew && newConn != nil {
			newConn()
		}
	}
	srv.Start()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		_ = e.Shutdown(ctx)
		_ = streams.Wait(ctx)
		srv.Close()
	})
	return srv, e, streams
}

// openStream posts a run and reads up to its first event (RUN_STARTED).
func openStream(t *testing.T, url, thread string) (*http.Response, *bufio.Reader) {
	t.Helper()
	resp := post(t, url+"/agui", body(thread, "r1", ""))
	require.Equal(t, http.StatusOK, resp.StatusCode)
	br := bufio.NewReader(resp.Body)
	for {
		line, err := br.ReadString('\n')
		require.NoError(t, err)
		if strings.Contains(line, "RUN_STARTED") {
			return resp, br
		}
	}
}

// An open hijacked stream holds one goroutine of the server's: the reader that notices a
// disconnect. net/http's serve goroutine and its background read are gone, and no writer is
// parked while the run produces nothing.
func TestHijackedStreamGoroutines(t *testing.T) {
	srv, e, streams := hijackServer(t, coordinator.Config{Model: blockingModel{}})
	// The client's transport has goroutines of its own (persistConn); they are not
	// counted: only the server's functions are.
	serveBefore := stackcount.Count("net/http.(*conn).serve")
	const n = 3
	for i := range n {
		resp, _ := openStream(t, srv.URL, fmt.Sprintf("g%d", i))
		defer resp.Body.Close()
	}
	require.Equal(t, n, e.Active())
	assert.Equal(t, n, streams.Open(), "every stream took over its connection")
	assert.Equal(t, serveBefore, stackcount.Count("net/http.(*conn).serve"), "no serve goroutine per stream")
	assert.Zero(t, stackcount.Count("net/http.(*connReader).backgroundRead"), "no background read per stream")
	assert.Equal(t, n, stackcount.Count("server.(*sseConn).read"), "one reader per stream")
	// The drain that wrote RUN_STARTED returns once nothing is pending: the client may see
	// the frame a moment before it has returned.
	require.Eventually(t, func() bool { return stackcount.Count("server.(*runStream).drain") == 0 },
		10*time.Second, time.Millisecond, "no writer parked per stream")
	assert.Zero(t, stackcount.Count("server.(*server).stream"), "the net/http stream loop is not used")
}

// The response is chunked and closes its connection; a run that ends ends the stream with
// the terminating chunk (a net/http client reads it without an error).
func TestHijackedStreamCleanEnd(t *testing.T) {
	release := make(chan struct{})
	close(release)
	srv, _, _ := hijackServer(t, coordinator.Config{Model: blockingModel{release: release}})
	resp := post(t, srv.URL+"/agui", body("clean", "r1", ""), "Origin", srv.URL,
		"traceparent", "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01")
	require.Equal(t, http.StatusOK, resp.StatusCode)
	assert.Equal(t, []string{"chunked"}, resp.TransferEncoding)
	assert.True(t, resp.Close, "Connection: close")
	assert.Equal(t, "text/event-stream", resp.Header.Get("Content-Type"))
	assert.Equal(t, "no-cache", resp.Header.Get("Cache-Control"))
	assert.Equal(t, "no", resp.Header.Get("X-Accel-Buffering"))
	assert.NotEmpty(t, resp.Header.Get("Date"))
	b, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	require.NoError(t, err, "a clean end is read to EOF")
	assert.Contains(t, string(b), `"type":"RUN_FINISHED"`)
	assert.True(t, strings.HasPrefix(string(b), "id: 1\ndata: "), "%q", b)

	// On the wire: one chunk per flush, then the last chunk, then the server's close.
	c, err := net.Dial("tcp", srv.Listener.Addr().String())
	require.NoError(t, err)
	defer c.Close()
	req := body("wire", "r1", "")
	_, err = fmt.Fprintf(c, "POST /agui HTTP/1.1\r\nHost: %s\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s", srv.Listener.Addr(), len(req), req)
	require.NoError(t, err)
	raw, err := io.ReadAll(c)
	require.NoError(t, err)
	wire := string(raw)
	assert.True(t, strings.HasPrefix(wire, "HTTP/1.1 200 OK\r\n"), "%q", wire)
	assert.Contains(t, wire, "\r\nTransfer-Encoding: chunked\r\n")
	assert.Contains(t, wire, "\r\nConnection: close\r\n")
	assert.True(t, strings.HasSuffix(wire, "}\n\n\r\n0\r\n\r\n"), "ends with the terminating chunk: %q", wire)
}

// A stream cut by the shutdown's deadline ends without the terminating chunk: the client
// sees an error, not a complete response.
func TestHijackedStreamCutEnd(t *testing.T) {
	srv, _, streams := hijackServer(t, coordinator.Config{Model: blockingModel{}})
	resp, br := openStream(t, srv.URL, "cut")
	defer resp.Body.Close()
	require.Equal(t, 1, streams.Open(), "the stream took over its connection")
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	assert.ErrorIs(t, streams.Wait(ctx), context.Canceled, "the deadline passed with a stream open")
	assert.Zero(t, streams.Open())
	_, err := io.ReadAll(br)
	assert.ErrorIs(t, err, io.ErrUnexpectedEOF, "a cut stream is not read as complete")
}

// A client that goes away is noticed by the reader: the run is cancelled (the existing
// cancel path, server.on_disconnect: cancel) and the stream's goroutines end.
func TestHijackedStreamDisconnectCancelsRun(t *testing.T) {
	srv, e, streams := hijackServer(t, coordinator.Config{Model: blockingModel{}})
	c, err := net.Dial("tcp", srv.Listener.Addr().String())
	require.NoError(t, err)
	req := body("gone", "r1", "")
	_, err = fmt.Fprintf(c, "POST /agui HTTP/1.1\r\nHost: %s\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s", srv.Listener.Addr(), len(req), req)
	require.NoError(t, err)
	br := bufio.NewReader(c)
	for {
		line, err := br.ReadString('\n')
		require.NoError(t, err)
		if strings.Contains(line, "RUN_STARTED") {
			break
		}
	}
	require.Equal(t, 1, e.Active())
	require.Equal(t, 1, streams.Open())
	require.NoError(t, c.Close())
	require.Eventually(t, func() bool { return e.Active() == 0 }, 10*time.Second, time.Millisecond, "the run was cancelled")
	require.NoError(t, streams.Wait(context.Background()), "the stream's goroutines ended")
	assert.Zero(t, stackcount.Count("server.(*sseConn).read"))
}

// At shutdown the runs end and their hijacked streams carry the terminal event out before
// Streams.Wait returns.
func TestShutdownDrainsHijackedStream(t *testing.T) {
	srv, e, streams := hijackServer(t, coordinator.Config{Model: blockingModel{}})
	resp, br := openStream(t, srv.URL, "drain")
	defer resp.Body.Close()
	require.Equal(t, 1, streams.Open(), "the stream took over its connection")
	// The engine's grace ends at once: the run is cancelled and ends with its terminal
	// event, which the stream still carries out.
	gctx, gcancel := context.WithTimeout(context.Background(), time.Millisecond)
	defer gcancel()
	_ = e.Shutdown(gctx)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	require.NoError(t, streams.Wait(ctx), "the stream ended on its own")
	rest, err := io.ReadAll(br)
	require.NoError(t, err, "the stream ended cleanly")
	lines := strings.Split(strings.TrimSpace(string(rest)), "\n")
	last := lines[len(lines)-1]
	assert.Contains(t, last, `"type":"RUN_FINISHED"`, "the terminal event reached the client: %q", rest)
}

// Without a Hijacker (httptest.ResponseRecorder), over HTTP/1.0 and over HTTP/2 the stream
// goes through net/http as before.
func TestStreamFallsBackWithoutHijack(t *testing.T) {
	release := make(chan struct{})
	close(release)
	e, err := coordinator.New(coordinator.Config{Model: blockingModel{release: release}})
	require.NoError(t, err)
	streams := NewStreams()
	h := New(Config{Engine: e, Streams: streams})
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		_ = e.Shutdown(ctx)
	})

	rec := httptest.NewRecorder()
	req := httptest.NewRequest(http.MethodPost, "/agui", strings.NewReader(body("rec", "r1", "")))
	req.Header.Set("Content-Type", "application/json")
	h.ServeHTTP(rec, req)
	assert.Equal(t, http.StatusOK, rec.Code)
	assert.Equal(t, "text/event-stream", rec.Header().Get("Content-Type"))
	assert.Empty(t, rec.Header().Get("Transfer-Encoding"), "net/http frames the response")
	assert.Contains(t, rec.Body.String(), `"type":"RUN_FINISHED"`)

	// HTTP/1.0 has no chunked coding: net/http ends the response by closing.
	h1 := httptest.NewServer(h)
	defer h1.Close()
	c, err := net.Dial("tcp", h1.Listener.Addr().String())
	require.NoError(t, err)
	defer c.Close()
	req10 := body("h10", "r1", "")
	_, err = fmt.Fprintf(c, "POST /agui HTTP/1.0\r\nHost: %s\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s", h1.Listener.Addr(), len(req10), req10)
	require.NoError(t, err)
	raw, err := io.ReadAll(c)
	require.NoError(t, err)
	assert.True(t, strings.HasPrefix(string(raw), "HTTP/1.0 200 OK\r\n"), "%q", raw)
	assert.NotContains(t, string(raw), "Transfer-Encoding")
	assert.True(t, strings.HasSuffix(string(raw), "\n\n"), "frames to the end: %q", raw)
	assert.Contains(t, string(raw), `"type":"RUN_FINISHED"`)

	h2 := httptest.NewUnstartedServer(h)
	h2.EnableHTTP2 = true
	h2.StartTLS()
	defer h2.Close()
	hreq, err := http.NewRequest(http.MethodPost, h2.URL+"/agui", strings.NewReader(body("h2", "r1", "")))
	require.NoError(t, err)
	hreq.Header.Set("Content-Type", "application/json")
	resp, err := h2.Client().Do(hreq)
	require.NoError(t, err)
	assert.Equal(t, 2, resp.ProtoMajor)
	evs := readEvents(t, resp)
	require.NotEmpty(t, evs)
	assert.Equal(t, "RUN_FINISHED", evs[len(evs)-1]["type"])
}
