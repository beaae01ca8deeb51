package integration

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/a2aproject/a2a-go/v2/a2aclient"
	"github.com/stretchr/testify/require"

	"github.com/baton-dev/baton/internal/testutil/fakellm"
)

// startLongModel is the fake model answering "long: N" with N bytes of text in
// 4-character deltas ("abc " words, one chunk each).
func startLongModel(tb testing.TB) *fakellm.Server {
	tb.Helper()
	s := fakellm.Start(func(req fakellm.Request) fakellm.Reply {
		for i := len(req.Messages) - 1; i >= 0; i-- {
			if m := req.Messages[i]; m.Role == "user" {
				if n, ok := strings.CutPrefix(m.Content, "long: "); ok {
					size, _ := strconv.Atoi(n)
					return fakellm.Reply{Text: strings.Repeat("abc ", size/4)}
				}
				break
			}
		}
		return fakellm.Reply{Text: "fake model: say long: N"}
	})
	tb.Cleanup(s.Close)
	return s
}

// startBenchCoordinator starts bin (a coordinator binary) serving A2A at log level info,
// and returns its base URL and process.
func startBenchCoordinator(tb testing.TB, bin, llmURL string) (string, *proc) {
	tb.Helper()
	cfg := "listen: 127.0.0.1:" + strconv.Itoa(freePort(tb)) + "\nserver:\n  shutdown_grace: 3s\n" +
		"llm:\n  provider: openai\n  base_url: \"" + llmURL + "\"\n  model: fake-model\n  api_key_env: " + llmKeyEnv + "\n" +
		a2aServerYAML("bench") + "store: \"memory:\"\n"
	path := tb.TempDir() + "/baton.yaml"
	require.NoError(tb, os.WriteFile(path, []byte(cfg), 0o600))
	p := startProc(tb, "coordinator", []string{bin, "--config", path, "--log-level", "info"},
		[]string{llmKeyEnv + "=fake-key"}, readyOnLine(`Baton coordinator listening on (http://\S+)`))
	tb.Cleanup(func() { p.Stop() })
	return p.Match[1], p
}

// cpuOf is the CPU time (user and system) a process has used so far, from /proc.
func cpuOf(tb testing.TB, p *proc) time.Duration {
	tb.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", p.cmd.Process.Pid))
	if err != nil {
		skipOrFail(tb, "no /proc: "+err.Error())
	}
	// The fields after the command name (which may hold spaces) end with ')'.
	f := strings.Fields(string(b[strings.LastIndexByte(string(b), ')')+1:]))
	utime, _ := strconv.ParseInt(f[11], 10, 64)
	stime, _ := strconv.ParseInt(f[12], 10, 64)
	const ticks = 100 // USER_HZ on Linux
	return time.Duration(utime+stime) * time.Second / ticks
}

// BenchmarkAnswerCPU: the coordinator's CPU per answer of 8, 32 and 128 KiB streamed by
// the model in 4-character deltas, through AG-UI (POST /agui, read to the end) and through
// A2A (SendStreamingMessage on JSON-RPC with a2a-go's client, read to the end), in the same
// run on the same process. With BATON_BENCH_BASELINE_BIN naming a coordinator binary built
// from an older commit, the A2A answers of the sizes in BATON_BENCH_BASELINE_KIB (default
// 8) are measured on it too, in the same run.
//
//	go test -run '^$' -bench BenchmarkAnswerCPU -benchtime 5x ./integration/
func BenchmarkAnswerCPU(b *testing.B) {
	model := startLongModel(b)
	bin, ok := buildBinaries(b)["coordinator"]
	if !ok {
		b.Fatal("cmd/coordinator has no Go files to build")
	}
	base, p := startBenchCoordinator(b, bin, model.URL)
	for _, kib := range []int{8, 32, 128} {
		size := kib << 10
		b.Run(fmt.Sprintf("%dKiB/agui", kib), func(b *testing.B) {
			benchAnswers(b, p, func() int { return aguiAnswer(b, base, size) }, size)
		})
		b.Run(fmt.Sprintf("%dKiB/a2a", kib), func(b *testing.B) {
			c := newA2AClient(b, base, "jsonrpc")
			benchAnswers(b, p, func() int { return a2aAnswer(b, c, size) }, size)
		})
	}
	old := os.Getenv("BATON_BENCH_BASELINE_BIN")
	if old == "" {
		return
	}
	oldBase, oldP := startBenchCoordinator(b, old, model.URL)
	for _, s := range strings.Split(cmp.Or(os.Getenv("BATON_BENCH_BASELINE_KIB"), "8"), ",") {
		kib, _ := strconv.Atoi(s)
		size := kib << 10
		b.Run(fmt.Sprintf("%dKiB/a2a-baseline", kib), func(b *testing.B) {
			c := newA2AClient(b, oldBase, "jsonrpc")
			benchAnswers(b, oldP, func() int { return a2aAnswer(b, c, size) }, size)
		})
	}
}

// benchAnswers runs answer b.N times and reports the process's CPU per answer.
func benchAnswers(b *testing.B, p *proc, answer func() int, size int) {
	require.Equal(b, size, answer(), "the whole answer (warm-up)")
	before := cpuOf(b, p)
	b.ResetTimer()
	for range b.N {
		if got := answer(); got != size {
			b.Fatalf("answer of %d bytes, want %d", got, size)
		}
	}
	b.StopTimer()
	cpu := cpuOf(b, p) - before
	b.ReportMetric(float64(cpu.Milliseconds())/float64(b.N), "cpu-ms/answer")
}

// aguiAnswer runs "long: size" over AG-UI and returns the length of the answer read.
func aguiAnswer(b *testing.B, base string, size int) int {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	body, _ := json.Marshal(runInput(newThreadID("bench"), newThreadID("run"), "long: "+strconv.Itoa(size)))
	resp, err := postAGUI(ctx, base, body)
	require.NoError(b, err)
	defer resp.Body.Close()
	evs, err := readSSE(resp.Body, nil)
	require.NoError(b, err)
	return len(plainText(evs))
}

// a2aAnswer runs "long: size" over A2A and returns the length of the answer read.
func a2aAnswer(b *testing.B, c *a2aclient.Client, size int) int {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	r := streamA2A(ctx, c, userMessage("long: "+strconv.Itoa(size)), nil)
	require.NoError(b, r.Err)
	require.Equal(b, a2a.TaskStateCompleted, r.state())
	return len(r.Artifact)
}
