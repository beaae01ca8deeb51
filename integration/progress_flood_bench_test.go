package integration

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/baton-dev/baton/internal/testutil/fakellm"
	"github.com/baton-dev/baton/llm"
)

var floodBuild struct {
	sync.Once
	path string
	err  error
}

// buildFloodMCP builds coordinator/testdata/floodmcp once, next to the other binaries.
func buildFloodMCP(tb testing.TB) string {
	tb.Helper()
	buildBinaries(tb) // creates binDir, which TestMain removes
	floodBuild.Do(func() {
		floodBuild.path = filepath.Join(binDir, "floodmcp")
		cmd := exec.Command("go", "build", "-o", floodBuild.path, "./coordinator/testdata/floodmcp")
		cmd.Dir = repoRoot(tb)
		if out, err := cmd.CombinedOutput(); err != nil {
			floodBuild.err = fmt.Errorf("go build ./coordinator/testdata/floodmcp: %w\n%s", err, out)
		}
	})
	require.NoError(tb, floodBuild.err)
	return floodBuild.path
}

// gcLines counts the garbage collections a process started with GODEBUG=gctrace=1 has
// reported on its standard error so far.
func gcLines(tb testing.TB, p *proc) int {
	tb.Helper()
	b, err := os.ReadFile(p.stderrPath)
	require.NoError(tb, err)
	n := 0
	for line := range bytes.Lines(b) {
		if bytes.HasPrefix(line, []byte("gc ")) {
			n++
		}
	}
	return n
}

// BenchmarkProgressFloodBinary: the coordinator binary (memory store) runs one MCP call
// whose server (coordinator/testdata/floodmcp, a go-sdk server in its own process) sends
// 100,000 progress notifications as fast as it can. Reported per run: the coordinator
// process's CPU (from /proc), its garbage collections (GODEBUG=gctrace=1 on its
// standard error), and the progress events its AG-UI stream carried (coalesced). It is
// the in-process BenchmarkProgressFlood of the coordinator package on the real binary,
// whose live heap is the one the collector's pace depends on.
//
//	go test -run '^$' -bench BenchmarkProgressFloodBinary -benchtime 3x ./integration/
func BenchmarkProgressFloodBinary(b *testing.B) {
	const n = 100000
	server := startProc(b, "floodmcp", []string{buildFloodMCP(b)}, nil, readyOnLine(`^(http://\S+)`))
	b.Cleanup(func() { server.Stop() })
	model := fakellm.Start(func(req fakellm.Request) fakellm.Reply {
		if m := req.Messages; len(m) > 0 && m[len(m)-1].Role == "tool" {
			return fakellm.Reply{Text: "flooded"}
		}
		return fakellm.Reply{ToolCalls: []llm.ToolCall{{Name: "f__flood", Arguments: fmt.Sprintf(`{"n":%d}`, n)}}}
	})
	b.Cleanup(model.Close)
	bin, ok := buildBinaries(b)["coordinator"]
	if !ok {
		b.Fatal("cmd/coordinator has no Go files to build")
	}
	cfg := "listen: 127.0.0.1:" + strconv.Itoa(freePort(b)) + "\n" +
		testConfig{LLMURL: model.URL, MCP: []mcpServerEntry{{Name: "f", URL: server.Match[1]}}, ToolTimeout: "5m"}.yaml()
	path := filepath.Join(b.TempDir(), "baton.yaml")
	require.NoError(b, os.WriteFile(path, []byte(cfg), 0o600))
	p := startProc(b, "coordinator", []string{bin, "--config", path, "--log-level", "info"},
		[]string{llmKeyEnv + "=fake-key", "GODEBUG=gctrace=1"}, readyOnLine(`Baton coordinator listening on (http://\S+)`))
	b.Cleanup(func() { p.Stop() })
	base := p.Match[1]
	waitMCPSettled(b, base)

	var cpu time.Duration
	var gcs, events int
	var last float64
	for b.Loop() {
		cpu0, gc0 := cpuOf(b, p), gcLines(b, p)
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
		body, _ := json.Marshal(runInput(newThreadID("flood"), newThreadID("run"), "flood"))
		resp, err := postAGUI(ctx, base, body)
		require.NoError(b, err)
		events, last = 0, 0
		evs, err := readSSE(resp.Body, func(ev map[string]any) {
			if ev["type"] == "ACTIVITY_SNAPSHOT" && ev["activityType"] == "progress" {
				events++
				content, _ := ev["content"].(map[string]any)
				last, _ = content["progress"].(float64)
			}
		})
		_ = resp.Body.Close()
		cancel()
		require.NoError(b, err)
		require.Equal(b, "RUN_FINISHED", evs[len(evs)-1]["type"], "the run ends")
		cpu, gcs = cpuOf(b, p)-cpu0, gcLines(b, p)-gc0
	}
	require.Positive(b, events, "progress events streamed")
	require.Less(b, events, n/20, "coalesced")
	b.ReportMetric(cpu.Seconds(), "cpu-s")
	b.ReportMetric(float64(gcs), "gcs")
	b.ReportMetric(float64(events), "progress-events")
	b.ReportMetric(last, "last-progress")
}
