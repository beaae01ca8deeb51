package server

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/baton-dev/baton/coordinator"
	"github.com/baton-dev/baton/telemetry"
)

// BenchmarkDelegationTracing measures one delegation through Baton (POST /agui, scripted
// model, the demo research agent over loopback, SSE to the terminal event) with tracing off
// and with tracing on, exporting every span over OTLP/HTTP to a receiver in the process,
// alternating the two, and reports the p50 of each and their difference.
func BenchmarkDelegationTracing(b *testing.B) {
	ctx := context.Background()
	agentSrv := startResearchAgent(b)

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
		e, ag := researchEngine(b, agentSrv.URL, tracing, hc)
		srv := httptest.NewServer(telemetry.Extract(New(Config{Engine: runsOf(e)})))
		return srv, func() { srv.Close(); _ = e.Stop(ctx); ag.Close() }
	}
	off, stopOff := start(coordinator.Tracing{}, nil)
	defer stopOff()
	on, stopOn := start(coordinator.Tracing{Tracer: tel.Tracer(), Provider: "scripted", Model: "scripted"}, telemetry.Client())
	defer stopOn()

	n := 0
	run := func(base string) time.Duration {
		n++
		return researchRun(b, base, fmt.Sprintf("trace-bench-%d", n))
	}

	// One run of each warms the connections.
	tOff, tOn := alternate(b, 1, func() time.Duration { return run(off.URL) }, func() time.Duration { return run(on.URL) })
	require.NoError(b, tel.Shutdown(ctx))
	require.Positive(b, exported.Load(), "the traced runs were exported")
	reportPair(b, "off", tOff, "on", tOn, "tracing")
}
