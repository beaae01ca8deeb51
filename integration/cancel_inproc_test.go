package integration

// In-process cancellation tests: the coordinator's engine and HTTP surface on httptest, the
// real openai provider against the fake model, and internal/demoagent's research agent as
// the sub-agent, all in this test binary, so that goroutines can be counted and the arrival
// of CancelTask at the agent can be timestamped (BenchmarkDisconnectToCancel).

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	sdk "github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/baton-dev/baton/coordinator"
	"github.com/baton-dev/baton/internal/demoagent"
	"github.com/baton-dev/baton/internal/testutil"
	"github.com/baton-dev/baton/internal/testutil/fakellm"
	"github.com/baton-dev/baton/llm/openai"
	"github.com/baton-dev/baton/metrics"
	"github.com/baton-dev/baton/server"
	"github.com/baton-dev/baton/subagent"
)

// inprocBaton is a coordinator served in process, delegating to an in-process demo agent.
type inprocBaton struct {
	URL    string
	Engine *coordinator.Engine
	// Rec records what the demo agent was asked and what it answered.
	Rec *demoagent.Recorder

	// Log is the engine's log (slog text, info level).
	Log *logBuffer

	mu       sync.Mutex
	onCancel func(taskID string, at time.Time)
	// failCancels is how many CancelTask requests per task are answered 503 (with
	// Retry-After: 0) before one is let through; refused counts them per task.
	failCancels int
	refused     map[string]int

	// transports are the clients' transports, whose idle connections CloseIdle closes.
	transports []interface{ CloseIdleConnections() }
}

// OnCancelTask sets a hook called with the task id and the arrival time of every CancelTask
// request that reaches the demo agent (before the SDK reads it).
func (ib *inprocBaton) OnCancelTask(f func(taskID string, at time.Time)) {
	ib.mu.Lock()
	defer ib.mu.Unlock()
	ib.onCancel = f
}

// CloseIdle closes the idle connections of every client in the setup (coordinator → agent,
// coordinator → model), so that only live work holds goroutines.
func (ib *inprocBaton) CloseIdle() {
	for _, tr := range ib.transports {
		tr.CloseIdleConnections()
	}
}

// watchCancels timestamps CancelTask requests on their way into h and answers the first
// failCancels of each task 503.
func (ib *inprocBaton) watchCancels(h http.Handler) http.Handler {
	return peekA2A(h, func(w http.ResponseWriter, req a2aRequest, at time.Time) bool {
		if !req.isCancel() {
			return true
		}
		ib.mu.Lock()
		f := ib.onCancel
		ib.mu.Unlock()
		if f != nil {
			f(req.Params.ID, at)
		}
		if ib.refuseCancel(req.Params.ID) {
			w.Header().Set("Retry-After", "0")
			http.Error(w, "busy", http.StatusServiceUnavailable)
			return false
		}
		return true
	})
}

// a2aRequest is what a JSON-RPC request to an A2A agent names: its method, the task id of
// a CancelTask, and the task a message continues.
type a2aRequest struct {
	Method string `json:"method"`
	Params struct {
		ID      string `json:"id"`
		Message struct {
			TaskID string `json:"taskId"`
		} `json:"message"`
	} `json:"params"`
}

// isCancel reports whether the request is CancelTask (A2A 1.0) or tasks/cancel (0.3).
func (r a2aRequest) isCancel() bool { return r.Method == "CancelTask" || r.Method == "tasks/cancel" }

// peekA2A shows see each JSON-RPC request POSTed to h's /a2a paths, with the time it
// arrived, before h serves it; see returns false when it has answered w itself.
func peekA2A(h http.Handler, see func(w http.ResponseWriter, req a2aRequest, at time.Time) bool) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		at := time.Now()
		if r.Method == http.MethodPost && strings.HasPrefix(r.URL.Path, "/a2a") {
			body, err := io.ReadAll(r.Body)
			r.Body.Close()
			if err != nil {
				http.Error(w, err.Error(), http.StatusBadRequest)
				return
			}
			r.Body = io.NopCloser(bytes.NewReader(body))
			var req a2aRequest
			if json.Unmarshal(body, &req) == nil && !see(w, req, at) {
				return
			}
		}
		h.ServeHTTP(w, r)
	})
}

// serveDemoAgent serves internal/demoagent with opts (BaseURL set to the server's) behind
// wrap on httptest and returns its URL; the agent is closed in Cleanup, which ends its
// running executions so that open streams finish.
func serveDemoAgent(t testing.TB, opts demoagent.Options, wrap func(http.Handler) http.Handler) string {
	t.Helper()
	srv := httptest.NewUnstartedServer(nil)
	opts.BaseURL = "http://" + srv.Listener.Addr().String()
	h, err := demoagent.NewHandler(opts)
	require.NoError(t, err)
	srv.Config.Handler = wrap(h)
	srv.Start()
	t.Cleanup(func() {
		if c, ok := h.(io.Closer); ok {
			_ = c.Close()
		}
		srv.CloseClientConnections()
		srv.Close()
	})
	return opts.BaseURL
}

// refuseCancel reports whether this CancelTask for id is one of the first failCancels,
// answered 503 instead of being let through to the agent.
func (ib *inprocBaton) refuseCancel(id string) bool {
	ib.mu.Lock()
	defer ib.mu.Unlock()
	if ib.refused[id] >= ib.failCancels {
		return false
	}
	ib.refused[id]++
	return true
}

// inprocOptions tune startInProcess; the zero value keeps the production defaults.
type inprocOptions struct {
	// CancelTimeout is the engine's downstream cancellation deadline (default 5 s).
	CancelTimeout time.Duration
	// SlowStep is the pace of the demo agent's slow mode (default 500 ms, 20 steps).
	SlowStep time.Duration
	// FailCancels is how many CancelTask requests per task the agent answers 503 before
	// it takes one (default 0).
	FailCancels int
	// Metrics, when set, is the engine's recorder.
	Metrics *metrics.Metrics
}

// startInProcess builds the in-process coordinator (engine + HTTP surface) with one agent,
// "research", served by internal/demoagent; the model is fakellm with cancelModel. Everything
// is closed in Cleanup.
func startInProcess(t testing.TB, opts inprocOptions) *inprocBaton {
	t.Helper()
	quiet := slog.New(slog.DiscardHandler)
	ib := &inprocBaton{Rec: &demoagent.Recorder{}, Log: &logBuffer{}, failCancels: opts.FailCancels, refused: map[string]int{}}
	engineLog := slog.New(slog.NewTextHandler(ib.Log, nil))

	agentURL := serveDemoAgent(t, demoagent.Options{Kind: "research", Recorder: ib.Rec, SlowStep: opts.SlowStep}, ib.watchCancels)

	model := fakellm.Start(cancelModel)
	t.Cleanup(model.Close)

	a2aTr, llmTr := subagent.NewHTTPTransport(), &http.Transport{}
	ib.transports = []interface{ CloseIdleConnections() }{a2aTr, llmTr}
	t.Cleanup(ib.CloseIdle)
	m, err := openai.New(openai.Config{BaseURL: model.URL, Model: "fake", APIKey: "fake-key", HTTPClient: &http.Client{Transport: llmTr}})
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	ag, err := subagent.Resolve(ctx, subagent.AgentConfig{Name: "research", URL: agentURL},
		subagent.Options{HTTPClient: &http.Client{Transport: a2aTr}, Logger: quiet})
	require.NoError(t, err)
	t.Cleanup(func() { _ = ag.Close() })

	ib.Engine = launchedEngine(t, coordinator.Config{
		Model: m,
		Agents: []coordinator.Agent{{
			Name: "research", Description: ag.Description, Skills: ag.Skills,
			Timeout: time.Minute, InputRequired: "model", Client: ag,
		}},
		Logger:        engineLog,
		CancelTimeout: opts.CancelTimeout,
		Metrics:       opts.Metrics,
	})
	srv := httptest.NewServer(server.New(server.Config{Engine: coordinator.NewRuns(ib.Engine, coordinator.RunsConfig{}), Logger: engineLog}))
	t.Cleanup(func() {
		srv.CloseClientConnections()
		srv.Close()
		sctx, scancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer scancel()
		_ = ib.Engine.Stop(sctx)
	})
	ib.URL = srv.URL
	return ib
}

// launchedEngine builds an engine of cfg and launches it; the caller shuts it down, after
// closing the HTTP server in front of it.
func launchedEngine(tb testing.TB, cfg coordinator.Config) *coordinator.Engine {
	tb.Helper()
	e, err := coordinator.New(cfg)
	require.NoError(tb, err)
	require.NoError(tb, e.Start(context.Background()))
	return e
}

// waitIdle waits until the engine has no active run.
func (ib *inprocBaton) waitIdle(t testing.TB) {
	t.Helper()
	deadline := time.Now().Add(stormWait)
	for ib.Engine.Active() > 0 {
		if time.Now().After(deadline) {
			t.Fatalf("%d runs still active after %v", ib.Engine.Active(), stormWait)
		}
		time.Sleep(time.Millisecond)
	}
}

// stormWait bounds the wait for a storm's cancellations (the engine's deadline in the storms is
// 120 s: under -race on a loaded 2-core machine 200 held cancellations take tens of seconds).
const stormWait = 90 * time.Second

// assertAgentCancelledAll waits until the demo agent has received n CancelTask requests for
// n distinct tasks, n streaming requests, and every cancelled task ended canceled.
func assertAgentCancelledAll(t *testing.T, rec *demoagent.Recorder, n int) {
	t.Helper()
	assert.EventuallyWithT(t, func(c *assert.CollectT) {
		sends := 0
		for _, m := range rec.Methods() {
			if m == "SendStreamingMessage" {
				sends++
			}
		}
		assert.Equal(c, n, sends, "streaming requests received")
		ids := map[string]bool{}
		for _, id := range rec.Cancels() {
			ids[id] = true
		}
		assert.Len(c, ids, n, "distinct tasks with a CancelTask")
		states := map[sdk.TaskState]int{}
		for id := range ids {
			states[rec.LastState(id)]++
		}
		assert.Equal(c, map[sdk.TaskState]int{sdk.TaskStateCanceled: len(ids)}, states, "final states of the cancelled tasks")
	}, stormWait, 100*time.Millisecond)
}

// leakOptions ignore the idle keep-alive loops of HTTP clients that the test does not own.
var leakOptions = []goleak.Option{
	goleak.IgnoreTopFunction("net/http.(*persistConn).readLoop"),
	goleak.IgnoreTopFunction("net/http.(*persistConn).writeLoop"),
}

// TestDisconnect200InProcess: 200 concurrent runs delegating to the demo agent's slow task,
// disconnected at once. Every task gets CancelTask and ends canceled, no run stays active,
// and the goroutines return to the baseline taken before the storm: the same count, and no
// goroutine that did not exist then (goleak).
//
// The test runs under -race on a small shared machine, where 200 simultaneous cancellations
// (each held until its task id is known) take seconds rather than the ~0.1-0.2 s they take
// without the race detector; so the engine gets a 120 s cancellation deadline instead of 5 s
// and the agent's slow tasks last 300 s (nothing may complete on its own before the
// disconnect). The latency itself is BenchmarkDisconnectToCancel's business.
func TestDisconnect200InProcess(t *testing.T) {
	const n = 200
	ib := startInProcess(t, inprocOptions{CancelTimeout: 120 * time.Second, SlowStep: 15 * time.Second})
	slow := func(i int) string { return fmt.Sprintf("research: slow survey %d", i) }

	// A warm-up run starts whatever the stack starts lazily once (pools, SDK workers).
	warm := startStorm(t, ib.URL, 1, slow, "TEXT_MESSAGE_CONTENT")
	warm.Disconnect()
	assertAgentCancelledAll(t, ib.Rec, 1)
	ib.waitIdle(t)
	ib.CloseIdle()
	baseline := settledGoroutines()
	ignore := goleak.IgnoreCurrent()

	var arrived sync.Map // task id → time the CancelTask reached the agent's HTTP handler
	ib.OnCancelTask(func(id string, at time.Time) { arrived.LoadOrStore(id, at) })
	defer ib.OnCancelTask(nil)
	s := startStorm(t, ib.URL, n, slow, "SUBAGENT_STARTED")
	disconnectAt := time.Now()
	peak := runtime.NumGoroutine()
	s.Disconnect()
	for i, r := range s.Runs {
		assert.Empty(t, eventsOfType(r.Events, "RUN_FINISHED"), "run %d finished before the disconnect", i)
	}
	assertAgentCancelledAll(t, ib.Rec, n+1)
	ib.waitIdle(t)
	ib.CloseIdle()
	// Every run's downstream cancellation has been reported once the engine is idle; the
	// reports are checked with a bounded wait all the same.
	assert.EventuallyWithT(t, func(c *assert.CollectT) {
		assert.Equal(c, map[string]int{"a2a_task/confirmed": n + 1}, ib.Log.cancelResults(), "the engine's cancellation reports")
	}, stormWait, 50*time.Millisecond)
	var lat []time.Duration
	arrived.Range(func(_, v any) bool {
		lat = append(lat, v.(time.Time).Sub(disconnectAt))
		return true
	})
	slices.Sort(lat)
	t.Logf("CancelTask requests that reached the agent's HTTP handler: %d of %d; after the disconnect: p50 %v, max %v",
		len(lat), n, percentile(lat, 50), percentile(lat, 100))

	after := runtime.NumGoroutine()
	for deadline := time.Now().Add(eventualWait); after > baseline && time.Now().Before(deadline); after = runtime.NumGoroutine() {
		time.Sleep(10 * time.Millisecond)
		ib.CloseIdle()
	}
	t.Logf("goroutines: baseline %d, with %d runs %d, after the disconnect %d", baseline, n, peak, after)
	assert.LessOrEqual(t, after, baseline, "goroutines did not return to the baseline")
	assert.NoError(t, goleak.Find(append([]goleak.Option{ignore}, leakOptions...)...), "goroutines left behind by the storm")
}

// settledGoroutines returns the goroutine count once it has stopped changing for a while
// (connection goroutines end asynchronously after their peers close).
func settledGoroutines() int {
	last, stable := runtime.NumGoroutine(), 0
	for i := 0; i < 200 && stable < 5; i++ {
		time.Sleep(10 * time.Millisecond)
		now := runtime.NumGoroutine()
		if now == last {
			stable++
		} else {
			last, stable = now, 0
		}
	}
	return last
}

// logBuffer is the in-process coordinator's log, read back as records.
type logBuffer struct{ testutil.SyncBuffer }

// Records returns the log records with message msg.
func (b *logBuffer) Records(msg string) []logRecord {
	text := b.String()
	var out []logRecord
	for _, line := range strings.Split(text, "\n") {
		if rec := parseLogLine(line); rec["msg"] == msg {
			out = append(out, rec)
		}
	}
	return out
}

// cancelResults counts the engine's "cancelled downstream" records by kind/result (and
// error, when there is one).
func (b *logBuffer) cancelResults() map[string]int {
	out := map[string]int{}
	for _, rec := range b.Records("cancelled downstream") {
		k := rec["kind"] + "/" + rec["result"]
		if rec["err"] != "" {
			k += ": " + rec["err"]
		}
		out[k]++
	}
	return out
}
