package coordinator

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"testing/synctest"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/baton-dev/baton/agui"
	"github.com/baton-dev/baton/mcpclient"
)

// floodIn is the argument of the flood tool: how many progress notifications to send.
type floodIn struct {
	N int `json:"n"`
}

// startFloodServer serves a go-sdk MCP server over streamable HTTP whose "flood" tool sends
// n progress notifications (progress 1..n of n) as fast as it can, then answers.
func startFloodServer(t testing.TB) string {
	t.Helper()
	s := mcp.NewServer(&mcp.Implementation{Name: "flood", Version: "1"}, nil)
	mcp.AddTool(s, &mcp.Tool{Name: "flood", Description: "Sends progress."}, func(ctx context.Context, req *mcp.CallToolRequest, in floodIn) (*mcp.CallToolResult, any, error) {
		tok := req.Params.GetProgressToken()
		for i := 1; i <= in.N && tok != nil; i++ {
			if err := req.Session.NotifyProgress(ctx, &mcp.ProgressNotificationParams{ProgressToken: tok,
				Progress: float64(i), Total: float64(in.N), Message: fmt.Sprintf("step %d", i)}); err != nil {
				return nil, nil, err
			}
		}
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "flooded"}}}, nil, nil
	})
	h := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return s }, &mcp.StreamableHTTPOptions{Stateless: true})
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	return srv.URL
}

// buildFloodMCP builds testdata/floodmcp into a temporary directory of tb.
func buildFloodMCP(tb testing.TB) string {
	tb.Helper()
	// go test puts its own GOROOT/bin first on the PATH of the test binary.
	goBin, err := exec.LookPath("go")
	require.NoError(tb, err)
	bin := filepath.Join(tb.TempDir(), "floodmcp")
	out, err := exec.Command(goBin, "build", "-o", bin, "./testdata/floodmcp").CombinedOutput()
	require.NoError(tb, err, "go build ./testdata/floodmcp: %s", out)
	return bin
}

// startFloodProcess starts the floodmcp binary bin (the flood tool of startFloodServer in a
// process of its own) and returns its URL, and stop, which ends it and returns the CPU time
// it spent.
func startFloodProcess(tb testing.TB, bin string) (url string, stop func() time.Duration) {
	tb.Helper()
	cmd := exec.Command(bin, "-stdin")
	cmd.Stderr = os.Stderr
	stdin, err := cmd.StdinPipe()
	require.NoError(tb, err)
	stdout, err := cmd.StdoutPipe()
	require.NoError(tb, err)
	require.NoError(tb, cmd.Start())
	stop = func() time.Duration {
		_ = stdin.Close() // floodmcp serves until its standard input is closed
		if err := cmd.Wait(); err != nil {
			tb.Errorf("floodmcp: %v", err)
		}
		return cmd.ProcessState.UserTime() + cmd.ProcessState.SystemTime()
	}
	line, err := bufio.NewReader(stdout).ReadString('\n')
	if err != nil {
		stop()
		tb.Fatalf("floodmcp printed no URL: %v", err)
	}
	return strings.TrimSpace(line), stop
}

func cpuTime() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// progressWatch passes calls to a ToolServer and notes the highest progress value the SDK
// had delivered to Baton when the call returned.
type progressWatch struct {
	ToolServer
	mu       sync.Mutex
	seen     float64 // highest value delivered so far
	atReturn float64 // seen when the call returned
}

func (w *progressWatch) Call(ctx context.Context, name string, args json.RawMessage, opts mcpclient.CallOptions) (mcpclient.Result, error) {
	inner := opts.Progress
	opts.Progress = func(p mcpclient.Progress) {
		w.mu.Lock()
		w.seen = max(w.seen, p.Progress)
		w.mu.Unlock()
		inner(p)
	}
	res, err := w.ToolServer.Call(ctx, name, args, opts)
	w.mu.Lock()
	w.atReturn = w.seen
	w.mu.Unlock()
	return res, err
}

// floodStats is what one flood run produced.
type floodStats struct {
	live, stored           int
	liveBytes, storedBytes int
	lastLive, lastStored   float64
	atReturn               float64
	cpu, took              time.Duration // of this process: the coordinator (and the server if in it)
	serverCPU              time.Duration // of the server's own process, if it has one
	allocated              uint64        // bytes this process allocated during the run
	gcs                    uint32        // garbage collections this process ran during the run
}

// floodRun runs one call of the flood tool with n notifications on a new engine with a
// SQLite store and counts the progress events streamed and stored. The server is the
// floodmcp binary bin in a process of its own, or startFloodServer in this one if bin is "".
func floodRun(tb testing.TB, n int, bin string) floodStats {
	ctx := context.Background()
	url, stop := "", func() time.Duration { return 0 }
	if bin == "" {
		url = startFloodServer(tb)
	} else {
		url, stop = startFloodProcess(tb, bin)
	}
	reg, err := mcpclient.New(ctx, []mcpclient.ServerConfig{{Name: "f", URL: url}}, mcpclient.Options{Logger: slog.New(slog.DiscardHandler)})
	require.NoError(tb, err)
	defer func() { _ = reg.Close() }()
	watch := &progressWatch{ToolServer: reg}
	out := runFlood(tb, Config{Model: &fakeModel{turn: callThenReport("f__flood", fmt.Sprintf(`{"n":%d}`, n))}, Tools: watch})
	s := floodStats{cpu: out.cpu, took: out.took, serverCPU: stop(), allocated: out.allocated, gcs: out.gcs}
	watch.mu.Lock()
	s.atReturn = watch.atReturn
	watch.mu.Unlock()
	for _, ev := range out.live {
		if a, ok := ev.(*agui.ActivitySnapshot); ok && a.ActivityType == "progress" {
			s.live++
			b, err := json.Marshal(a)
			require.NoError(tb, err)
			s.liveBytes += len(b)
			s.lastLive, _ = a.Content["progress"].(float64)
		}
	}
	for _, ev := range out.stored {
		var v struct {
			Type    string
			Content json.RawMessage
		}
		require.NoError(tb, json.Unmarshal(ev.Data, &v))
		if v.Type == string(agui.EventActivitySnapshot) {
			var c struct{ Progress float64 }
			require.NoError(tb, json.Unmarshal(v.Content, &c))
			s.stored++
			s.storedBytes += len(ev.Data)
			s.lastStored = c.Progress
		}
	}
	return s
}

// 20,000 progress notifications of one MCP call become a bounded number of stored and
// streamed events (one per call per progressInterval at most, the latest winning), and the
// last value the server sent is delivered. (BenchmarkProgressFlood sends 100,000; under the
// race detector that many took 22 s of a test run.)
func TestProgressFloodIsCoalesced(t *testing.T) {
	const n = 20000
	s := floodRun(t, n, "")
	t.Logf("%d notifications: %d live / %d stored progress events, %.2f MB live / %.2f MB stored, CPU %.1f s in %.1f s",
		n, s.live, s.stored, float64(s.liveBytes)/1e6, float64(s.storedBytes)/1e6, s.cpu.Seconds(), s.took.Seconds())
	// At most one event per interval, plus the first and the last: on a loaded machine the
	// flood takes longer, and the bound with it; on any machine it is far below n.
	bound := int(s.took/progressInterval) + 2
	assert.Positive(t, s.live)
	assert.LessOrEqual(t, s.live, bound, "live progress events")
	assert.LessOrEqual(t, s.stored, bound, "stored progress events")
	assert.Less(t, s.stored, n/20, "stored progress events")
	// The SDK hands the call its result as soon as it is read, while the notifications
	// read before it are still being handled: on a loaded machine (or under the race
	// detector) tens of thousands may still be queued then. What had been delivered when
	// the call returned is never held back: its last value, or a later one, is the last
	// event; on an idle machine that is the server's last (n).
	t.Logf("last value: delivered when the call returned %.0f, streamed %.0f, stored %.0f", s.atReturn, s.lastLive, s.lastStored)
	assert.GreaterOrEqual(t, s.lastLive, s.atReturn, "the last progress value delivered is streamed")
	assert.Equal(t, s.lastLive, s.lastStored, "and stored")
}

// BenchmarkProgressFlood runs one call's 100,000 progress notifications and reports the
// progress events streamed and stored, their bytes, and the CPU time of the coordinator's
// process per run (cpu-s) and of the server's (server-cpu-s). The server runs in a process
// of its own ("process"), so that cpu-s is the coordinator's alone, or in the coordinator's
// ("inprocess", cpu-s counting both, as measured before); "coalesced" is Baton's pacing of
// progress events, "every" the same code with every notification an event.
func BenchmarkProgressFlood(b *testing.B) {
	const n = 100000
	bin := buildFloodMCP(b)
	for _, where := range []struct{ name, bin string }{{"process", bin}, {"inprocess", ""}} {
		for _, mode := range []struct {
			name     string
			interval time.Duration
		}{{"coalesced", progressInterval}, {"every", 0}} {
			b.Run(where.name+"/"+mode.name, func(b *testing.B) {
				defer func(was time.Duration) { progressInterval = was }(progressInterval)
				progressInterval = mode.interval
				var s floodStats
				for b.Loop() {
					s = floodRun(b, n, where.bin)
				}
				require.Positive(b, s.live)
				require.GreaterOrEqual(b, s.lastLive, s.atReturn, "the last progress value delivered is streamed")
				require.Equal(b, s.lastLive, s.lastStored, "and stored")
				b.ReportMetric(float64(s.live), "live-events")
				b.ReportMetric(float64(s.stored), "stored-events")
				b.ReportMetric(float64(s.liveBytes)/1e6, "live-MB")
				b.ReportMetric(float64(s.storedBytes)/1e6, "stored-MB")
				b.ReportMetric(s.cpu.Seconds(), "cpu-s")
				b.ReportMetric(s.serverCPU.Seconds(), "server-cpu-s")
				b.ReportMetric(s.lastStored, "last-stored")
				b.ReportMetric(float64(s.allocated)/1e6, "alloc-MB")
				b.ReportMetric(float64(s.gcs), "gcs")
				b.ReportMetric(s.took.Seconds(), "wall-s")
			})
		}
	}
}

// The coalescer sends the first value at once, then at most one per progressInterval, the
// latest winning, and flush sends what is held back once the notifications have settled.
func TestProgressCoalescer(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var mu sync.Mutex
		var all []float64
		c := newProgressCoalescer(func(p mcpclient.Progress) { mu.Lock(); all = append(all, p.Progress); mu.Unlock() })
		sentNow := func() []float64 { mu.Lock(); defer mu.Unlock(); return slices.Clone(all) }
		for i := 1; i <= 1000; i++ {
			c.note(mcpclient.Progress{Progress: float64(i)})
		}
		assert.Equal(t, []float64{1}, sentNow(), "the first at once, the rest held back")
		time.Sleep(progressInterval)
		synctest.Wait()
		assert.Equal(t, []float64{1, 1000}, sentNow(), "the latest when the interval is over")
		for i := 1001; i <= 1500; i++ {
			c.note(mcpclient.Progress{Progress: float64(i)})
			time.Sleep(time.Millisecond)
		}
		synctest.Wait()
		// 500 ms of notifications: about one event per interval.
		assert.LessOrEqual(t, len(sentNow()), 2+6)
		c.note(mcpclient.Progress{Progress: 1501})
		c.flush()
		synctest.Wait()
		sent := sentNow()
		assert.Equal(t, float64(1501), sent[len(sent)-1], "flush sends the last value")
		n := len(sent)
		c.flush()
		time.Sleep(time.Second)
		synctest.Wait()
		assert.Len(t, sentNow(), n, "nothing more after a flush without news")
	})
}

// A call's last notification can reach the coalescer just after the call returned (the SDK
// queues notifications to another goroutine but hands the result over at once): flush waits
// for it, so it goes out before the result, even when the previous one came long before.
func TestProgressFlushWaitsForQueuedLast(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var mu sync.Mutex
		var order []string
		add := func(s string) { mu.Lock(); order = append(order, s); mu.Unlock() }
		c := newProgressCoalescer(func(p mcpclient.Progress) { add(fmt.Sprint(p.Progress)) })
		c.note(mcpclient.Progress{Progress: 3})
		time.Sleep(500 * time.Millisecond) // the server's step
		done := make(chan struct{})
		go func() { c.flush(); add("result"); close(done) }()
		time.Sleep(5 * time.Millisecond) // the queued handler runs late
		c.note(mcpclient.Progress{Progress: 4})
		<-done
		mu.Lock()
		defer mu.Unlock()
		assert.Equal(t, []string{"3", "4", "result"}, order)
	})
}

// A call without progress returns at once: flush does not wait.
func TestProgressFlushWithoutProgressDoesNotWait(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := newProgressCoalescer(func(mcpclient.Progress) { t.Error("nothing to send") })
		start := time.Now()
		c.flush()
		assert.Zero(t, time.Since(start))
	})
}

// BenchmarkProgressNote is Baton's coalescer's share of one progress notification while a
// flood is on: every note but one per progressInterval only replaces the value held back.
func BenchmarkProgressNote(b *testing.B) {
	sent := 0
	c := newProgressCoalescer(func(mcpclient.Progress) { sent++ })
	p := mcpclient.Progress{Progress: 1, Total: 100000, Message: "step 1"}
	b.ReportAllocs()
	for b.Loop() {
		p.Progress++
		c.note(p)
	}
	c.flush()
	b.ReportMetric(float64(sent), "events")
}
