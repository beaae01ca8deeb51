package mcpclient

import (
	"context"
	"encoding/json"
	"os/exec"
	"slices"
	"testing"
	"time"

	"github.com/baton-dev/baton/bridge"
	"github.com/baton-dev/baton/internal/demomcp"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stretchr/testify/require"
)

// BenchmarkMCPCall compares one tool call (demo divide) through mcpclient
// with the same call made directly with go-sdk, over stdio and stateless
// HTTP. The difference is mcpclient's overhead: argument validation,
// progress routing, result rendering and classification.
//
//	go test -run '^$' -bench BenchmarkMCPCall -benchtime 2000x ./mcpclient/
func BenchmarkMCPCall(b *testing.B) {
	transports := []struct {
		name  string
		setup func(b *testing.B) (ServerConfig, func() mcp.Transport)
	}{
		{"stdio", func(b *testing.B) (ServerConfig, func() mcp.Transport) {
			return demoStdio(), func() mcp.Transport {
				return &mcp.CommandTransport{Command: exec.Command(demoBin, "stdio")}
			}
		}},
		{"http", func(b *testing.B) (ServerConfig, func() mcp.Transport) {
			ctx, cancel := context.WithCancel(context.Background())
			b.Cleanup(cancel)
			url, err := demomcp.Start(ctx, "127.0.0.1:0")
			require.NoError(b, err)
			return ServerConfig{Name: "demo", URL: url}, func() mcp.Transport {
				return &mcp.StreamableClientTransport{Endpoint: url}
			}
		}},
	}
	args := map[string]any{"a": 6, "b": 3}
	rawArgs := json.RawMessage(`{"a":6,"b":3}`)
	for _, tr := range transports {
		cfg, transport := tr.setup(b)
		b.Run(tr.name+"/direct", func(b *testing.B) {
			cs, err := mcp.NewClient(&mcp.Implementation{Name: "bench", Version: "0"}, nil).Connect(context.Background(), transport(), nil)
			require.NoError(b, err)
			defer cs.Close()
			measure(b, func() {
				res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "divide", Arguments: args})
				if err != nil || res.IsError {
					b.Fatal(err, res)
				}
			})
		})
		for _, progress := range []bool{false, true} {
			name := tr.name + "/mcpclient"
			opts := CallOptions{}
			if progress {
				// A progress token: the server may answer with a stream.
				name += "+progress"
				opts.Progress = func(Progress) {}
			}
			b.Run(name, func(b *testing.B) {
				r, err := New(context.Background(), []ServerConfig{cfg}, Options{Logger: testLogger(b)})
				require.NoError(b, err)
				defer r.Close()
				measure(b, func() {
					res, err := r.Call(context.Background(), "demo__divide", rawArgs, opts)
					if err != nil || res.Status != StatusOK {
						b.Fatal(err, res.Status)
					}
				})
			})
		}
	}
}

// measure runs f b.N times and reports the p50 and p99 latency.
func measure(b *testing.B, f func()) {
	f() // warm up (connections, schema caches)
	d := make([]time.Duration, 0, b.N)
	b.ResetTimer()
	for b.Loop() {
		start := time.Now()
		f()
		d = append(d, time.Since(start))
	}
	b.StopTimer()
	slices.Sort(d)
	if len(d) > 0 {
		b.ReportMetric(float64(d[len(d)/2].Microseconds()), "p50-µs")
		b.ReportMetric(float64(d[len(d)*99/100].Microseconds()), "p99-µs")
	}
}

// BenchmarkMCPCallLocalWork measures what mcpclient adds to a call without
// the network: argument decoding and schema check, progress routing and the
// rendering of the result for the LLM.
func BenchmarkMCPCallLocalWork(b *testing.B) {
	sch, err := compileSchema(map[string]any{
		"type":       "object",
		"properties": map[string]any{"a": map[string]any{"type": "number"}, "b": map[string]any{"type": "number"}},
		"required":   []any{"a", "b"},
	})
	require.NoError(b, err)
	r := &Registry{log: testLogger(b)}
	r.progress.live = map[string]func(Progress){}
	res := &mcp.CallToolResult{
		Content:           []mcp.Content{&mcp.TextContent{Text: `{"quotient":2}`}},
		StructuredContent: map[string]any{"quotient": 2},
	}
	raw := json.RawMessage(`{"a":6,"b":3}`)
	b.ReportAllocs()
	for b.Loop() {
		args, ae := decodeArgs(raw)
		if ae != nil || sch.check(args) != nil {
			b.Fatal("invalid")
		}
		tok := r.progress.register(func(Progress) {})
		c := &call{r: r, e: &entry{Tool: Tool{Name: "demo__divide"}}, args: args, token: tok}
		_ = c.params()
		_ = bridge.MCPOK(res, "")
		r.progress.finish(tok)
	}
}

// BenchmarkProgressDeliver is mcpclient's share of one progress notification: the
// handler's lookup of the call its token names.
func BenchmarkProgressDeliver(b *testing.B) {
	p := progressRouter{live: map[string]func(Progress){}}
	for range keepFinished { // finished calls still routable, as in a busy registry
		p.finish(p.register(func(Progress) {}))
	}
	var got float64
	tok := p.register(func(pr Progress) { got = pr.Progress })
	var sdkTok any = tok // go-sdk decodes the token into an any
	b.ReportAllocs()
	for b.Loop() {
		p.deliver(sdkTok, Progress{Progress: got + 1, Total: 100000, Message: "step"})
	}
	require.Positive(b, got)
}
