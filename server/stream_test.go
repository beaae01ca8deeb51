package server

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"iter"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/baton-dev/baton/coordinator"
	"github.com/baton-dev/baton/llm"
	"github.com/baton-dev/baton/store"
)

// floodModel streams total bytes of fresh text (every delta a new allocation, as from a
// real provider) when the user says "flood", and a short answer otherwise.
type floodModel struct {
	total, chunk int
	// produced counts the bytes handed to the engine, across runs.
	produced *atomic.Int64
}

func (m floodModel) Stream(ctx context.Context, req *llm.Request) iter.Seq2[llm.Delta, error] {
	return func(yield func(llm.Delta, error) bool) {
		if last := req.Messages[len(req.Messages)-1]; last.Content != "flood" {
			if yield(llm.Delta{Text: "small answer"}, nil) {
				yield(llm.Delta{Done: &llm.Completion{FinishReason: llm.FinishStop}}, nil)
			}
			return
		}
		for sent := 0; sent < m.total; sent += m.chunk {
			if ctx.Err() != nil {
				yield(llm.Delta{}, ctx.Err())
				return
			}
			m.produced.Add(int64(m.chunk))
			if !yield(llm.Delta{Text: strings.Repeat("x", m.chunk)}, nil) {
				return
			}
		}
		yield(llm.Delta{Done: &llm.Completion{FinishReason: llm.FinishStop}}, nil)
	}
}

// offHeapLog is a memory store whose event log and thread messages are written away, as
// to a disk: the writes cost what they cost, the contents do not stay in this heap.
type offHeapLog struct{ store.Store }

func (offHeapLog) AppendEvents(context.Context, string, string, int64, []store.Event) error {
	return nil
}

// SaveRunLog keeps the work document and writes the events away, as AppendEvents does.
func (o offHeapLog) SaveRunLog(ctx context.Context, threadID, runID string, epoch int64, _ []store.Event, work json.RawMessage) error {
	return o.Store.SaveRunLog(ctx, threadID, runID, epoch, nil, work)
}
func (offHeapLog) SaveMessages(context.Context, string, []store.Message) error { return nil }

// smallSendBuffer shrinks the kernel send buffer of every accepted connection, so that a
// client that reads nothing is felt by the writer after kilobytes, not megabytes. It counts
// the connections the server closes in closed.
type smallSendBuffer struct {
	net.Listener
	closed *atomic.Int64
}

func (l smallSendBuffer) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return c, err
	}
	if tc, ok := c.(*net.TCPConn); ok {
		_ = tc.SetWriteBuffer(8 << 10)
	}
	return &countedConn{Conn: c, closed: l.closed}, nil
}

// countedConn counts its first Close.
type countedConn struct {
	net.Conn
	once   sync.Once
	closed *atomic.Int64
}

func (c *countedConn) Close() error {
	c.once.Do(func() { c.closed.Add(1) })
	return c.Conn.Close()
}

// stuckClient posts a run and never reads the response. Its receive buffer is small, so
// the server's writes back up.
func stuckClient(t testing.TB, addr, thread string) net.Conn {
	t.Helper()
	var d net.Dialer
	c, err := d.Dial("tcp", addr)
	require.NoError(t, err)
	_ = c.(*net.TCPConn).SetReadBuffer(4 << 10)
	b := `{"threadId":"` + thread + `","runId":"r","protocolVersion":"1.0","messages":[{"id":"u","role":"user","content":"flood"}]}`
	_, err = fmt.Fprintf(c, "POST /agui HTTP/1.1\r\nHost: %s\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s", addr, len(b), b)
	require.NoError(t, err)
	return c
}

// Thirty clients that never read, while their runs stream 3 MiB each: the coordinator's
// heap stays bounded (each client costs at most its stream buffer: what it misses is
// released to the event log), a normal run on another thread completes meanwhile, and each
// stuck client is dropped once it has taken nothing for the write timeout: its run is
// cancelled and its connection closed without the response's end, so what the client still
// has holds only whole events and no terminal one.
func TestStuckReadersAreDroppedAfterTheWriteTimeout(t *testing.T) {
	const (
		clients  = 30
		perRun   = 3 << 20
		bufBytes = 256 << 10
		// What the streams may cost: each stuck client at most about twice its buffer.
		streamBound = 150_000_000
		// What the runs themselves hold whatever their clients do, and which this model
		// makes large: the model's turn text (a growing buffer of up to 2× perRun while it
		// grows) and the thread message built from it (up to 1 MiB), per run.
		runsOwn   = clients * (2*perRun + 1<<20)
		heapBound = streamBound + runsOwn
	)
	var produced atomic.Int64
	// The event log and the thread's messages are kept out of the heap being measured, as
	// a store on disk keeps them.
	mem, err := store.Open(context.Background(), "memory:")
	require.NoError(t, err)
	t.Cleanup(func() { _ = mem.Close() })
	e := newStartedEngine(t, coordinator.Config{
		Model:             floodModel{total: perRun, chunk: 4 << 10, produced: &produced},
		StreamBufferBytes: bufBytes,
		Store:             offHeapLog{mem},
	})
	srv := httptest.NewUnstartedServer(New(Config{Engine: runsOf(e), WriteTimeout: 2 * time.Second}))
	var closed atomic.Int64
	srv.Listener = smallSendBuffer{srv.Listener, &closed}
	srv.Start()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		_ = e.Stop(ctx)
		srv.Close()
	})
	addr := srv.Listener.Addr().String()

	// The heap is sampled all along; the peak's growth over the baseline (what earlier
	// tests of the package left) is what matters.
	stopSampling := heapPeak()

	conns := make([]net.Conn, clients)
	for i := range conns {
		conns[i] = stuckClient(t, addr, fmt.Sprintf("stuck-%d", i))
	}

	// A client that reads is served while the others are stuck.
	resp := post(t, srv.URL+"/agui", body("normal", "r1", ""))
	require.Equal(t, http.StatusOK, resp.StatusCode)
	evs := readEvents(t, resp)
	require.NotEmpty(t, evs)
	assert.Equal(t, "RUN_FINISHED", evs[len(evs)-1]["type"], "the normal run completes")
	http.DefaultClient.CloseIdleConnections()

	// Every stuck run ends (cancelled by its client's drop); the engine holds none.
	guard := time.Now().Add(60 * time.Second)
	for e.Active() > 0 && time.Now().Before(guard) {
		time.Sleep(10 * time.Millisecond)
	}
	require.Zero(t, e.Active(), "the stuck runs were cancelled")
	grown := stopSampling()
	t.Logf("peak heap growth %d MiB, produced %d MiB", grown>>20, produced.Load()>>20)
	assert.Less(t, grown, uint64(heapBound), "the heap stays bounded")

	closeGuard := time.Now().Add(30 * time.Second)
	for closed.Load() < clients && time.Now().Before(closeGuard) {
		time.Sleep(10 * time.Millisecond)
	}
	assert.GreaterOrEqual(t, closed.Load(), int64(clients), "every stuck connection was closed by the server")

	// What a stuck client can still read: a response whose body breaks off (no end of the
	// chunked body), and whose complete events are whole frames, none of them terminal.
	// All read at once, each for up to 5 s.
	type got struct {
		data   []byte
		err    error
		header error
	}
	results := make([]got, len(conns))
	var readers sync.WaitGroup
	for i, c := range conns {
		readers.Go(func() {
			defer c.Close()
			_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
			resp, err := http.ReadResponse(bufio.NewReader(c), nil)
			if err != nil {
				results[i].header = err
				return
			}
			results[i].data, results[i].err = io.ReadAll(resp.Body)
		})
	}
	readers.Wait()
	for i, r := range results {
		require.NoError(t, r.header, "client %d", i)
		// The body breaks off (unexpected EOF, a reset, or nothing more from a connection
		// the kernel gave up on): it never ends like a complete response.
		require.Error(t, r.err, "client %d: the stream broke off, it did not end", i)
		frames := strings.Split(string(r.data), "\n\n")
		whole := frames[:len(frames)-1] // the last one may be cut: an SSE client discards it
		require.NotEmpty(t, whole, "client %d got events before it stopped reading", i)
		for _, f := range whole {
			if strings.HasPrefix(f, ":") {
				continue
			}
			_, payload, ok := strings.Cut(f, "data: ")
			require.True(t, ok, "client %d: a frame without data: %q", i, f)
			var ev map[string]any
			require.NoError(t, json.Unmarshal([]byte(payload), &ev), "client %d: a complete frame is a whole event", i)
			assert.NotEqual(t, "RUN_FINISHED", ev["type"])
		}
	}
}

// BenchmarkStreamEvents is the event write path after the bounded buffer: a run's model
// streams b.N text deltas; each goes through the sequencer, the bounded queue, the SSE
// writer (with its write deadline) and loopback TCP to a client that reads them all.
func BenchmarkStreamEvents(b *testing.B) {
	var produced atomic.Int64
	const chunk = 64
	m := floodModel{total: b.N * chunk, chunk: chunk, produced: &produced}
	// The model produces as fast as the CPU allows, faster than loopback TCP carries; a
	// buffer as large as the whole run keeps the client from being dropped, so that the
	// figure is the write path's throughput.
	e := newStartedEngine(b, coordinator.Config{Model: m, StreamBufferBytes: 1 << 30})
	srv := httptest.NewServer(New(Config{Engine: runsOf(e)}))
	defer func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		_ = e.Stop(ctx)
		srv.Close()
	}()
	b.ReportAllocs()
	cpu0 := cpuTime()
	b.ResetTimer()
	resp, err := http.Post(srv.URL+"/agui", "application/json", strings.NewReader(
		`{"threadId":"bench","runId":"r","protocolVersion":"1.0","messages":[{"id":"u","role":"user","content":"flood"}]}`))
	require.NoError(b, err)
	n, err := io.Copy(io.Discard, resp.Body)
	_ = resp.Body.Close()
	require.NoError(b, err)
	b.StopTimer()
	cpu := cpuTime() - cpu0
	require.Greater(b, n, int64(b.N*chunk), "the whole stream arrived")
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "events/s")
	// Per CPU second of this process (engine, server and the reading client together): the
	// per-core figure, which a machine shared with other work does not distort.
	b.ReportMetric(float64(b.N)/cpu.Seconds(), "events/cpu-s")
}

// cpuTime is the user and system CPU time this process has used.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// A client that reads nothing while its run produces less than the stream buffer: the run
// is not slowed (it finishes), and the write the client does not take fails at the write
// deadline, which closes the connection instead of holding it for as long as the client
// lives. The run is detached (a long grace), so that it finishing does not depend on
// producing everything before the deadline closes the connection: on a loaded machine it
// may not, and in cancel mode the close would then cancel it.
func TestWriteDeadlineClosesStuckConnection(t *testing.T) {
	var produced atomic.Int64
	e := newStartedEngine(t, coordinator.Config{Model: floodModel{total: 1 << 20, chunk: 4 << 10, produced: &produced},
		OnDisconnect: coordinator.DisconnectDetach, ReconnectGrace: time.Minute})
	srv := httptest.NewUnstartedServer(New(Config{Engine: runsOf(e), WriteTimeout: 200 * time.Millisecond}))
	var closed atomic.Int64
	srv.Listener = smallSendBuffer{srv.Listener, &closed}
	srv.Start()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		_ = e.Stop(ctx)
		srv.Close()
	})
	c := stuckClient(t, srv.Listener.Addr().String(), "slow-writes")
	defer c.Close()

	guard := time.Now().Add(30 * time.Second)
	for (e.Active() > 0 || closed.Load() == 0) && time.Now().Before(guard) {
		time.Sleep(10 * time.Millisecond)
	}
	assert.Zero(t, e.Active(), "the run ended")
	assert.EqualValues(t, 1<<20, produced.Load(), "the run was not slowed: it produced everything")
	assert.EqualValues(t, 1, closed.Load(), "the server closed the stuck connection")
}
