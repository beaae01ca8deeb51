package integration

import (
	"context"
	"iter"
	"os"
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
// calls included). BATON_BENCH_BASELINE_BIN adds a baseline coordinator, interleaved, as in
// BenchmarkMCPAgentTool.
//
//	go test -run '^$' -bench BenchmarkA2AServerDelegation -benchtime 200x ./integration/
func BenchmarkA2AServerDelegation(b *testing.B) {
	srv := startDoneBottom(b)
	model := startA2AModel(b)
	agents := []agentEntry{{Name: "peer", URL: srv.URL, InputRequired: "ask_user"}}
	cfg := testConfig{LLMURL: model.URL, Agents: agents}.yaml() + a2aServerYAML("inner-baton")
	baton := newA2AClient(b, startCoordinator(b, cfg), "jsonrpc")
	var old *a2aclient.Client
	if bin := os.Getenv("BATON_BENCH_BASELINE_BIN"); bin != "" {
		old = newA2AClient(b, startCoordinatorBin(b, bin, cfg), "jsonrpc")
	}
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
	if old != nil {
		send(old, "peer: work")
	}
	send(direct, "work")
	via := make([]time.Duration, 0, b.N)
	straight := make([]time.Duration, 0, b.N)
	before := make([]time.Duration, 0, b.N)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if old != nil && i%2 == 1 {
			before = append(before, send(old, "peer: work"))
		}
		via = append(via, send(baton, "peer: work"))
		straight = append(straight, send(direct, "work"))
		if old != nil && i%2 == 0 {
			before = append(before, send(old, "peer: work"))
		}
	}
	b.StopTimer()
	reportLatencies(b, "baton", via, straight, before)
}
