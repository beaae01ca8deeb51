package a2a

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/baton-dev/baton/internal/testutil/benchagent"
	"github.com/baton-dev/baton/internal/testutil/stackcount"
)

// netHTTPConnLoops are the goroutines net/http keeps per client connection.
var netHTTPConnLoops = []string{"net/http.(*persistConn).readLoop", "net/http.(*persistConn).writeLoop"}

// directFrames are the frames of the direct path: none may be left once streams ended.
var directFrames = []string{"baton/a2a.(*directBody)", "baton/a2a.(*StreamTransport)", "baton/a2a.(*directConn)"}

// eventually waits for cond, failing after a generous bound (a condition that never
// holds is the failure; how long it takes is not asserted).
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("never happened: %s", what)
		}
		time.Sleep(time.Millisecond)
	}
}

// sseHandler writes events, flushing each; hold keeps the stream open until the request
// ends (the handler reports that on gone).
func sseHandler(events []string, hold bool, gone chan<- struct{}) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "text/event-stream")
		for _, e := range events {
			fmt.Fprintf(w, "data: %s\n\n", e)
			w.(http.Flusher).Flush()
		}
		if hold {
			<-r.Context().Done()
			if gone != nil {
				gone <- struct{}{}
			}
		}
	}
}

// streamPost makes a marked stream request through hc.
func streamPost(ctx context.Context, hc *http.Client, url string) (*http.Response, error) {
	req, err := http.NewRequestWithContext(withStreamRequest(ctx), http.MethodPost, url, strings.NewReader(`{"x":1}`))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Accept", "text/event-stream")
	return hc.Do(req)
}

// readEvents reads the SSE events of a body to its end.
func readEvents(t *testing.T, body io.Reader) []string {
	t.Helper()
	var got []string
	for data, err := range readSSE(body, maxSSEEvent) {
		require.NoError(t, err)
		got = append(got, string(data))
	}
	return got
}

// countingServer is an httptest server that counts the connections it accepted.
func countingServer(t *testing.T, h http.Handler) (*httptest.Server, *atomic.Int64) {
	srv := httptest.NewUnstartedServer(h)
	var conns atomic.Int64
	srv.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateNew {
			conns.Add(1)
		}
	}
	srv.Start()
	t.Cleanup(srv.Close)
	return srv, &conns
}

// A stream is read whole, chunked or close-delimited, on the direct path; after a
// complete chunked stream the connection is reused, after a close-delimited one it is not.
func TestStreamTransportBodies(t *testing.T) {
	const whole = "data: one\n\ndata: two\n\ndata: {\"three\":3}\n\n"
	for _, tc := range []struct {
		name      string
		identity  bool
		trailer   bool
		length    bool
		wantConns int64
	}{
		{name: "chunked", wantConns: 1},
		{name: "chunked with trailer", trailer: true, wantConns: 1},
		{name: "content-length", length: true, wantConns: 1},
		{name: "close-delimited", identity: true, wantConns: 3},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := sseHandler([]string{"one", "two", `{"three":3}`}, false, nil)
			srv, conns := countingServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				switch {
				case tc.identity: // net/http's server then ends the body by closing
					w.Header().Set("Transfer-Encoding", "identity")
				case tc.trailer:
					w.Header().Set("Trailer", "X-Checksum")
					defer w.Header().Set("X-Checksum", "abc")
				case tc.length:
					_, _ = io.Copy(io.Discard, r.Body)
					w.Header().Set("Content-Length", fmt.Sprint(len(whole)))
					_, _ = io.WriteString(w, whole)
					return
				}
				h(w, r)
			}))
			st := NewStreamTransport(nil)
			defer st.CloseIdleConnections()
			hc := &http.Client{Transport: st}
			for range 3 {
				resp, err := streamPost(context.Background(), hc, srv.URL)
				require.NoError(t, err)
				assert.Equal(t, tc.identity, resp.Close, "close-delimited")
				assert.Equal(t, []string{"one", "two", `{"three":3}`}, readEvents(t, resp.Body))
				require.NoError(t, resp.Body.Close())
			}
			assert.Equal(t, tc.wantConns, conns.Load(), "connections accepted")
		})
	}
}

// Open streams on the direct path hold none of net/http's connection goroutines; the same
// streams unmarked (net/http's path) hold two each, which shows the count can see them.
func TestStreamTransportNoConnGoroutines(t *testing.T) {
	const n = 5
	gone := make(chan struct{}, 2*n)
	srv, _ := countingServer(t, sseHandler([]string{"first"}, true, gone))
	st := NewStreamTransport(nil)
	defer st.CloseIdleConnections()
	hc := &http.Client{Transport: st}
	open := func(mark bool) func() {
		ctx, cancel := context.WithCancel(context.Background())
		var bodies []io.Closer
		for range n {
			req, err := http.NewRequestWithContext(ctx, http.MethodPost, srv.URL, http.NoBody)
			require.NoError(t, err)
			if mark {
				req = req.WithContext(withStreamRequest(ctx))
			}
			resp, err := hc.Do(req)
			require.NoError(t, err)
			for data, err := range readSSE(resp.Body, maxSSEEvent) {
				require.NoError(t, err)
				require.Equal(t, "first", string(data))
				break
			}
			bodies = append(bodies, resp.Body)
		}
		return func() {
			cancel()
			for _, b := range bodies {
				_ = b.Close()
				<-gone
			}
		}
	}
	before := stackcount.Count(netHTTPConnLoops...)
	end := open(true)
	direct := stackcount.Count(netHTTPConnLoops...) - before
	end()
	end = open(false)
	viaNetHTTP := stackcount.Count(netHTTPConnLoops...) - before
	end()
	assert.LessOrEqual(t, direct, 0, "net/http connection goroutines for direct streams")
	assert.GreaterOrEqual(t, viaNetHTTP, 2*n, "net/http connection goroutines for unmarked streams")
}

// Through an Agent and the benchmark agent: the default client streams on the direct
// path, and a canceled delegation releases its connection and leaves no goroutine.
func TestStreamTransportAgentCancel(t *testing.T) {
	srv, _ := countingServer(t, nil)
	agent := benchagent.New(srv.URL, benchagent.Options{Hold: true, Chunks: []string{"first chunk"}})
	srv.Config.Handler = agent
	defer agent.Release()
	ag, err := Resolve(context.Background(), AgentConfig{Name: "bench", URL: srv.URL}, Options{Logger: slog.New(slog.DiscardHandler)})
	require.NoError(t, err)
	defer ag.Close()

	before := stackcount.Count(netHTTPConnLoops...)
	const n = 4
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	started := make(chan struct{}, n)
	errs := make(chan error, n)
	for range n {
		wg.Go(func() {
			var once sync.Once
			_, err := ag.Send(ctx, Request{Prompt: "go"}, Observer{Text: func(string) { once.Do(func() { started <- struct{}{} }) }})
			errs <- err
		})
	}
	for range n {
		<-started
	}
	assert.LessOrEqual(t, stackcount.Count(netHTTPConnLoops...)-before, 0, "net/http connection goroutines for open delegations")
	assert.Positive(t, stackcount.Count("baton/a2a.(*directBody).Read"), "streams read on the direct path")
	cancel()
	wg.Wait()
	for range n {
		assert.ErrorIs(t, <-errs, context.Canceled)
	}
	eventually(t, "the agent saw every stream end", func() bool {
		return stackcount.Count("benchagent.(*Agent).ServeHTTP") == 0
	})
	// The cancel's AfterFunc (which closes the connection) runs on a goroutine of its own
	// and may still be returning when Send has.
	eventually(t, "no goroutine left on the direct path", func() bool { return stackcount.Count(directFrames...) == 0 })
	st := ag.http.Transport.(*recordingTransport).base.(*StreamTransport)
	st.mu.Lock()
	assert.Empty(t, st.idle, "a canceled stream's connection is not pooled")
	st.mu.Unlock()
}

// Canceling the context unblocks a Read waiting for the next event at once (the
// connection is closed), the read reports the cancellation, and the server sees the end.
func TestStreamTransportCancelMidStream(t *testing.T) {
	gone := make(chan struct{}, 1)
	srv, _ := countingServer(t, sseHandler([]string{"first"}, true, gone))
	st := NewStreamTransport(nil)
	defer st.CloseIdleConnections()
	ctx, cancel := context.WithCancel(context.Background())
	resp, err := streamPost(ctx, &http.Client{Transport: st}, srv.URL)
	require.NoError(t, err)
	buf := make([]byte, 64)
	n, err := resp.Body.Read(buf)
	require.NoError(t, err)
	require.Contains(t, string(buf[:n]), "first")
	read := make(chan error, 1)
	go func() {
		_, err := resp.Body.Read(buf)
		read <- err
	}()
	cancel()
	assert.ErrorIs(t, <-read, context.Canceled)
	<-gone
	require.NoError(t, resp.Body.Close())
	_, err = resp.Body.Read(buf)
	assert.Error(t, err, "read after close")
	eventually(t, "no goroutine left on the direct path", func() bool { return stackcount.Count(directFrames...) == 0 })
}

// Close while a Read is blocked unblocks the Read.
func TestStreamTransportCloseDuringRead(t *testing.T) {
	gone := make(chan struct{}, 1)
	srv, _ := countingServer(t, sseHandler([]string{"first"}, true, gone))
	st := NewStreamTransport(nil)
	resp, err := streamPost(context.Background(), &http.Client{Transport: st}, srv.URL)
	require.NoError(t, err)
	buf := make([]byte, 64)
	_, err = resp.Body.Read(buf)
	require.NoError(t, err)
	read := make(chan error, 1)
	go func() {
		_, err := resp.Body.Read(buf)
		read <- err
	}()
	eventually(t, "the read blocks", func() bool { return stackcount.Count("baton/a2a.(*directBody).Read") == 1 })
	require.NoError(t, resp.Body.Close())
	assert.Error(t, <-read)
	<-gone
}

// A pooled connection the server closed while idle is found dead before the next request
// is written, and the request goes on a new connection.
func TestStreamTransportDeadPooledConn(t *testing.T) {
	srv, conns := countingServer(t, sseHandler([]string{"one"}, false, nil))
	st := NewStreamTransport(nil)
	defer st.CloseIdleConnections()
	hc := &http.Client{Transport: st}
	resp, err := streamPost(context.Background(), hc, srv.URL)
	require.NoError(t, err)
	assert.Equal(t, []string{"one"}, readEvents(t, resp.Body))
	require.NoError(t, resp.Body.Close())

	st.mu.Lock()
	require.Len(t, st.idle, 1, "the connection is pooled")
	var pooled *directConn
	for _, l := range st.idle {
		pooled = l[0]
	}
	st.mu.Unlock()
	srv.CloseClientConnections()
	eventually(t, "the client side sees the close", func() bool { return !connAlive(pooled.conn) })

	resp, err = streamPost(context.Background(), hc, srv.URL)
	require.NoError(t, err)
	assert.Equal(t, []string{"one"}, readEvents(t, resp.Body))
	require.NoError(t, resp.Body.Close())
	assert.Equal(t, int64(2), conns.Load(), "connections accepted")
}

// A redirect within the origin is followed on the direct path (the client's policy
// applies above the transport), one to another origin is refused.
func TestStreamTransportRedirect(t *testing.T) {
	other := httptest.NewServer(sseHandler([]string{"elsewhere"}, false, nil))
	defer other.Close()
	var paths []string
	var mu sync.Mutex
	mux := http.NewServeMux()
	mux.HandleFunc("/a", func(w http.ResponseWriter, r *http.Request) { http.Redirect(w, r, "/b", http.StatusTemporaryRedirect) })
	mux.HandleFunc("/b", sseHandler([]string{"moved"}, false, nil))
	mux.HandleFunc("/away", func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, other.URL+"/x", http.StatusTemporaryRedirect)
	})
	srv, conns := countingServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		paths = append(paths, r.URL.Path)
		mu.Unlock()
		mux.ServeHTTP(w, r)
	}))
	home, err := newOriginSet(srv.URL)
	require.NoError(t, err)
	hc, release := newHTTPClient(nil, nil, home, slog.New(slog.DiscardHandler))
	defer release()

	resp, err := streamPost(context.Background(), hc, srv.URL+"/a")
	require.NoError(t, err)
	assert.Equal(t, []string{"moved"}, readEvents(t, resp.Body))
	require.NoError(t, resp.Body.Close())
	assert.Equal(t, []string{"/a", "/b"}, paths)
	assert.Equal(t, int64(1), conns.Load(), "both hops on one direct connection")

	_, err = streamPost(context.Background(), hc, srv.URL+"/away")
	assert.ErrorIs(t, err, errRedirect)
}

// https goes to the inner transport, which negotiates HTTP/2.
func TestStreamTransportHTTPSInner(t *testing.T) {
	srv := httptest.NewUnstartedServer(sseHandler([]string{"tls"}, false, nil))
	srv.EnableHTTP2 = true
	srv.StartTLS()
	defer srv.Close()
	inner := NewHTTPTransport()
	inner.TLSClientConfig = srv.Client().Transport.(*http.Transport).TLSClientConfig
	st := NewStreamTransport(inner)
	defer st.CloseIdleConnections()
	resp, err := streamPost(context.Background(), &http.Client{Transport: st}, srv.URL)
	require.NoError(t, err)
	assert.Equal(t, 2, resp.ProtoMajor, "HTTP/2 negotiated by net/http")
	_, direct := resp.Body.(*directBody)
	assert.False(t, direct)
	assert.Equal(t, []string{"tls"}, readEvents(t, resp.Body))
	require.NoError(t, resp.Body.Close())
}

// A response header over the inner transport's MaxResponseHeaderBytes fails the request.
func TestStreamTransportHeaderLimit(t *testing.T) {
	srv, _ := countingServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("X-Big", strings.Repeat("x", 8<<10))
		sseHandler([]string{"one"}, false, nil)(w, r)
	}))
	inner := NewHTTPTransport()
	inner.MaxResponseHeaderBytes = 4 << 10
	st := NewStreamTransport(inner)
	_, err := streamPost(context.Background(), &http.Client{Transport: st}, srv.URL)
	require.Error(t, err)
	assert.True(t, errors.Is(err, errStreamHeaderTooLarge), "got %v", err)
}

// A caller's bare *http.Transport gets a direct pool private to the agent: a finished
// stream's connection is pooled there, and Agent.Close closes it (the caller's transport
// is left alone).
func TestStreamTransportCallerTransport(t *testing.T) {
	srv := httptest.NewUnstartedServer(nil)
	var closed atomic.Int64
	srv.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateClosed {
			closed.Add(1)
		}
	}
	srv.Start()
	defer srv.Close()
	srv.Config.Handler = benchagent.New(srv.URL, benchagent.Options{Chunks: []string{"done"}})
	tr := &http.Transport{MaxIdleConnsPerHost: 8}
	defer tr.CloseIdleConnections()
	ag, err := Resolve(context.Background(), AgentConfig{Name: "bench", URL: srv.URL}, Options{HTTPClient: &http.Client{Transport: tr}, Logger: slog.New(slog.DiscardHandler)})
	require.NoError(t, err)
	res, err := ag.Send(context.Background(), Request{Prompt: "go"}, Observer{})
	require.NoError(t, err)
	assert.Equal(t, StateCompleted, res.State)

	st, ok := ag.http.Transport.(*recordingTransport).base.(*StreamTransport)
	require.True(t, ok, "the caller's transport is wrapped")
	assert.Same(t, tr, st.inner)
	st.mu.Lock()
	pooled := len(st.idle[hostPort(strings.TrimPrefix(srv.URL, "http://"))])
	st.mu.Unlock()
	assert.Equal(t, 1, pooled, "the stream's connection is pooled")
	before := closed.Load()
	require.NoError(t, ag.Close())
	eventually(t, "the server sees the pooled connection closed", func() bool { return closed.Load() > before })
	st.mu.Lock()
	assert.Empty(t, st.idle)
	st.mu.Unlock()
}

// Informational responses (103 Early Hints) before the final one are skipped.
func TestStreamTransportInformational(t *testing.T) {
	h := sseHandler([]string{"after hints"}, false, nil)
	srv, _ := countingServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Link", "</style.css>; rel=preload")
		w.WriteHeader(http.StatusEarlyHints)
		h(w, r)
	}))
	st := NewStreamTransport(nil)
	defer st.CloseIdleConnections()
	resp, err := streamPost(context.Background(), &http.Client{Transport: st}, srv.URL)
	require.NoError(t, err)
	assert.Equal(t, http.StatusOK, resp.StatusCode)
	_, direct := resp.Body.(*directBody)
	assert.True(t, direct, "read on the direct path")
	assert.Equal(t, []string{"after hints"}, readEvents(t, resp.Body))
	require.NoError(t, resp.Body.Close())
}
