package server

import (
	"bufio"
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"runtime"
	"runtime/pprof"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	sdk "github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/a2aproject/a2a-go/v2/a2aclient"
	"github.com/a2aproject/a2a-go/v2/a2aclient/agentcard"
	"github.com/stretchr/testify/require"

	"github.com/baton-dev/baton/coordinator"
	"github.com/baton-dev/baton/internal/testutil/benchagent"
	"github.com/baton-dev/baton/internal/testutil/stubmodel"
	"github.com/baton-dev/baton/store"
	"github.com/baton-dev/baton/subagent"
)

// The parked-run benchmarks measure Baton's own cost: the sub-agent is
// internal/testutil/benchagent (frames encoded once, no SDK server) and the model is
// internal/testutil/stubmodel (pre-split chunks, no tokenising).

// benchEngine returns an engine with the stub model delegating to one bench agent at url.
func benchEngine(tb testing.TB, url string) (*coordinator.Engine, *subagent.Agent) {
	return benchEngineWith(tb, url, nil)
}

// benchEngineWith is benchEngine with the A2A client's HTTP client (nil: the default).
func benchEngineWith(tb testing.TB, url string, hc *http.Client) (*coordinator.Engine, *subagent.Agent) {
	tb.Helper()
	var st store.Store // BATON_BENCH_STORE: a store DSN ("sqlite:/tmp/x.db"); default memory
	if dsn := os.Getenv("BATON_BENCH_STORE"); dsn != "" {
		var err error
		st, err = store.Open(context.Background(), dsn)
		require.NoError(tb, err)
		tb.Cleanup(func() { _ = st.Close() })
	}
	return stubEngine(tb, st, url, hc)
}

// stubEngine returns an engine over st (nil: memory) with the stub model delegating to one
// bench agent at url, reached with hc (nil: the default client).
func stubEngine(tb testing.TB, st store.Store, url string, hc *http.Client) (*coordinator.Engine, *subagent.Agent) {
	// Log lines are formatted (a real cost per run) but not printed.
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	return delegatingEngine(tb, subagent.AgentConfig{Name: "bench", URL: url, Timeout: time.Hour}, subagent.Options{Logger: quiet, HTTPClient: hc},
		coordinator.Config{
			Store:  st,
			Logger: quiet,
			Model:  stubmodel.New(stubmodel.Config{Tool: "bench", Arguments: `{"prompt":"go"}`, Text: []string{"Done: ", "the agent answered."}}),
		})
}

const benchRunBody = `{"threadId":"bench-%d","runId":"r","protocolVersion":"1.0","messages":[{"id":"u","role":"user","content":"go"}]}`

// readRun reads an AG-UI stream to its end and returns its last frame.
func readRun(tb testing.TB, body io.Reader) string {
	br := bufio.NewReaderSize(body, 4096)
	last := ""
	for {
		line, err := br.ReadString('\n')
		if strings.HasPrefix(line, "data:") {
			last = line
		}
		if err != nil {
			return last
		}
	}
}

// BenchmarkLeanDelegationOverhead is BenchmarkDelegationOverhead with the benchmark agent
// and the stub model: one delegation through Baton (POST /agui, SSE read to RUN_FINISHED)
// against a direct a2a-go streaming call to the same agent, alternated.
func BenchmarkLeanDelegationOverhead(b *testing.B) {
	agentSrv := httptest.NewUnstartedServer(nil)
	agentSrv.Start()
	defer agentSrv.Close()
	agentSrv.Config.Handler = benchagent.New(agentSrv.URL, benchagent.Options{Chunks: []string{"one ", "two ", "three"}})
	e, ag := benchEngine(b, agentSrv.URL)
	defer ag.Close()
	baton := httptest.NewServer(New(Config{Engine: runsOf(e)}))
	defer baton.Close()
	viaDirect := directCall(b, agentSrv.URL, "go")

	n := 0
	viaBaton := func() time.Duration {
		n++
		start := time.Now()
		resp, err := http.Post(baton.URL+"/agui", "application/json", strings.NewReader(fmt.Sprintf(benchRunBody, n)))
		require.NoError(b, err)
		last := readRun(b, resp.Body)
		resp.Body.Close()
		require.Contains(b, last, "RUN_FINISHED")
		return time.Since(start)
	}
	// 20 calls of each warm the connections and pools.
	d, t := alternate(b, 20, viaDirect, viaBaton)
	reportOverhead(b, d, t)
}

// BenchmarkLeanThroughput runs complete delegations from parallel clients as fast as Baton
// takes them (saturation): runs per second is the figure.
func BenchmarkLeanThroughput(b *testing.B) {
	agentSrv := httptest.NewUnstartedServer(nil)
	agentSrv.Start()
	defer agentSrv.Close()
	agentSrv.Config.Handler = benchagent.New(agentSrv.URL, benchagent.Options{Chunks: []string{"one ", "two ", "three"}})
	e, ag := benchEngine(b, agentSrv.URL)
	defer ag.Close()
	baton := httptest.NewServer(New(Config{Engine: runsOf(e), MaxActiveRuns: -1}))
	defer baton.Close()
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 256}}
	defer client.CloseIdleConnections()
	var mu sync.Mutex
	n := 0
	b.SetParallelism(16)
	start := time.Now()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			mu.Lock()
			n++
			i := n
			mu.Unlock()
			resp, err := client.Post(baton.URL+"/agui", "application/json", strings.NewReader(fmt.Sprintf(benchRunBody, i)))
			if err != nil {
				b.Error(err)
				return
			}
			last := readRun(b, resp.Body)
			resp.Body.Close()
			if !strings.Contains(last, "RUN_FINISHED") {
				b.Errorf("run %d ended with %q", i, last)
				return
			}
		}
	})
	b.StopTimer()
	b.ReportMetric(float64(n)/time.Since(start).Seconds(), "runs/s")
}

// loadPeerEnv, when set, turns the test binary into the load peer of BenchmarkOpenRuns: it
// runs the benchmark agent and the AG-UI clients in a process of their own, so that the
// benchmark process holds Baton alone and its heap, stacks and goroutines are Baton's.
const loadPeerEnv = "BATON_LOAD_PEER"

// raiseFDLimit raises the open-file limit of this process: to 65,536 when it may raise the
// hard limit (root), else to the hard limit. 10,000 runs need 2 fds each in Baton's
// process (the client's connection and the agent's).
func raiseFDLimit() uint64 {
	var lim syscall.Rlimit
	if syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim) != nil {
		return 0
	}
	want := syscall.Rlimit{Cur: max(lim.Max, 65536), Max: max(lim.Max, 65536)}
	if syscall.Setrlimit(syscall.RLIMIT_NOFILE, &want) != nil {
		lim.Cur = lim.Max
		_ = syscall.Setrlimit(syscall.RLIMIT_NOFILE, &lim)
	}
	_ = syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim)
	return lim.Cur
}

// BenchmarkOpenRuns holds BATON_BENCH_RUNS (default 1,000) streaming delegations open at
// once and reports Baton's heap, stack and goroutines per open run, the time to the first
// event (RUN_STARTED) while they ramp up (BATON_BENCH_RAMP runs started per second, default
// 1,000), and then a mass disconnect: the fraction of tasks
// cancelled at the agent and the time to the last cancellation. BATON_BENCH_FAIL_CANCELS
// makes the agent refuse the first n CancelTask calls of each task.
func BenchmarkOpenRuns(b *testing.B) {
	runs := benchRuns()
	fds := raiseFDLimit()
	b.Logf("open-file limit %d", fds)
	if os.Getenv("BATON_BENCH_HEAPPROFILE") != "" {
		runtime.MemProfileRate = 512 // fine-grained: the profile is the point of this run
	}
	for b.Loop() {
		peer := startLoadPeer(b)

		var hc *http.Client
		if os.Getenv("BATON_BENCH_AGENT_H2") != "" {
			// The agent speaks HTTP/2 over TLS (as agents behind https usually do): the
			// streams of all runs share connections. Both processes hold net/http's
			// built-in test certificate; a throwaway TLS server hands it over here.
			certSrv := httptest.NewTLSServer(http.NotFoundHandler())
			pool := x509.NewCertPool()
			pool.AddCert(certSrv.Certificate())
			certSrv.Close()
			t := subagent.NewHTTPTransport()
			t.TLSClientConfig = &tls.Config{RootCAs: pool}
			hc = &http.Client{Transport: t}
		}
		e, ag := benchEngineWith(b, peer.agentURL, hc)
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		require.NoError(b, err)
		srv := &http.Server{Handler: New(Config{Engine: runsOf(e), MaxActiveRuns: -1})}
		go srv.Serve(ln)

		var before, after runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&before)
		g0 := runtime.NumGoroutine()
		open := peer.ask(b, fmt.Sprintf("open http://%s %d", ln.Addr(), runs))
		require.Equal(b, "open", open[0])
		opened, _ := strconv.Atoi(open[1])
		require.Equal(b, runs, opened, "runs open")
		// Stacks shrink by half per GC when a quarter of them is in use: a few GCs show
		// what the open runs hold, not what they used on their way there.
		for range 4 {
			runtime.GC()
		}
		runtime.ReadMemStats(&after)
		g1 := runtime.NumGoroutine()
		if path := os.Getenv("BATON_BENCH_HEAPPROFILE"); path != "" {
			writeProfile(b, "heap", path)
			writeProfile(b, "goroutine", path+".goroutines")
		}
		if path := os.Getenv("BATON_BENCH_HOLD"); path != "" {
			holdOpen(b, path)
		}
		b.ReportMetric(float64(int64(after.HeapAlloc)-int64(before.HeapAlloc))/float64(runs)/1024, "heap-KiB/run")
		b.ReportMetric(float64(int64(after.StackInuse)-int64(before.StackInuse))/float64(runs)/1024, "stack-KiB/run")
		b.ReportMetric(float64(g1-g0)/float64(runs), "goroutines/run")
		p50, _ := strconv.ParseFloat(open[2], 64)
		p99, _ := strconv.ParseFloat(open[3], 64)
		b.ReportMetric(p50, "first-event-p50-ms")
		b.ReportMetric(p99, "first-event-p99-ms")

		gone := peer.ask(b, "disconnect")
		require.Equal(b, "canceled", gone[0])
		tasks, _ := strconv.Atoi(gone[1])
		canceled, _ := strconv.Atoi(gone[2])
		last, _ := strconv.ParseFloat(gone[3], 64)
		b.ReportMetric(float64(canceled)/float64(max(tasks, 1)), "canceled-frac")
		b.ReportMetric(last, "last-cancel-ms")
		peer.quit()

		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		_ = srv.Shutdown(ctx)
		_ = e.Stop(ctx)
		cancel()
		_ = ag.Close()
	}
}

// holdOpen keeps the open runs as they are while a core of this process is taken
// (BATON_BENCH_HOLD=<file>): it writes the process id to the file and waits until the file
// is removed, at most ten minutes. pprof tells what each goroutine waits in, not the size
// of its stack; server/testdata/stacks.py reads the sizes from the core with gdb.
func holdOpen(b *testing.B, path string) {
	require.NoError(b, os.WriteFile(path, []byte(strconv.Itoa(os.Getpid())), 0o600))
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	deadline := time.Now().Add(10 * time.Minute)
	for range tick.C {
		if _, err := os.Stat(path); err != nil || time.Now().After(deadline) {
			return
		}
	}
}

// writeProfile writes a pprof profile of the open runs (BATON_BENCH_HEAPPROFILE).
func writeProfile(b *testing.B, name, path string) {
	f, err := os.Create(path)
	require.NoError(b, err)
	defer f.Close()
	require.NoError(b, pprof.Lookup(name).WriteTo(f, 0))
}

// runLoadPeer is the load peer's main (see loadPeerEnv). Commands on stdin, one answer
// line each on stdout:
//
//	open <baton URL> <n>  → open <opened> <first-event p50 ms> <p99 ms>
//	disconnect            → canceled <tasks> <canceled> <ms to the last cancel>
//	quit
func runLoadPeer() {
	raiseFDLimit()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		panic(err)
	}
	h2 := os.Getenv("BATON_BENCH_AGENT_H2") != ""
	url := "http://" + ln.Addr().String()
	if h2 {
		url = "https://" + ln.Addr().String()
	}
	fail, _ := strconv.Atoi(os.Getenv("BATON_BENCH_FAIL_CANCELS"))
	agent := benchagent.New(url, benchagent.Options{Hold: true, Chunks: []string{"first chunk", "second"}, FailCancels: fail})
	if h2 {
		srv := httptest.NewUnstartedServer(agent)
		srv.Listener.Close()
		srv.Listener = ln
		srv.EnableHTTP2 = true
		srv.Config.HTTP2 = &http.HTTP2Config{MaxConcurrentStreams: 1 << 20} // default 250: a connection per 250 streams
		srv.StartTLS()
	} else {
		go (&http.Server{Handler: agent}).Serve(ln)
	}
	fmt.Println("agent", url)
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: -1, MaxConnsPerHost: 0, DisableKeepAlives: true}}
	var cancels []context.CancelFunc
	var wg sync.WaitGroup
	sc := bufio.NewScanner(os.Stdin)
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		switch {
		case len(f) == 3 && f[0] == "open":
			n, _ := strconv.Atoi(f[2])
			lat := make([]time.Duration, n)
			opened := make(chan bool, n)
			// The ramp: runs start at a steady rate (BATON_BENCH_RAMP per second, default
			// 1,000) while the earlier ones stay open.
			rate, _ := strconv.Atoi(os.Getenv("BATON_BENCH_RAMP"))
			if rate <= 0 {
				rate = 1000
			}
			tick := time.NewTicker(time.Second / time.Duration(rate))
			for i := range n {
				<-tick.C
				ctx, cancel := context.WithCancel(context.Background())
				cancels = append(cancels, cancel)
				wg.Go(func() {
					ok := false
					defer func() {
						if !ok {
							opened <- false
						}
					}()
					start := time.Now()
					req, _ := http.NewRequestWithContext(ctx, http.MethodPost, f[1]+"/agui", strings.NewReader(fmt.Sprintf(benchRunBody, i)))
					req.Header.Set("Content-Type", "application/json")
					resp, err := client.Do(req)
					if err != nil {
						return
					}
					defer resp.Body.Close()
					br := bufio.NewReaderSize(resp.Body, 4096)
					started := false
					for {
						line, err := br.ReadString('\n')
						if err != nil {
							return
						}
						if !started && strings.Contains(line, `"RUN_STARTED"`) {
							lat[i] = time.Since(start)
							started = true
						}
						if !ok && strings.Contains(line, "first chunk") {
							ok = true
							opened <- true
						}
					}
				})
			}
			tick.Stop()
			got := 0
			for range n {
				if <-opened {
					got++
				}
			}
			slices.Sort(lat)
			fmt.Printf("open %d %.3f %.3f\n", got, float64(pct(lat, 0.5).Microseconds())/1000, float64(pct(lat, 0.99).Microseconds())/1000)
		case len(f) == 1 && f[0] == "disconnect":
			start := time.Now()
			for _, c := range cancels {
				c()
			}
			tasks, canceled := agent.Counts()
			lastChange, lastCanceled := time.Since(start), canceled
			for canceled < tasks && time.Since(start) < 3*time.Minute {
				time.Sleep(10 * time.Millisecond)
				_, canceled = agent.Counts()
				if canceled != lastCanceled {
					lastChange, lastCanceled = time.Since(start), canceled
				}
			}
			fmt.Printf("canceled %d %d %.1f\n", tasks, canceled, float64(lastChange.Microseconds())/1000)
		case len(f) == 1 && f[0] == "quit":
			agent.Release()
			wg.Wait()
			return
		}
	}
}

// BenchmarkOpenStreamsFloor is the floor for BenchmarkOpenRuns: BATON_BENCH_RUNS (default
// 1,000) A2A streams held open by a bare client in this process, against the same agent in
// the load peer, without Baton: "sdk" is a2a-go's own client and JSON-RPC transport,
// "baton-a2a" is package a2a (its own SSE transport) alone. Per stream: the client side's
// heap, stack and goroutines (the goroutine that reads the stream included).
func BenchmarkOpenStreamsFloor(b *testing.B) {
	runs := benchRuns()
	raiseFDLimit()
	for _, client := range []string{"sdk", "baton-a2a"} {
		b.Run(client, func(b *testing.B) {
			for b.Loop() {
				peer := startLoadPeer(b)
				agentURL := peer.agentURL
				ctx, cancel := context.WithCancel(context.Background())
				hc := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 256}}

				// open starts one stream and reports once its first chunk arrived; the
				// stream stays open until ctx ends.
				var open func(opened chan<- error)
				switch client {
				case "sdk":
					card, err := agentcard.DefaultResolver.Resolve(ctx, agentURL)
					require.NoError(b, err)
					c, err := a2aclient.NewFromCard(ctx, card, a2aclient.WithJSONRPCTransport(hc))
					require.NoError(b, err)
					defer c.Destroy()
					open = func(opened chan<- error) {
						for ev, err := range c.SendStreamingMessage(ctx, &sdk.SendMessageRequest{Message: sdk.NewMessage(sdk.MessageRoleUser, sdk.NewTextPart("go"))}) {
							if err != nil {
								opened <- err
								return
							}
							if _, ok := ev.(*sdk.TaskArtifactUpdateEvent); ok {
								opened <- nil
								<-ctx.Done() // parked inside the iteration: the stream stays open
								return
							}
						}
						opened <- fmt.Errorf("stream ended")
					}
				default:
					ag, err := subagent.Resolve(ctx, subagent.AgentConfig{Name: "bench", URL: agentURL}, subagent.Options{HTTPClient: hc, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
					require.NoError(b, err)
					defer ag.Close()
					open = func(opened chan<- error) {
						var once sync.Once
						_, _ = ag.Send(ctx, subagent.Request{Prompt: "go"}, subagent.Observer{Text: func(string) { once.Do(func() { opened <- nil }) }})
					}
				}
				var before, after runtime.MemStats
				runtime.GC()
				runtime.ReadMemStats(&before)
				g0 := runtime.NumGoroutine()
				var wg sync.WaitGroup
				opened := make(chan error, runs)
				for range runs {
					wg.Go(func() { open(opened) })
				}
				for range runs {
					require.NoError(b, <-opened)
				}
				for range 4 {
					runtime.GC()
				}
				runtime.ReadMemStats(&after)
				g1 := runtime.NumGoroutine()
				b.ReportMetric(float64(int64(after.HeapAlloc)-int64(before.HeapAlloc))/float64(runs)/1024, "heap-KiB/stream")
				b.ReportMetric(float64(int64(after.StackInuse)-int64(before.StackInuse))/float64(runs)/1024, "stack-KiB/stream")
				b.ReportMetric(float64(g1-g0)/float64(runs), "goroutines/stream")
				cancel()
				wg.Wait()
				hc.CloseIdleConnections()
				peer.quit()
			}
		})
	}
}
