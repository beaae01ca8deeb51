package integration

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/baton-dev/baton/coordinator"
	"github.com/baton-dev/baton/internal/testutil/stubmodel"
	"github.com/baton-dev/baton/server"
	"github.com/baton-dev/baton/subagent"
)

// BenchmarkOpenRunsRealAgents is server's BenchmarkOpenRuns with the agents people run
// instead of the benchmark agent: BATON_BENCH_RUNS (default 1,000) streaming runs held open
// at once, each delegating to the A2A JS SDK peer ("js": peers/a2a-peer.mjs, its "hold"
// task, A2A 1.0 over HTTP/1.1) or to an a2a-go agent ("a2a-go": internal/demoagent's
// research agent, its "slow" task waiting an hour after its first step). Baton (engine with
// the stub model, AG-UI surface, memory store) runs in this process; the agent and the
// AG-UI clients (testdata/openruns) in processes of their own. Reported: Baton's heap, stack
// and goroutines per open run, and the time to RUN_STARTED while the runs ramp at 1,000/s.
// BATON_BENCH_HEAPPROFILE=<file> writes a heap profile of the open runs, and <file>.goroutines
// their goroutines. BATON_BENCH_HOLD=<file> keeps the runs open, for a core (gcore) to be
// taken, until <file> is removed (at most ten minutes): the process id is written to it.
func BenchmarkOpenRunsRealAgents(b *testing.B) {
	runs := 1000
	if v, err := strconv.Atoi(os.Getenv("BATON_BENCH_RUNS")); err == nil && v > 0 {
		runs = v
	}
	var lim syscall.Rlimit
	if syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim) == nil {
		lim.Cur = lim.Max
		_ = syscall.Setrlimit(syscall.RLIMIT_NOFILE, &lim)
	}
	for _, agent := range []struct{ name, prompt, marker string }{
		{"js", "hold", "first chunk"},
		{"a2a-go", "slow", "step 1"},
	} {
		b.Run(agent.name, func(b *testing.B) {
			if os.Getenv("BATON_BENCH_HEAPPROFILE") != "" {
				runtime.MemProfileRate = 512
			}
			for b.Loop() {
				openRealRuns(b, agent.name == "a2a-go", runs, agent.prompt, agent.marker)
			}
		})
	}
}

func openRealRuns(b *testing.B, goAgent bool, runs int, prompt, marker string) {
	load := startOpenRunsLoad(b, goAgent)
	defer load.quit()
	agentURL := load.agentURL
	if !goAgent {
		agentURL = startA2APeerEnv(b, "A2A_LEGACY=0")
	}
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	ctx := context.Background()
	ag, err := subagent.Resolve(ctx, subagent.AgentConfig{Name: "bench", URL: agentURL, Timeout: time.Hour}, subagent.Options{Logger: quiet})
	require.NoError(b, err)
	defer ag.Close()
	e, err := coordinator.New(coordinator.Config{
		Logger: quiet,
		Model:  stubmodel.New(stubmodel.Config{Tool: "bench", Arguments: fmt.Sprintf(`{"prompt":%q}`, prompt), Text: []string{"Done."}}),
		Agents: []coordinator.Agent{{Name: "bench", Description: ag.Description, Client: ag, Timeout: time.Hour}},
	})
	require.NoError(b, err)
	require.NoError(b, e.Start(ctx))
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(b, err)
	srv := &http.Server{Handler: server.New(server.Config{Engine: coordinator.NewRuns(e, coordinator.RunsConfig{}), MaxActiveRuns: -1})}
	var served sync.WaitGroup
	served.Go(func() { _ = srv.Serve(ln) })

	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	g0 := runtime.NumGoroutine()
	open := load.ask(b, fmt.Sprintf("open http://%s %d %s %s", ln.Addr(), runs, prompt, marker))
	require.Equal(b, "open", open[0])
	opened, _ := strconv.Atoi(open[1])
	require.Equal(b, runs, opened, "runs open")
	for range 4 { // stacks shrink by half per GC (see BenchmarkOpenRuns)
		runtime.GC()
	}
	runtime.ReadMemStats(&after)
	g1 := runtime.NumGoroutine()
	if path := os.Getenv("BATON_BENCH_HEAPPROFILE"); path != "" {
		f, err := os.Create(path)
		require.NoError(b, err)
		require.NoError(b, pprof.Lookup("heap").WriteTo(f, 0))
		require.NoError(b, f.Close())
		f, err = os.Create(path + ".goroutines")
		require.NoError(b, err)
		require.NoError(b, pprof.Lookup("goroutine").WriteTo(f, 1))
		require.NoError(b, f.Close())
	}
	if path := os.Getenv("BATON_BENCH_HOLD"); path != "" {
		holdOpenRuns(b, path)
	}
	b.ReportMetric(float64(int64(after.HeapAlloc)-int64(before.HeapAlloc))/float64(runs)/1024, "heap-KiB/run")
	b.ReportMetric(float64(int64(after.StackInuse)-int64(before.StackInuse))/float64(runs)/1024, "stack-KiB/run")
	b.ReportMetric(float64(g1-g0)/float64(runs), "goroutines/run")
	p50, _ := strconv.ParseFloat(open[2], 64)
	p99, _ := strconv.ParseFloat(open[3], 64)
	b.ReportMetric(p50, "first-event-p50-ms")
	b.ReportMetric(p99, "first-event-p99-ms")

	require.Equal(b, []string{"disconnected"}, load.ask(b, "disconnect"))
	sctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	_ = srv.Shutdown(sctx)
	served.Wait()
	_ = e.Stop(sctx)
}

// openRunsLoad is testdata/openruns running: the AG-UI clients, and with -agent the a2a-go
// agent.
type openRunsLoad struct {
	cmd      *exec.Cmd
	in       io.WriteCloser
	out      *bufio.Scanner
	agentURL string
}

var openRunsBuild struct {
	sync.Once
	path string
	err  error
}

func startOpenRunsLoad(b *testing.B, goAgent bool) *openRunsLoad {
	b.Helper()
	openRunsBuild.Do(func() {
		dir, err := os.MkdirTemp("", "baton-openruns-")
		if err != nil {
			openRunsBuild.err = err
			return
		}
		openRunsBuild.path = filepath.Join(dir, "openruns")
		cmd := exec.Command("go", "build", "-o", openRunsBuild.path, "./integration/testdata/openruns")
		cmd.Dir = repoRoot(b)
		if out, err := cmd.CombinedOutput(); err != nil {
			openRunsBuild.err = fmt.Errorf("go build ./integration/testdata/openruns: %w\n%s", err, out)
		}
	})
	require.NoError(b, openRunsBuild.err)
	args := []string{}
	if goAgent {
		args = append(args, "-agent")
	}
	l := &openRunsLoad{cmd: exec.Command(openRunsBuild.path, args...)}
	l.cmd.Stderr = os.Stderr
	var err error
	l.in, err = l.cmd.StdinPipe()
	require.NoError(b, err)
	stdout, err := l.cmd.StdoutPipe()
	require.NoError(b, err)
	require.NoError(b, l.cmd.Start())
	l.out = bufio.NewScanner(stdout)
	require.True(b, l.out.Scan(), "openruns started")
	ready := strings.Fields(l.out.Text())
	require.Len(b, ready, 2)
	l.agentURL = ready[1]
	return l
}

func (l *openRunsLoad) ask(b *testing.B, cmd string) []string {
	_, err := fmt.Fprintln(l.in, cmd)
	require.NoError(b, err)
	require.True(b, l.out.Scan(), "openruns ended")
	return strings.Fields(l.out.Text())
}

func (l *openRunsLoad) quit() {
	_, _ = fmt.Fprintln(l.in, "quit")
	_ = l.in.Close()
	_ = l.cmd.Wait()
}

// holdOpenRuns writes the process id to path and waits until path is removed or ten
// minutes have passed (BATON_BENCH_HOLD; server's BenchmarkOpenRuns has the same hook).
func holdOpenRuns(b *testing.B, path string) {
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
