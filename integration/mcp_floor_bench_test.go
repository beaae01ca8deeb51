package integration

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/a2aproject/a2a-go/v2/a2aclient"
	"github.com/baton-dev/baton/internal/testutil/pgtest"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stretchr/testify/require"
)

// BenchmarkMCPAgentToolFloor reads BenchmarkMCPAgentTool's overhead against its floor.
// Each iteration makes three calls to the same a2a-go agent, in an order shuffled anew
// each iteration (seeded: each call goes first, second, ... and after each other one
// equally often, so that none always meets the work another process finishes after its
// answer): a blocking SendMessage straight from this process (direct); the tool of
// testdata/mcpbridge, a minimal MCP→A2A bridge in its own process written only with the
// SDKs (bridge); Baton's agent tool on the coordinator binary's /mcp (mcp). Both MCP
// calls use one go-sdk client configuration and must have negotiated the same protocol
// version. It reports the p50 and p99 of each, Baton's overhead over the direct call
// (overhead-p50-ms, the §13 figure), the bridge's (bridge-overhead-p50-ms: what any MCP
// server in another process adds) and Baton's over the bridge (over-bridge-p50-ms: what
// Baton adds beyond that floor). With BATON_BENCH_BRIDGE_STREAM=1 a second bridge that
// streams its call to the agent, as Baton does, takes a fourth turn (bridgestream-...,
// over-bridgestream-p50-ms). With BATON_BENCH_BASELINE_BIN naming a coordinator binary
// built from an older commit, a second coordinator runs it with the same configuration
// and takes a turn too (baseline-p50-ms, baseline-over-bridge-p50-ms). The coordinators
// use the store a user gets by default, SQLite (a file in the benchmark's temporary
// directory); BATON_BENCH_STORE=memory runs them on the memory store, =postgres on
// PostgreSQL (pgtest: a database each).
//
//	go test -run '^$' -bench BenchmarkMCPAgentToolFloor -benchtime 300x -count 3 ./integration/
func BenchmarkMCPAgentToolFloor(b *testing.B) {
	srv, model, _, connect := agentToolBench(b)
	ctx := context.Background()
	cfg := func() string {
		c := testConfig{LLMURL: model.URL, Agents: []agentEntry{{Name: "peer", URL: srv.URL}}, Store: "sqlite:" + filepath.Join(b.TempDir(), "baton.db")}
		switch os.Getenv("BATON_BENCH_STORE") {
		case "memory":
			c.Store = "memory:"
		case "postgres":
			c.Store = pgtest.DSN(b) // a database of its own for each coordinator
		}
		return c.yaml() + "mcp_server:\n  enabled: true\n"
	}
	baton := connect(startCoordinator(b, cfg()))
	bridge := connect(startMCPBridge(b, srv.URL))
	version := baton.InitializeResult().ProtocolVersion
	require.Equal(b, version, bridge.InitializeResult().ProtocolVersion, "the bridge and Baton speak one protocol version")
	direct := newA2AClient(b, srv.URL, "jsonrpc")
	names := []string{"direct", "bridge", "mcp"}
	calls := []func() time.Duration{
		func() time.Duration { return a2aSend(b, ctx, direct) },
		func() time.Duration { return mcpToolCall(b, ctx, bridge) },
		func() time.Duration { return mcpToolCall(b, ctx, baton) },
	}
	if os.Getenv("BATON_BENCH_BRIDGE_STREAM") == "1" {
		streamer := connect(startMCPBridge(b, srv.URL, "-stream"))
		require.Equal(b, version, streamer.InitializeResult().ProtocolVersion)
		names = append(names, "bridgestream")
		calls = append(calls, func() time.Duration { return mcpToolCall(b, ctx, streamer) })
	}
	if bin := os.Getenv("BATON_BENCH_BASELINE_BIN"); bin != "" {
		old := connect(startCoordinatorBin(b, bin, cfg()))
		require.Equal(b, version, old.InitializeResult().ProtocolVersion)
		names = append(names, "baseline")
		calls = append(calls, func() time.Duration { return mcpToolCall(b, ctx, old) })
	}
	for _, c := range calls { // warm: connections, the agent's card
		c()
	}
	lat := make([][]time.Duration, len(calls))
	for k := range lat {
		lat[k] = make([]time.Duration, 0, b.N)
	}
	rng := rand.New(rand.NewPCG(1, 2))
	order := make([]int, len(calls))
	for k := range order {
		order[k] = k
	}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		rng.Shuffle(len(order), func(x, y int) { order[x], order[y] = order[y], order[x] })
		for _, k := range order {
			lat[k] = append(lat[k], calls[k]())
		}
	}
	b.StopTimer()
	require.Empty(b, model.Requests(), "an agent tool never calls the model")
	b.Logf("protocol %s", version)
	p50 := make([]float64, len(calls))
	for k, name := range names {
		p50[k] = percentileMS(lat[k], 0.50)
		b.ReportMetric(p50[k], name+"-p50-ms")
		b.ReportMetric(percentileMS(lat[k], 0.99), name+"-p99-ms")
	}
	b.ReportMetric(p50[2]-p50[0], "overhead-p50-ms")
	b.ReportMetric(p50[1]-p50[0], "bridge-overhead-p50-ms")
	b.ReportMetric(p50[2]-p50[1], "over-bridge-p50-ms")
	for k := 3; k < len(names); k++ {
		switch names[k] {
		case "bridgestream":
			b.ReportMetric(p50[2]-p50[k], "over-bridgestream-p50-ms")
		case "baseline":
			b.ReportMetric(p50[k]-p50[1], "baseline-over-bridge-p50-ms")
		}
	}
}

// mcpToolCall calls the agent tool "peer" on cs and returns how long it took; the answer
// must be the agent's text.
func mcpToolCall(b *testing.B, ctx context.Context, cs *mcp.ClientSession) time.Duration {
	start := time.Now()
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "peer", Arguments: map[string]any{"prompt": "work"}})
	d := time.Since(start)
	require.NoError(b, err)
	require.False(b, res.IsError, "%+v", res.Content)
	require.Len(b, res.Content, 1)
	text, ok := res.Content[0].(*mcp.TextContent)
	require.True(b, ok, "text content: %T", res.Content[0])
	require.Contains(b, text.Text, "done", "the agent's answer")
	return d
}

// a2aSend makes one blocking SendMessage with c and returns how long it took; the task
// must have completed.
func a2aSend(b *testing.B, ctx context.Context, c *a2aclient.Client) time.Duration {
	start := time.Now()
	res, err := c.SendMessage(ctx, &a2a.SendMessageRequest{Message: userMessage("work")})
	d := time.Since(start)
	require.NoError(b, err)
	task, ok := res.(*a2a.Task)
	require.True(b, ok, "a task: %T", res)
	require.Equal(b, a2a.TaskStateCompleted, task.Status.State)
	return d
}

// percentileMS sorts lat and returns its p-th quantile in milliseconds.
func percentileMS(lat []time.Duration, p float64) float64 {
	sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
	return float64(lat[min(len(lat)-1, int(float64(len(lat))*p))].Microseconds()) / 1000
}

var bridgeBuild struct {
	sync.Once
	path string
	err  error
}

// startMCPBridge builds testdata/mcpbridge once, next to the other binaries, starts it
// for the agent at agentURL with the extra flags, and returns its base URL (its MCP
// endpoint is /mcp).
func startMCPBridge(tb testing.TB, agentURL string, flags ...string) string {
	tb.Helper()
	buildBinaries(tb) // creates binDir, which TestMain removes
	bridgeBuild.Do(func() {
		bridgeBuild.path = filepath.Join(binDir, "mcpbridge")
		cmd := exec.Command("go", "build", "-o", bridgeBuild.path, "./integration/testdata/mcpbridge")
		cmd.Dir = repoRoot(tb)
		if out, err := cmd.CombinedOutput(); err != nil {
			bridgeBuild.err = fmt.Errorf("go build ./integration/testdata/mcpbridge: %w\n%s", err, out)
		}
	})
	require.NoError(tb, bridgeBuild.err)
	p := startProc(tb, "mcpbridge", append([]string{bridgeBuild.path, "-agent", agentURL}, flags...), nil,
		readyOnLine(`mcpbridge listening on (http://\S+)`))
	tb.Cleanup(func() {
		if code := p.Stop(); code != 0 {
			tb.Errorf("mcpbridge exited with code %d on SIGTERM, want 0", code)
		}
	})
	return p.Match[1]
}
