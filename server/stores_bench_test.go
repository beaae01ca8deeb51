package server

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/baton-dev/baton/internal/testutil/benchagent"
	"github.com/baton-dev/baton/internal/testutil/pgtest"
	"github.com/baton-dev/baton/store"
)

// benchStore is one store under BenchmarkStoresInterleaved with the figures collected for it
// over all rounds.
type benchStore struct {
	name string
	st   store.Store // nil: the engine's default in-memory store

	satRuns int
	satTime time.Duration
	satCPU  time.Duration
	latency []time.Duration // each saturation run, POST to RUN_FINISHED
	first   []time.Duration // each ramp run, POST to RUN_STARTED
	failed  int             // ramp runs that did not reach the agent's first chunk
}

// envInt reads a positive integer from the environment, or def.
func envInt(name string, def int) int {
	if v, err := strconv.Atoi(os.Getenv(name)); err == nil && v > 0 {
		return v
	}
	return def
}

// processCPU returns the user and system CPU time this process has used.
func processCPU() time.Duration {
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// storesEngine returns an engine over st delegating to one bench agent at url, and a server
// for it; stop ends both (the store stays open: the next phase uses it again).
func storesEngine(tb testing.TB, st store.Store, url string) (baseURL string, stop func()) {
	tb.Helper()
	e, ag := stubEngine(tb, st, url, nil)
	srv := httptest.NewServer(New(Config{Engine: runsOf(e), MaxActiveRuns: -1}))
	return srv.URL, func() {
		srv.CloseClientConnections()
		srv.Close()
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		require.NoError(tb, e.Stop(ctx))
		_ = ag.Close()
	}
}

// BenchmarkStoresInterleaved compares the three stores on the same workload in one run:
// rounds (BATON_BENCH_ROUNDS, default 3) in which each store in turn (the order rotating
// each round) runs
//
//   - saturation: BATON_BENCH_SAT_RUNS (default 600) complete delegations (stub model, bench
//     agent, POST /agui read to RUN_FINISHED) from BATON_BENCH_CLIENTS (default 32) clients:
//     runs per second, run latency p50, and the process's CPU per run;
//   - ramp: BATON_BENCH_RAMP_RUNS (default 1,000) delegations started at BATON_BENCH_RAMP
//     per second (default 1,000) and held open at the agent: the time to the first event
//     (RUN_STARTED) p50 and p99.
//
// Everything (clients, agent, Baton) is in this process, so the CPU figure includes the
// clients and the agent; they are the same for each store, which makes the ratios the point.
// BATON_BENCH_STORES (e.g. "postgres") keeps only the stores it names, for a CPU profile.
// BATON_BENCH_PG_POOL sets the PostgreSQL pool's size (pgx's pool_max_conns).
// PostgreSQL is the throwaway server of pgtest (or BATON_TEST_POSTGRES_URL); without one it
// is left out with a printed reason (and fails when CI is set).
//
//	go test -run '^$' -bench StoresInterleaved -benchtime 1x ./server/
func BenchmarkStoresInterleaved(b *testing.B) {
	raiseFDLimit()
	rounds := envInt("BATON_BENCH_ROUNDS", 3)
	satRuns := envInt("BATON_BENCH_SAT_RUNS", 600)
	clients := envInt("BATON_BENCH_CLIENTS", 32)
	rampRuns := envInt("BATON_BENCH_RAMP_RUNS", 1000)
	rate := envInt("BATON_BENCH_RAMP", 1000)
	ctx := context.Background()

	stores := []*benchStore{{name: "memory"}}
	sq, err := store.Open(ctx, "sqlite:"+filepath.Join(b.TempDir(), "baton.db"))
	require.NoError(b, err)
	defer sq.Close()
	stores = append(stores, &benchStore{name: "sqlite", st: sq})
	if _, err := pgtest.Start(); err == nil || os.Getenv("CI") != "" {
		pg, err := store.Open(ctx, benchPoolDSN(b, pgtest.DSN(b)))
		require.NoError(b, err)
		defer pg.Close()
		stores = append(stores, &benchStore{name: "postgres", st: pg})
	} else {
		b.Logf("postgres left out: %v", err)
	}

	sat := httptest.NewServer(nil)
	defer sat.Close()
	sat.Config.Handler = benchagent.New(sat.URL, benchagent.Options{Chunks: []string{"one ", "two ", "three"}})

	var serial atomic.Int64
	body := func(name string) io.Reader {
		return strings.NewReader(fmt.Sprintf(`{"threadId":"si-%s-%d","runId":"r","protocolVersion":"1.0","messages":[{"id":"u","role":"user","content":"go"}]}`,
			name, serial.Add(1)))
	}

	saturate := func(s *benchStore) {
		base, stop := storesEngine(b, s.st, sat.URL)
		defer stop()
		client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: clients * 2}}
		defer client.CloseIdleConnections()
		var next atomic.Int64
		lat := make([]time.Duration, satRuns)
		var wg sync.WaitGroup
		cpu0, start := processCPU(), time.Now()
		for range clients {
			wg.Go(func() {
				for {
					i := int(next.Add(1)) - 1
					if i >= satRuns {
						return
					}
					t0 := time.Now()
					resp, err := client.Post(base+"/agui", "application/json", body(s.name))
					if err != nil {
						b.Error(err)
						return
					}
					last := readRun(b, resp.Body)
					resp.Body.Close()
					lat[i] = time.Since(t0)
					if !strings.Contains(last, "RUN_FINISHED") {
						b.Errorf("%s: run ended with %q", s.name, last)
						return
					}
				}
			})
		}
		wg.Wait()
		took, cpu := time.Since(start), processCPU()-cpu0
		s.satRuns += satRuns
		s.satTime += took
		s.satCPU += cpu
		s.latency = append(s.latency, lat...)
		b.Logf("%-8s saturation: %.0f runs/s, %.2f cpu-ms/run", s.name, float64(satRuns)/took.Seconds(), float64(cpu.Microseconds())/1000/float64(satRuns))
	}

	ramp := func(s *benchStore) {
		agentSrv := httptest.NewServer(nil)
		agent := benchagent.New(agentSrv.URL, benchagent.Options{Hold: true, Chunks: []string{"first chunk", "second"}})
		agentSrv.Config.Handler = agent
		defer agentSrv.Close()
		defer agent.Release()
		base, stop := storesEngine(b, s.st, agentSrv.URL)
		defer stop()
		client := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}
		first := make([]time.Duration, rampRuns)
		opened := make(chan bool, rampRuns)
		var wg sync.WaitGroup
		var whyMu sync.Mutex
		why := "" // the first failure, for the log
		failure := func(w string) {
			whyMu.Lock()
			defer whyMu.Unlock()
			if why == "" {
				why = w
			}
		}
		tick := time.NewTicker(time.Second / time.Duration(rate))
		for i := range rampRuns {
			<-tick.C
			wg.Go(func() {
				ok := false
				defer func() {
					if !ok {
						opened <- false
					}
				}()
				t0 := time.Now()
				resp, err := client.Post(base+"/agui", "application/json", body(s.name))
				if err != nil {
					failure(err.Error())
					return
				}
				defer resp.Body.Close()
				if resp.StatusCode != http.StatusOK {
					failure(resp.Status)
					return
				}
				br := bufio.NewReaderSize(resp.Body, 4096)
				started := false
				for {
					line, err := br.ReadString('\n')
					if err != nil {
						if ok {
							return // released: the run ended
						}
						failure(fmt.Sprintf("stream ended (%v) after %q", err, strings.TrimSpace(line)))
						return
					}
					if !started && strings.Contains(line, `"RUN_STARTED"`) {
						first[i] = time.Since(t0)
						started = true
					}
					if !ok && strings.Contains(line, "first chunk") {
						ok = true // the run stays open at the agent until Release
						opened <- true
					}
				}
			})
		}
		tick.Stop()
		for range rampRuns {
			if !<-opened {
				s.failed++
			}
		}
		agent.Release()
		wg.Wait()
		if why != "" {
			b.Logf("%-8s ramp: first failure: %s", s.name, why)
		}
		s.first = append(s.first, first...)
		sorted := slices.Clone(first)
		slices.Sort(sorted)
		b.Logf("%-8s ramp: first event p50 %.1f ms, p99 %.1f ms", s.name, ms(pct(sorted, 0.5)), ms(pct(sorted, 0.99)))
	}

	// BATON_BENCH_STORES keeps the named stores only (a profile of one).
	if only := os.Getenv("BATON_BENCH_STORES"); only != "" {
		stores = slices.DeleteFunc(stores, func(s *benchStore) bool { return !slices.Contains(strings.Split(only, ","), s.name) })
	}
	for b.Loop() {
		for r := range rounds {
			for k := range stores {
				s := stores[(r+k)%len(stores)]
				saturate(s)
				ramp(s)
			}
		}
	}
	b.StopTimer()
	mem := stores[0]
	if mem.name != "memory" || mem.satRuns == 0 {
		return
	}
	memRate := float64(mem.satRuns) / mem.satTime.Seconds()
	memCPU := float64(mem.satCPU.Microseconds()) / 1000 / float64(mem.satRuns)
	for _, s := range stores {
		slices.Sort(s.latency)
		slices.Sort(s.first)
		rate := float64(s.satRuns) / s.satTime.Seconds()
		cpu := float64(s.satCPU.Microseconds()) / 1000 / float64(s.satRuns)
		b.ReportMetric(rate, s.name+"-runs/s")
		b.ReportMetric(ms(pct(s.latency, 0.5)), s.name+"-run-p50-ms")
		b.ReportMetric(cpu, s.name+"-cpu-ms/run")
		b.ReportMetric(ms(pct(s.first, 0.5)), s.name+"-first-p50-ms")
		b.ReportMetric(ms(pct(s.first, 0.99)), s.name+"-first-p99-ms")
		if s != mem {
			b.ReportMetric(rate/memRate, s.name+"-runs-x")
			b.ReportMetric(cpu/memCPU, s.name+"-cpu-x")
		}
		if s.failed > 0 {
			b.Errorf("%s: %d ramp runs did not reach the agent", s.name, s.failed)
		}
	}
}

// benchPoolDSN returns dsn with pgx's pool_max_conns set from BATON_BENCH_PG_POOL, if set:
// the pool's default (4 connections on 2 cores) is what a run's start queues for under a
// ramp, and this knob measures what a larger pool changes.
func benchPoolDSN(tb testing.TB, dsn string) string {
	n := envInt("BATON_BENCH_PG_POOL", 0)
	if n == 0 {
		return dsn
	}
	u, err := url.Parse(dsn)
	require.NoError(tb, err)
	q := u.Query()
	q.Set("pool_max_conns", strconv.Itoa(n))
	u.RawQuery = q.Encode()
	return u.String()
}

// ms is d in milliseconds.
func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
