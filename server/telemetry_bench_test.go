package server

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/baton-dev/baton/a2a"
	"github.com/baton-dev/baton/coordinator"
	"github.com/baton-dev/baton/internal/demoagent"
	"github.com/baton-dev/baton/llm/scripted"
	"github.com/baton-dev/baton/telemetry"
)

// BenchmarkDelegationTracing measures one delegation through Baton (POST /agui, scripted
// model, the demo research agent over loopback, SSE to the terminal event) with tracing off
// and with tracing on, exporting every span over OTLP/HTTP to a receiver in the process,
// alternating the two, and reports the p50 of each and their difference.
func BenchmarkDelegationTracing(b *testing.B) {
	ctx := context.Background()
	agentSrv := httptest.NewUnstartedServer(nil)
	agentSrv.Start()
	defer agentSrv.Close()
	h, err := demoagent.NewHandler(demoagent.Options{Kind: "research", BaseURL: agentSrv.URL, ChunkDelay: time.Nanosecond})
	require.NoError(b, err)
	agentSrv.Config.Handler = h

	var exported atomic.Int64
	collector := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n, _ := io.Copy(io.Discard, r.Body)
		exported.Add(n)
		w.Header().Set("Content-Type", "application/x-protobuf")
	}))
	defer collector.Close()
	tel, err := telemetry.Setup(ctx, telemetry.Config{Endpoint: collector.URL, Getenv: func(string) string { return "" }})
	require.NoError(b, err)
	require.True(b, tel.Enabled())

	start := func(tracing coordinator.Tracing, hc *http.Client) (*httptest.Server, func()) {
		ag, err := a2a.Resolve(ctx, a2a.AgentConfig{Name: "research", URL: agentSrv.URL, Timeout: time.Minute}, a2a.Options{HTTPClient: hc})
		require.NoError(b, err)
		e, err := coordinator.New(coordinator.Config{Model: scripted.New(scripted.Config{}), Tracing: tracing,
			Agents: []coordinator.Agent{{Name: "research", Description: ag.Description, Client: ag, Timeout: time.Minute}}})
		require.NoError(b, err)
		srv := httptest.NewServer(telemetry.Extract(New(Config{Engine: e})))
		return srv, func() { srv.Close(); _ = e.Shutdown(ctx); ag.Close() }
	}
	off, stopOff := start(coordinator.Tracing{}, nil)
	defer stopOff()
	on, stopOn := start(coordinator.Tracing{Tracer: tel.Tracer(), Provider: "scripted", Model: "scripted"}, telemetry.Client())
	defer stopOn()

	n := 0
	run := func(base string) time.Duration {
		n++
		t0 := time.Now()
		body := fmt.Sprintf(`{"threadId":"trace-bench-%d","runId":"r","protocolVersion":"1.0","messages":[{"id":"u","role":"user","content":"research Go generics"}]}`, n)
		resp, err := http.Post(base+"/agui", "application/json", strings.NewReader(body))
		require.NoError(b, err)
		sc := bufio.NewScanner(resp.Body)
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		sawResult, last := false, ""
		for sc.Scan() {
			if strings.Contains(sc.Text(), `"TOOL_CALL_RESULT"`) && strings.Contains(sc.Text(), `[COMPLETED]`) {
				sawResult = true
			}
			if sc.Text() != "" {
				last = sc.Text()
			}
		}
		resp.Body.Close()
		require.True(b, sawResult)
		require.Contains(b, last, "RUN_FINISHED")
		return time.Since(t0)
	}

	run(off.URL) // warm connections
	run(on.URL)
	var tOff, tOn []time.Duration
	b.ResetTimer()
	for b.Loop() {
		tOff = append(tOff, run(off.URL))
		tOn = append(tOn, run(on.URL))
	}
	b.StopTimer()
	require.NoError(b, tel.Shutdown(ctx))
	require.Positive(b, exported.Load(), "the traced runs were exported")
	slices.Sort(tOff)
	slices.Sort(tOn)
	pct := func(s []time.Duration, p float64) time.Duration { return s[int(float64(len(s)-1)*p)] }
	b.ReportMetric(float64(pct(tOff, 0.5).Microseconds()), "off-p50-µs")
	b.ReportMetric(float64(pct(tOn, 0.5).Microseconds()), "on-p50-µs")
	b.ReportMetric(float64((pct(tOn, 0.5) - pct(tOff, 0.5)).Microseconds()), "tracing-p50-µs")
	b.ReportMetric(float64((pct(tOn, 0.99) - pct(tOff, 0.99)).Microseconds()), "tracing-p99-µs")
}
