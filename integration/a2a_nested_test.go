package integration

// Nested Batons over A2A (DESIGN §9c, §13): Baton A delegates to Baton B (a2a_server
// enabled), which delegates to the A2A JS SDK peer. A question at the bottom reaches A's
// AG-UI client as an interrupt and the answer reaches the bottom task; a stop at A reaches
// the bottom as CancelTask, every level's task ends canceled, and A's stream ends cancelled
// only after the bottom confirmed.

import (
	"context"
	"encoding/json"
	"fmt"
	"iter"
	"net/http"
	"net/http/httptest"
	"sort"
	"sync/atomic"
	"testing"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/a2aproject/a2a-go/v2/a2aclient"
	"github.com/a2aproject/a2a-go/v2/a2asrv"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// nestedRunSeq numbers the runs of the nested tests.
var nestedRunSeq atomic.Int64

// aguiRun posts one AG-UI run (body) to base and reads its stream to the end.
func aguiRun(ctx context.Context, t testing.TB, base string, body map[string]any) []map[string]any {
	t.Helper()
	b, _ := json.Marshal(body)
	resp, err := postAGUI(ctx, base, b)
	require.NoError(t, err)
	defer resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)
	evs, err := readSSE(resp.Body, nil)
	require.NoError(t, err)
	return evs
}

// streamRun posts one AG-UI run (body) to base and reads its stream in the background: the
// channel gets the run's events once the stream ends (nil when the post failed).
func streamRun(ctx context.Context, base string, body map[string]any) <-chan []map[string]any {
	done := make(chan []map[string]any, 1)
	b, _ := json.Marshal(body)
	go func() {
		resp, err := postAGUI(ctx, base, b)
		if err != nil {
			done <- nil
			return
		}
		defer resp.Body.Close()
		evs, _ := readSSE(resp.Body, nil)
		done <- evs
	}()
	return done
}

// finished returns the run's RUN_FINISHED outcome type and interrupts.
func finished(evs []map[string]any) (outcome string, interrupts []map[string]any) {
	for _, e := range eventsOfType(evs, "RUN_FINISHED") {
		o, _ := e["outcome"].(map[string]any)
		outcome, _ = o["type"].(string)
		ins, _ := o["interrupts"].([]any)
		for _, in := range ins {
			if m, ok := in.(map[string]any); ok {
				interrupts = append(interrupts, m)
			}
		}
	}
	return outcome, interrupts
}

// bTasks lists every task of the test principal at an A2A Baton, by id.
func bTasks(ctx context.Context, t testing.TB, c *a2aclient.Client) map[string]a2a.TaskState {
	t.Helper()
	out := map[string]a2a.TaskState{}
	token := ""
	for {
		page, err := c.ListTasks(ctx, &a2a.ListTasksRequest{PageSize: 100, PageToken: token})
		require.NoError(t, err)
		for _, task := range page.Tasks {
			out[string(task.ID)] = task.Status.State
		}
		if token = page.NextPageToken; token == "" {
			return out
		}
	}
}

func newTaskIDs(before, now map[string]a2a.TaskState) []string {
	var ids []string
	for id := range now {
		if _, ok := before[id]; !ok {
			ids = append(ids, id)
		}
	}
	sort.Strings(ids)
	return ids
}

type nestedStack struct {
	peer, a string
	b       []string // the inner Batons, top first
}

// startNested starts the peer (the JS SDK peer unless bottom is set), levels-1 inner Batons
// (each delegating to the next, the last to the peer) and the top Baton A (AG-UI only), all
// on one fake model.
func startNested(t testing.TB, levels int, bottom string) nestedStack {
	t.Helper()
	var s nestedStack
	if s.peer = bottom; bottom == "" {
		requirePeers(t)
		s.peer = startA2APeerEnv(t)
	}
	model := startA2AModel(t)
	next := agentEntry{Name: "peer", URL: s.peer}
	for i := levels - 1; i >= 1; i-- {
		u := startA2ABaton(t, model.URL, fmt.Sprintf("baton-%d", i), next)
		s.b = append([]string{u}, s.b...)
		next = agentEntry{Name: fmt.Sprintf("inner%d", i), URL: u}
	}
	next.InputRequired = "ask_user"
	s.a = startCoordinator(t, testConfig{LLMURL: model.URL, Agents: []agentEntry{next}}.yaml())
	return s
}

// prompt is the user text that makes every level delegate down to the peer with word.
func (s nestedStack) prompt(word string) string {
	p := "peer: " + word
	for i := len(s.b); i >= 1; i-- {
		p = fmt.Sprintf("inner%d: %s", i, p)
	}
	return p
}

func TestA2ANested(t *testing.T) {
	t.Parallel()
	s := startNested(t, 2, "")
	bc := newA2AClient(t, s.b[0], "jsonrpc")
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()

	t.Run("question up, answer down", func(t *testing.T) {
		peerBefore, _ := peerTasks(t, s.peer)
		bBefore := bTasks(ctx, t, bc)
		thread := newThreadID("nested-q")
		evs := aguiRun(ctx, t, s.a, runInput(thread, "q1", s.prompt("input")))
		outcome, ins := finished(evs)
		require.Equal(t, "interrupt", outcome, "events: %v", eventTypes(evs))
		require.Len(t, ins, 1)
		assert.Contains(t, ins[0]["message"], "what colour?", "the bottom's question reaches the top")
		id, _ := ins[0]["interruptId"].(string)
		if id == "" {
			id, _ = ins[0]["id"].(string)
		}
		require.NotEmpty(t, id)

		resume := runInput(thread, "q2", "")
		resume["messages"] = []any{}
		resume["resume"] = []any{map[string]any{"interruptId": id, "status": "resolved", "payload": map[string]any{"text": "blue"}}}
		evs = aguiRun(ctx, t, s.a, resume)
		outcome, _ = finished(evs)
		assert.Equal(t, "success", outcome, "events: %v", eventTypes(evs))
		assert.Equal(t, modelDoneText, plainText(evs))

		tasks, _ := peerTasks(t, s.peer)
		ids := newKeys(peerBefore, tasks)
		if assert.Len(t, ids, 1, "one task at the bottom") {
			assert.Equal(t, "TASK_STATE_COMPLETED", tasks[ids[0]])
			assert.Equal(t, 1, peerFollowUps(t, s.peer)[ids[0]], "the answer reached the bottom task once")
		}
		bNow := bTasks(ctx, t, bc)
		bIDs := newTaskIDs(bBefore, bNow)
		if assert.Len(t, bIDs, 1, "one task at B") {
			assert.Equal(t, a2a.TaskStateCompleted, bNow[bIDs[0]])
		}
	})

	t.Run("stop at the top", func(t *testing.T) {
		peerBefore, _ := peerTasks(t, s.peer)
		bBefore := bTasks(ctx, t, bc)
		thread := newThreadID("nested-stop")
		done := streamRun(ctx, s.a, runInput(thread, "s1", s.prompt("slow")))
		assert.EventuallyWithT(t, func(c *assert.CollectT) {
			tasks, _ := peerTasks(c, s.peer)
			ids := newKeys(peerBefore, tasks)
			if assert.Len(c, ids, 1) {
				assert.Equal(c, "TASK_STATE_WORKING", tasks[ids[0]])
			}
		}, eventualWait, 20*time.Millisecond)
		status, body := postStop(t, s.a, thread, "s1")
		require.Equal(t, http.StatusAccepted, status, "stop: %v", body)
		evs := <-done
		outcome, _ := finished(evs)
		require.Equal(t, "cancelled", outcome, "events: %v", eventTypes(evs))

		// A's stream ended: the bottom has confirmed already (no waiting here).
		tasks, cancelled := peerTasks(t, s.peer)
		ids := newKeys(peerBefore, tasks)
		require.Len(t, ids, 1)
		assert.True(t, cancelled[ids[0]], "the bottom peer got CancelTask")
		assert.Equal(t, "TASK_STATE_CANCELED", tasks[ids[0]])
		bNow := bTasks(ctx, t, bc)
		bIDs := newTaskIDs(bBefore, bNow)
		if assert.Len(t, bIDs, 1, "one task at B") {
			assert.Equal(t, a2a.TaskStateCanceled, bNow[bIDs[0]])
		}
	})
}

// TestA2ANestedCancelBeforeTaskID: a stop at A while the bottom peer has not yet named its
// task (its first event comes after DELAY_MS): B holds the CancelTask until the id is known,
// the bottom task ends canceled, and both levels end cancelled.
func TestA2ANestedCancelBeforeTaskID(t *testing.T) {
	t.Parallel()
	s := startNested(t, 2, "")
	bc := newA2AClient(t, s.b[0], "jsonrpc")
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	peerBefore, _ := peerTasks(t, s.peer)
	bBefore := bTasks(ctx, t, bc)
	thread := newThreadID("nested-early")
	done := streamRun(ctx, s.a, runInput(thread, "e1", s.prompt("delay")))
	// B's run has sent the message to the peer, which has no task yet (it names it only
	// after DELAY_MS).
	sendsBefore := peerSends(t, s.peer)
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		assert.Greater(c, peerSends(t, s.peer), sendsBefore)
	}, eventualWait, 10*time.Millisecond)
	tasks, _ := peerTasks(t, s.peer)
	require.Empty(t, newKeys(peerBefore, tasks), "the peer named its task before the stop: the test proves nothing")
	status, body := postStop(t, s.a, thread, "e1")
	require.Equal(t, http.StatusAccepted, status, "stop: %v", body)
	evs := <-done
	outcome, _ := finished(evs)
	require.Equal(t, "cancelled", outcome, "events: %v", eventTypes(evs))
	assertPeerCancelled(t, s.peer, peerBefore)
	bNow := bTasks(ctx, t, bc)
	if ids := newTaskIDs(bBefore, bNow); assert.Len(t, ids, 1) {
		assert.Equal(t, a2a.TaskStateCanceled, bNow[ids[0]])
	}
}

// peerSends counts the messages the peer has received (its log's sends).
func peerSends(t testing.TB, peer string) int {
	t.Helper()
	resp, err := http.Get(peer + "/test/log")
	require.NoError(t, err)
	defer resp.Body.Close()
	var log struct {
		Sends []string `json:"sends"`
	}
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&log))
	return len(log.Sends)
}

// benchBottom is the bottom agent of the benchmark: an a2a-go server whose task works until
// it is cancelled, and which notes when each CancelTask arrives.
type benchBottom struct {
	started chan struct{}
	cancels chan time.Time
}

func (b *benchBottom) Execute(ctx context.Context, ec *a2asrv.ExecutorContext) iter.Seq2[a2a.Event, error] {
	return func(yield func(a2a.Event, error) bool) {
		if ec.StoredTask == nil && !yield(a2a.NewSubmittedTask(ec, ec.Message), nil) {
			return
		}
		if !yield(a2a.NewStatusUpdateEvent(ec, a2a.TaskStateWorking, nil), nil) {
			return
		}
		b.started <- struct{}{}
		<-ctx.Done()
	}
}

func (b *benchBottom) Cancel(_ context.Context, ec *a2asrv.ExecutorContext) iter.Seq2[a2a.Event, error] {
	return func(yield func(a2a.Event, error) bool) {
		b.cancels <- time.Now()
		yield(a2a.NewStatusUpdateEvent(ec, a2a.TaskStateCanceled, nil), nil)
	}
}

// startBenchBottom serves a benchBottom on loopback.
func startBenchBottom(t testing.TB) (*benchBottom, string) {
	b := &benchBottom{started: make(chan struct{}, 1), cancels: make(chan time.Time, 1)}
	var card a2a.AgentCard
	mux := http.NewServeMux()
	mux.Handle("/a2a", a2asrv.NewJSONRPCHandler(a2asrv.NewHandler(b)))
	mux.Handle(a2asrv.WellKnownAgentCardPath, a2asrv.NewAgentCardHandler(a2asrv.AgentCardProducerFn(func(context.Context) (*a2a.AgentCard, error) { return &card, nil })))
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	card = a2a.AgentCard{
		Name: "bottom", Description: "works until cancelled", Version: "1.0.0",
		SupportedInterfaces: []*a2a.AgentInterface{a2a.NewAgentInterface(srv.URL+"/a2a", a2a.TransportProtocolJSONRPC)},
		Capabilities:        a2a.AgentCapabilities{Streaming: true},
		DefaultInputModes:   []string{"text/plain"}, DefaultOutputModes: []string{"text/plain"},
		Skills: []a2a.AgentSkill{{ID: "work", Name: "work", Description: "works until cancelled", Tags: []string{"test"}}},
	}
	return b, srv.URL
}

// BenchmarkA2ANestedStop: three nested Batons (A → B → C) over an a2a-go agent that works
// until cancelled; a stop at A's AG-UI endpoint, timed until the bottom agent receives
// CancelTask (DESIGN §13: < 50 ms p99). Reports p50 and p99 over b.N runs; each run also
// waits until A's stream has ended cancelled.
//
//	go test -run '^$' -bench BenchmarkA2ANestedStop -benchtime 200x ./integration/
func BenchmarkA2ANestedStop(b *testing.B) {
	bottom, url := startBenchBottom(b)
	s := startNested(b, 3, url)
	ctx := context.Background()
	lat := make([]time.Duration, 0, b.N)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		thread := newThreadID("bench-stop")
		run := fmt.Sprintf("b%d", nestedRunSeq.Add(1))
		body, _ := json.Marshal(runInput(thread, run, s.prompt("work")))
		resp, err := postAGUI(ctx, s.a, body)
		require.NoError(b, err)
		ended := make(chan string, 1)
		go func() {
			defer resp.Body.Close()
			evs, _ := readSSE(resp.Body, nil)
			o, _ := finished(evs)
			ended <- o
		}()
		select {
		case <-bottom.started:
		case o := <-ended:
			b.Fatalf("the run ended (%q) before the bottom task started", o)
		}
		b.StartTimer()
		start := time.Now()
		status, _ := postStop(b, s.a, thread, run)
		require.Equal(b, http.StatusAccepted, status)
		at := <-bottom.cancels
		lat = append(lat, at.Sub(start))
		b.StopTimer()
		require.Equal(b, "cancelled", <-ended)
	}
	sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
	pct := func(p float64) time.Duration { return lat[min(len(lat)-1, int(float64(len(lat))*p))] }
	b.ReportMetric(float64(pct(0.50).Microseconds())/1000, "p50-ms")
	b.ReportMetric(float64(pct(0.99).Microseconds())/1000, "p99-ms")
}
