package server

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	sdk "github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/a2aproject/a2a-go/v2/a2aclient"
	"github.com/a2aproject/a2a-go/v2/a2aclient/agentcard"
	"github.com/stretchr/testify/require"

	"github.com/baton-dev/baton/coordinator"
	"github.com/baton-dev/baton/internal/demoagent"
	"github.com/baton-dev/baton/llm/scripted"
	"github.com/baton-dev/baton/subagent"
)

// The benchmarks' shared set-up: an engine delegating to one A2A agent, the demo research
// agent, a direct a2a-go call to compare with, and the load peer of the open-runs benchmarks.

// delegatingEngine resolves the one A2A agent (with opts) and returns an engine built from
// cfg whose only agent it is, under the agent's name and timeout, and the agent's client
// (the caller closes it).
func delegatingEngine(tb testing.TB, agent subagent.AgentConfig, opts subagent.Options, cfg coordinator.Config) (*coordinator.Engine, *subagent.Agent) {
	tb.Helper()
	ag, err := subagent.Resolve(context.Background(), agent, opts)
	require.NoError(tb, err)
	cfg.Agents = []coordinator.Agent{{Name: agent.Name, Description: ag.Description, Client: ag, Timeout: agent.Timeout}}
	e := newStartedEngine(tb, cfg)
	return e, ag
}

// startResearchAgent serves the demo research agent (chunks without delay) on loopback
// until the benchmark ends.
func startResearchAgent(tb testing.TB) *httptest.Server {
	tb.Helper()
	srv := httptest.NewUnstartedServer(nil)
	srv.Start()
	tb.Cleanup(srv.Close)
	h, err := demoagent.NewHandler(demoagent.Options{Kind: "research", BaseURL: srv.URL, ChunkDelay: time.Nanosecond})
	require.NoError(tb, err)
	srv.Config.Handler = h
	return srv
}

// researchEngine is an engine with the scripted model delegating to the research agent at
// url, traced by tracing, its A2A client's HTTP client hc (nil: the default).
func researchEngine(tb testing.TB, url string, tracing coordinator.Tracing, hc *http.Client) (*coordinator.Engine, *subagent.Agent) {
	return delegatingEngine(tb, subagent.AgentConfig{Name: "research", URL: url, Timeout: time.Minute}, subagent.Options{HTTPClient: hc},
		coordinator.Config{Model: scripted.New(scripted.Config{}), Tracing: tracing})
}

// researchPrompt is what the research benchmarks ask, through Baton and directly.
const researchPrompt = "research Go generics"

// researchRun posts researchPrompt as a run of thread to Baton at base, reads the stream to
// its end (the agent's [COMPLETED] result, then RUN_FINISHED) and returns how long it took.
func researchRun(b *testing.B, base, thread string) time.Duration {
	start := time.Now()
	body := fmt.Sprintf(`{"threadId":%q,"runId":"r","protocolVersion":"1.0","messages":[{"id":"u","role":"user","content":%q}]}`, thread, researchPrompt)
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
	return time.Since(start)
}

// directCall returns a call of the agent at url with prompt by a2a-go's own client (JSON-RPC,
// streaming, read until the task completed) that reports how long it took: what a delegation
// through Baton is compared with.
func directCall(b *testing.B, url, prompt string) func() time.Duration {
	b.Helper()
	ctx := context.Background()
	card, err := agentcard.DefaultResolver.Resolve(ctx, url)
	require.NoError(b, err)
	direct, err := a2aclient.NewFromCard(ctx, card, a2aclient.WithJSONRPCTransport(&http.Client{}))
	require.NoError(b, err)
	b.Cleanup(func() { _ = direct.Destroy() })
	return func() time.Duration {
		start := time.Now()
		var last sdk.TaskState
		for ev, err := range direct.SendStreamingMessage(ctx, &sdk.SendMessageRequest{Message: sdk.NewMessage(sdk.MessageRoleUser, sdk.NewTextPart(prompt))}) {
			require.NoError(b, err)
			if su, ok := ev.(*sdk.TaskStatusUpdateEvent); ok {
				last = su.Status.State
			}
		}
		require.Equal(b, sdk.TaskStateCompleted, last)
		return time.Since(start)
	}
}

// alternate times first and second alternately, b.N times each, after warm untimed calls
// of each (connections, pools), and returns their durations.
func alternate(b *testing.B, warm int, first, second func() time.Duration) (firsts, seconds []time.Duration) {
	for range warm {
		first()
		second()
	}
	b.ResetTimer()
	for b.Loop() {
		firsts = append(firsts, first())
		seconds = append(seconds, second())
	}
	b.StopTimer()
	return firsts, seconds
}

func pct(s []time.Duration, p float64) time.Duration {
	if len(s) == 0 {
		return 0
	}
	return s[int(float64(len(s)-1)*p)]
}

// reportPair reports the p50 of two interleaved series (base and with, named so) and the p50
// and p99 of their difference (named diff).
func reportPair(b *testing.B, baseName string, base []time.Duration, withName string, with []time.Duration, diff string) {
	slices.Sort(base)
	slices.Sort(with)
	b.ReportMetric(float64(pct(base, 0.5).Microseconds()), baseName+"-p50-µs")
	b.ReportMetric(float64(pct(with, 0.5).Microseconds()), withName+"-p50-µs")
	b.ReportMetric(float64((pct(with, 0.5) - pct(base, 0.5)).Microseconds()), diff+"-p50-µs")
	b.ReportMetric(float64((pct(with, 0.99) - pct(base, 0.99)).Microseconds()), diff+"-p99-µs")
}

// reportOverhead reports a delegation through Baton (t) against the direct call (d).
func reportOverhead(b *testing.B, d, t []time.Duration) {
	reportPair(b, "direct", d, "baton", t, "overhead")
}

// benchRuns is BATON_BENCH_RUNS, default 1,000: how many runs or streams a benchmark holds open.
func benchRuns() int {
	if v, err := strconv.Atoi(os.Getenv("BATON_BENCH_RUNS")); err == nil && v > 0 {
		return v
	}
	return 1000
}

// loadPeer is this test binary started again as the load peer (see loadPeerEnv), and the
// URL of the benchmark agent it serves.
type loadPeer struct {
	cmd      *exec.Cmd
	in       io.Writer
	out      *bufio.Scanner
	agentURL string
}

func startLoadPeer(b *testing.B) *loadPeer {
	b.Helper()
	p := &loadPeer{cmd: exec.Command(os.Args[0], "-test.run=^$")}
	p.cmd.Env = append(os.Environ(), loadPeerEnv+"=1")
	p.cmd.Stderr = os.Stderr
	in, err := p.cmd.StdinPipe()
	require.NoError(b, err)
	outPipe, err := p.cmd.StdoutPipe()
	require.NoError(b, err)
	require.NoError(b, p.cmd.Start())
	p.in, p.out = in, bufio.NewScanner(outPipe)
	require.True(b, p.out.Scan())
	p.agentURL = strings.TrimPrefix(p.out.Text(), "agent ")
	return p
}

// ask sends the peer one command and returns the fields of its answer.
func (p *loadPeer) ask(b *testing.B, cmd string) []string {
	_, err := fmt.Fprintln(p.in, cmd)
	require.NoError(b, err)
	require.True(b, p.out.Scan(), "load peer ended")
	return strings.Fields(p.out.Text())
}

// quit ends the peer and waits for it.
func (p *loadPeer) quit() {
	_, _ = fmt.Fprintln(p.in, "quit")
	_ = p.cmd.Wait()
}
