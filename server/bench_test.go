package server

import (
	"bufio"
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	sdk "github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/a2aproject/a2a-go/v2/a2aclient"
	"github.com/a2aproject/a2a-go/v2/a2aclient/agentcard"
	"github.com/stretchr/testify/require"

	"github.com/baton-dev/baton/a2a"
	"github.com/baton-dev/baton/coordinator"
	"github.com/baton-dev/baton/internal/demoagent"
	"github.com/baton-dev/baton/llm/scripted"
)

// BenchmarkDelegationOverhead measures one delegation through Baton (POST /agui, scripted
// model, SSE to the terminal event) against a direct a2a-go streaming call to the same demo
// agent with the same prompt, and reports the difference of the p50 and p99 latencies.
func BenchmarkDelegationOverhead(b *testing.B) {
	ctx := context.Background()
	agentSrv := httptest.NewUnstartedServer(nil)
	agentSrv.Start()
	defer agentSrv.Close()
	h, err := demoagent.NewHandler(demoagent.Options{Kind: "research", BaseURL: agentSrv.URL, ChunkDelay: time.Nanosecond})
	require.NoError(b, err)
	agentSrv.Config.Handler = h

	ag, err := a2a.Resolve(ctx, a2a.AgentConfig{Name: "research", URL: agentSrv.URL, Timeout: time.Minute}, a2a.Options{})
	require.NoError(b, err)
	defer ag.Close()
	e, err := coordinator.New(coordinator.Config{Model: scripted.New(scripted.Config{}),
		Agents: []coordinator.Agent{{Name: "research", Description: ag.Description, Client: ag, Timeout: time.Minute}}})
	require.NoError(b, err)
	baton := httptest.NewServer(New(Config{Engine: e}))
	defer baton.Close()

	card, err := agentcard.DefaultResolver.Resolve(ctx, agentSrv.URL)
	require.NoError(b, err)
	direct, err := a2aclient.NewFromCard(ctx, card, a2aclient.WithJSONRPCTransport(&http.Client{}))
	require.NoError(b, err)
	defer direct.Destroy()

	const prompt = "research Go generics"
	viaDirect := func() time.Duration {
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
	n := 0
	viaBaton := func() time.Duration {
		n++
		start := time.Now()
		body := fmt.Sprintf(`{"threadId":"bench-%d","runId":"r","protocolVersion":"1.0","messages":[{"id":"u","role":"user","content":%q}]}`, n, prompt)
		resp, err := http.Post(baton.URL+"/agui", "application/json", strings.NewReader(body))
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

	viaDirect() // warm connections
	viaBaton()
	var d, t []time.Duration
	b.ResetTimer()
	for b.Loop() {
		d = append(d, viaDirect())
		t = append(t, viaBaton())
	}
	b.StopTimer()
	slices.Sort(d)
	slices.Sort(t)
	pct := func(s []time.Duration, p float64) time.Duration { return s[int(float64(len(s)-1)*p)] }
	b.ReportMetric(float64(pct(d, 0.5).Microseconds()), "direct-p50-µs")
	b.ReportMetric(float64(pct(t, 0.5).Microseconds()), "baton-p50-µs")
	b.ReportMetric(float64((pct(t, 0.5) - pct(d, 0.5)).Microseconds()), "overhead-p50-µs")
	b.ReportMetric(float64((pct(t, 0.99) - pct(d, 0.99)).Microseconds()), "overhead-p99-µs")
}
