package integration

import (
	"context"
	"iter"
	"net/http"
	"net/http/httptest"
	"sort"
	"testing"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/a2aproject/a2a-go/v2/a2aclient"
	"github.com/a2aproject/a2a-go/v2/a2asrv"
	"github.com/stretchr/testify/require"
)

// doneBottom is an a2a-go agent whose every task completes at once with one artifact.
type doneBottom struct{}

func (doneBottom) Execute(_ context.Context, ec *a2asrv.ExecutorContext) iter.Seq2[a2a.Event, error] {
	return func(yield func(a2a.Event, error) bool) {
		if ec.StoredTask == nil && !yield(a2a.NewSubmittedTask(ec, ec.Message), nil) {
			return
		}
		if yield(a2a.NewArtifactEvent(ec, a2a.NewTextPart("done")), nil) {
			yield(a2a.NewStatusUpdateEvent(ec, a2a.TaskStateCompleted, nil), nil)
		}
	}
}

func (doneBottom) Cancel(_ context.Context, ec *a2asrv.ExecutorContext) iter.Seq2[a2a.Event, error] {
	return func(yield func(a2a.Event, error) bool) {
		yield(a2a.NewStatusUpdateEvent(ec, a2a.TaskStateCanceled, nil), nil)
	}
}

// BenchmarkA2AServerDelegation: a blocking SendMessage to Baton serving A2A (one run: the
// fake model, a delegation to an a2a-go agent that completes at once, the model again),
// alternated with the same SendMessage straight to that agent; p50 and p99 of both, and
// the difference of the p50s (what serving the task through Baton adds, two fake model
// calls included).
//
//	go test -run '^$' -bench BenchmarkA2AServerDelegation -benchtime 200x ./integration/
func BenchmarkA2AServerDelegation(b *testing.B) {
	var card a2a.AgentCard
	mux := http.NewServeMux()
	mux.Handle("/a2a", a2asrv.NewJSONRPCHandler(a2asrv.NewHandler(doneBottom{})))
	mux.Handle(a2asrv.WellKnownAgentCardPath, a2asrv.NewAgentCardHandler(a2asrv.AgentCardProducerFn(func(context.Context) (*a2a.AgentCard, error) { return &card, nil })))
	srv := httptest.NewServer(mux)
	b.Cleanup(srv.Close)
	card = a2a.AgentCard{
		Name: "bottom", Description: "completes at once", Version: "1.0.0",
		SupportedInterfaces: []*a2a.AgentInterface{a2a.NewAgentInterface(srv.URL+"/a2a", a2a.TransportProtocolJSONRPC)},
		Capabilities:        a2a.AgentCapabilities{Streaming: true},
		DefaultInputModes:   []string{"text/plain"}, DefaultOutputModes: []string{"text/plain"},
		Skills: []a2a.AgentSkill{{ID: "work", Name: "work", Description: "completes", Tags: []string{"test"}}},
	}
	model := startA2AModel(b)
	baton := newA2AClient(b, startA2ABaton(b, model.URL, "inner-baton", agentEntry{Name: "peer", URL: srv.URL}), "jsonrpc")
	direct := newA2AClient(b, srv.URL, "jsonrpc")
	ctx := context.Background()
	send := func(c *a2aclient.Client, text string) time.Duration {
		start := time.Now()
		res, err := c.SendMessage(ctx, &a2a.SendMessageRequest{Message: userMessage(text)})
		d := time.Since(start)
		require.NoError(b, err)
		task, ok := res.(*a2a.Task)
		require.True(b, ok, "a task: %T", res)
		require.Equal(b, a2a.TaskStateCompleted, task.Status.State)
		return d
	}
	send(baton, "peer: work") // warm: connections, the agent's card
	send(direct, "work")
	via := make([]time.Duration, 0, b.N)
	straight := make([]time.Duration, 0, b.N)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		via = append(via, send(baton, "peer: work"))
		straight = append(straight, send(direct, "work"))
	}
	b.StopTimer()
	pct := func(lat []time.Duration, p float64) float64 {
		sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
		return float64(lat[min(len(lat)-1, int(float64(len(lat))*p))].Microseconds()) / 1000
	}
	b.ReportMetric(pct(via, 0.50), "baton-p50-ms")
	b.ReportMetric(pct(via, 0.99), "baton-p99-ms")
	b.ReportMetric(pct(straight, 0.50), "direct-p50-ms")
	b.ReportMetric(pct(straight, 0.99), "direct-p99-ms")
	b.ReportMetric(pct(via, 0.50)-pct(straight, 0.50), "overhead-p50-ms")
}
