package coordinator

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"runtime"
	"runtime/pprof"
	"sync"
	"testing"
	"time"

	"github.com/baton-dev/baton/subagent"
)

// BenchmarkParkedRuns is what the engine itself retains per open streaming run:
// each of b.N runs delegates to an in-process agent that names its task, streams one chunk
// and then holds the request open, and the events are taken as a stream would take them.
// With every run parked there, heap and stack are runtime.MemStats (after GCs, so that
// stacks have shrunk to what the parked goroutines use) before and after, per run:
// retained bytes, not allocations. No HTTP, no A2A transport: BenchmarkOpenRuns in
// server/ measures the whole process.
//
//	go test -run '^$' -bench ParkedRuns -benchtime 1000x ./coordinator/
//
// BATON_BENCH_HEAPPROFILE=path writes the heap (every allocation sampled) and the
// goroutines of the parked runs to path and path.goroutines.
func BenchmarkParkedRuns(b *testing.B) {
	profile := os.Getenv("BATON_BENCH_HEAPPROFILE")
	if profile != "" {
		defer func(rate int) { runtime.MemProfileRate = rate }(runtime.MemProfileRate)
		runtime.MemProfileRate = 1
	}
	var parked sync.WaitGroup
	agent := &fakeAgent{send: func(ctx context.Context, req subagent.Request, obs subagent.Observer) (*subagent.Result, error) {
		obs.Task("task-"+req.Prompt, "ctx-"+req.Prompt)
		obs.Text("a first chunk of the answer")
		parked.Done()
		<-ctx.Done()
		return nil, ctx.Err()
	}}
	model := &fakeModel{turn: callThenReport("research", `{"prompt":"go"}`)}
	cfg := Config{Model: model, Agents: []Agent{{Name: "research", Description: "Researches.", Client: agent, Timeout: time.Hour}},
		CancelTimeout: 5 * time.Second, Logger: slog.New(slog.DiscardHandler)}
	e := newStartedEngine(b, cfg)
	defer func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		_ = e.Stop(ctx)
	}()

	var before, after runtime.MemStats
	settle := func(m *runtime.MemStats) {
		// Stacks shrink by half per GC while a quarter of them is in use.
		for range 4 {
			runtime.GC()
		}
		runtime.ReadMemStats(m)
	}
	settle(&before)
	g0 := runtime.NumGoroutine()
	b.ResetTimer()
	runs := make([]*Run, 0, b.N)
	parked.Add(b.N)
	for i := range b.N {
		r, err := e.StartRun(context.Background(), input(fmt.Sprintf("t%d", i)), "")
		if err != nil {
			b.Fatal(err)
		}
		runs = append(runs, r)
	}
	parked.Wait()
	for _, r := range runs {
		// What a stream does: it empties the queue as the client reads.
		r.Stream().Next()
	}
	b.StopTimer()
	settle(&after)
	n := float64(b.N)
	b.ReportMetric(float64(int64(after.HeapAlloc)-int64(before.HeapAlloc))/n, "heap-B/run")
	b.ReportMetric(float64(int64(after.StackInuse)-int64(before.StackInuse))/n, "stack-B/run")
	b.ReportMetric(float64(runtime.NumGoroutine()-g0)/n, "goroutines/run")
	if profile != "" {
		writeProfile(b, "heap", profile)
		writeProfile(b, "goroutine", profile+".goroutines")
	}

	for _, r := range runs {
		r.Cancel(ErrClientGone)
	}
	for _, r := range runs {
		<-r.Done()
	}
}

func writeProfile(b *testing.B, name, path string) {
	f, err := os.Create(path)
	if err != nil {
		b.Fatal(err)
	}
	defer f.Close()
	if err := pprof.Lookup(name).WriteTo(f, 0); err != nil {
		b.Fatal(err)
	}
}
