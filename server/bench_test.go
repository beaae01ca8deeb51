package server

import (
	"fmt"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/baton-dev/baton/coordinator"
)

// BenchmarkDelegationOverhead measures one delegation through Baton (POST /agui, scripted
// model, SSE to the terminal event) against a direct a2a-go streaming call to the same demo
// agent with the same prompt, and reports the difference of the p50 and p99 latencies.
func BenchmarkDelegationOverhead(b *testing.B) {
	agentSrv := startResearchAgent(b)
	e, ag := researchEngine(b, agentSrv.URL, coordinator.Tracing{}, nil)
	defer ag.Close()
	baton := httptest.NewServer(New(Config{Engine: runsOf(e)}))
	defer baton.Close()

	viaDirect := directCall(b, agentSrv.URL, researchPrompt)
	n := 0
	viaBaton := func() time.Duration {
		n++
		return researchRun(b, baton.URL, fmt.Sprintf("bench-%d", n))
	}

	// One call of each warms the connections.
	d, t := alternate(b, 1, viaDirect, viaBaton)
	reportOverhead(b, d, t)
}
