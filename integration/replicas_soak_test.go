package integration

// Soak of two coordinator replicas on one PostgreSQL database: 300 runs whose
// starts, stops and resumes each go to replica A, replica B or a round-robin reverse proxy
// in front of both, picked at random (math/rand with a printed seed; BATON_SOAK_SEED
// replays each worker's choices). Afterwards: every interrupt raised was answered and
// its answer reached the peer exactly once, every stop ended its run cancelled, every task
// the peer saw is terminal (none orphaned), and each replica's goroutines (go_goroutines on
// /metrics) are back near their baseline.

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

const (
	// soakRuns is how many runs (POST /agui) the soak makes in all.
	soakRuns = 300
	// soakWorkers is how many operations are in flight at once.
	soakWorkers = 6
	// goroutineSlack allows for idle keep-alive connections a replica keeps to the peer, the
	// model and the MCP server (net/http keeps two per host, two goroutines each).
	goroutineSlack = 16
)

// soakClient makes every soak request on a connection of its own, so that no client
// connection keeps a server goroutine alive after the soak.
var soakClient = &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}

// soakPost POSTs a JSON body and returns the response.
func soakPost(url string, body any) (*http.Response, error) {
	b, err := json.Marshal(body)
	if err != nil {
		return nil, err
	}
	req, err := http.NewRequest(http.MethodPost, url, bytes.NewReader(b))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	return soakClient.Do(req)
}

// soakEvents reads the AG-UI events of an SSE body; stop (may be nil) is called after each
// one and ends the read when it returns true.
func soakEvents(body io.Reader, stop func(map[string]any) bool) ([]map[string]any, error) {
	sc := bufio.NewScanner(body)
	sc.Buffer(make([]byte, 1<<20), 16<<20)
	var out []map[string]any
	for sc.Scan() {
		data, ok := strings.CutPrefix(sc.Text(), "data: ")
		if !ok {
			continue
		}
		var ev map[string]any
		if err := json.Unmarshal([]byte(data), &ev); err != nil {
			return out, err
		}
		out = append(out, ev)
		if stop != nil && stop(ev) {
			return out, nil
		}
	}
	return out, sc.Err()
}

// goroutines reads go_goroutines from a replica's /metrics.
func goroutines(t *testing.T, base string) float64 {
	t.Helper()
	resp, err := soakClient.Get(base + "/metrics")
	require.NoError(t, err)
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "go_goroutines "); ok {
			n, err := strconv.ParseFloat(v, 64)
			require.NoError(t, err)
			return n
		}
	}
	t.Fatal("no go_goroutines on /metrics")
	return 0
}

// soakTally is what the soak's operations did.
type soakTally struct {
	runs, completed, stopped, raised, resumed atomic.Int64
	mu                                        sync.Mutex
	// resumedTasks are the peer task ids of the interrupts that were answered.
	resumedTasks []string
}

// startRoundRobin starts a reverse proxy that sends each request to the next of targets,
// without stickiness, and flushes SSE frames at once.
func startRoundRobin(t *testing.T, targets ...string) string {
	t.Helper()
	var proxies []*httputil.ReverseProxy
	for _, raw := range targets {
		u, err := url.Parse(raw)
		require.NoError(t, err)
		proxies = append(proxies, &httputil.ReverseProxy{
			Rewrite:       func(pr *httputil.ProxyRequest) { pr.SetURL(u) },
			FlushInterval: -1,
			Transport:     &http.Transport{DisableKeepAlives: true},
		})
	}
	var next atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		bufferBody(r)
		proxies[int(next.Add(1))%len(proxies)].ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	return srv.URL
}

func TestReplicasSoak(t *testing.T) {
	t.Parallel()
	p := startReplicaPair(t, testConfig{})
	// Each request goes to replica A, replica B, or the round-robin balancer in front of
	// both, at random.
	replicas := []string{p.a.URL, p.b.URL, startRoundRobin(t, p.a.URL, p.b.URL)}
	seed := uint64(time.Now().UnixNano())
	if s := os.Getenv("BATON_SOAK_SEED"); s != "" {
		var err error
		seed, err = strconv.ParseUint(s, 10, 64)
		require.NoError(t, err, "BATON_SOAK_SEED")
	}
	t.Logf("soak seed %d (BATON_SOAK_SEED=%d replays the routing)", seed, seed)

	var tally soakTally
	// One operation of each kind first, so that lazily started goroutines (pools, caches)
	// are counted in the baseline.
	warm := rand.New(rand.NewPCG(seed, 0))
	for _, kind := range []int{0, 4, 7} {
		require.NoError(t, soakOp(p, replicas, warm, kind, &tally))
	}
	base := []float64{goroutines(t, p.a.URL), goroutines(t, p.b.URL)}
	coordinators := replicas[:2]

	started := time.Now()
	ops := make(chan int)
	errs := make(chan error, soakRuns)
	var wg sync.WaitGroup
	for w := range soakWorkers {
		rng := rand.New(rand.NewPCG(seed, uint64(w+1)))
		wg.Go(func() {
			for range ops {
				if err := soakOp(p, replicas, rng, rng.IntN(10), &tally); err != nil {
					errs <- err
				}
			}
		})
	}
	for i := 0; tally.runs.Load() < soakRuns; i++ {
		ops <- i
		if len(errs) > 0 {
			break
		}
	}
	close(ops)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	elapsed := time.Since(started)
	t.Logf("soak: %d runs in %v (%d completed, %d stopped, %d interrupts raised, %d resumed)",
		tally.runs.Load(), elapsed.Round(time.Millisecond), tally.completed.Load(), tally.stopped.Load(),
		tally.raised.Load(), tally.resumed.Load())

	assert.Equal(t, tally.raised.Load(), tally.resumed.Load(), "no lost interrupt: each one raised was answered")
	follow := peerFollowUps(t, p.peer)
	for _, task := range tally.resumedTasks {
		assert.Equal(t, 1, follow[task], "task %s: the answer reached the peer once", task)
	}
	for task, n := range follow {
		assert.LessOrEqual(t, n, 1, "task %s: no double delivery", task)
	}
	// Cancellations run beside the streams' end: every task the peer saw ends terminal.
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		_, tasks := peerLog(t, p.peer)
		for id, state := range tasks {
			assert.Contains(c, []string{"TASK_STATE_COMPLETED", "TASK_STATE_CANCELED"}, state, "task %s is orphaned at the peer", id)
		}
	}, eventualWait, 100*time.Millisecond)

	for i, r := range coordinators {
		var now float64
		require.EventuallyWithT(t, func(c *assert.CollectT) {
			now = goroutines(t, r)
			assert.LessOrEqual(c, now, base[i]+goroutineSlack, "replica %d: goroutines back near the baseline", i)
		}, eventualWait, 200*time.Millisecond)
		t.Logf("replica %d: %v goroutines before the soak, %v after", i, base[i], now)
	}
}

// soakOp runs one operation of kind (0-3: a delegation that completes; 4-6: one stopped
// mid-delegation through a random replica; 7-9: an interrupt resumed through a random
// replica), each request on a random replica.
func soakOp(p *replicaPair, replicas []string, rng *rand.Rand, kind int, tally *soakTally) error {
	pick := func() string { return replicas[rng.IntN(len(replicas))] }
	thread := newThreadID("soak")
	runID := newThreadID("run")
	switch {
	case kind <= 3:
		tally.runs.Add(1)
		evs, err := soakRun(pick(), hitlInput(thread, runID, hitlCall{Name: "peer", Args: map[string]any{"prompt": "complete it"}}))
		if err != nil {
			return err
		}
		if err := wantOutcome(evs, "success"); err != nil {
			return fmt.Errorf("complete %s: %w", thread, err)
		}
		tally.completed.Add(1)
	case kind <= 6:
		tally.runs.Add(1)
		resp, err := soakPost(pick()+"/agui", hitlInput(thread, runID, hitlCall{Name: "peer", Args: map[string]any{"prompt": "slow work"}}))
		if err != nil {
			return err
		}
		defer resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return fmt.Errorf("stop %s: POST HTTP %d", thread, resp.StatusCode)
		}
		// The sub-agent has streamed: its task exists at the peer.
		head, err := soakEvents(resp.Body, func(ev map[string]any) bool {
			return ev["type"] == "TEXT_MESSAGE_CONTENT" && ev["subagentRunId"] != nil
		})
		if err != nil {
			return err
		}
		stop, err := soakPost(pick()+"/agui/threads/"+thread+"/runs/"+runID+"/stop", map[string]any{})
		if err != nil {
			return err
		}
		stop.Body.Close()
		if stop.StatusCode != http.StatusAccepted {
			return fmt.Errorf("stop %s: HTTP %d", thread, stop.StatusCode)
		}
		rest, err := soakEvents(resp.Body, nil)
		if err != nil {
			return err
		}
		if err := wantOutcome(append(head, rest...), "cancelled"); err != nil {
			return fmt.Errorf("stop %s: %w", thread, err)
		}
		tally.stopped.Add(1)
	default:
		tally.runs.Add(2)
		evs, err := soakRun(pick(), hitlInput(thread, runID, hitlCall{Name: "peer", Args: map[string]any{"prompt": "input please"}}))
		if err != nil {
			return err
		}
		if err := wantOutcome(evs, "interrupt"); err != nil {
			return fmt.Errorf("interrupt %s: %w", thread, err)
		}
		outcome, _ := evs[len(evs)-1]["outcome"].(map[string]any)
		list, _ := outcome["interrupts"].([]any)
		if len(list) != 1 {
			return fmt.Errorf("interrupt %s: %d interrupts", thread, len(list))
		}
		in, _ := list[0].(map[string]any)
		tally.raised.Add(1)
		id, _ := in["id"].(string)
		evs, err = soakRun(pick(), resumeInput(thread, newThreadID("run"), id, map[string]any{"text": "blue"}))
		if err != nil {
			return err
		}
		if err := wantOutcome(evs, "success"); err != nil {
			return fmt.Errorf("resume %s: %w", thread, err)
		}
		if res := toolResults(evs)[in["toolCallId"].(string)]; len(res) != 1 || !strings.Contains(res[0], "done: blue") {
			return fmt.Errorf("resume %s: results %v", thread, res)
		}
		tally.resumed.Add(1)
		tally.mu.Lock()
		tally.resumedTasks = append(tally.resumedTasks, a2aTaskOf(in))
		tally.mu.Unlock()
	}
	return nil
}

// soakRun POSTs a run and reads its whole stream.
func soakRun(base string, in map[string]any) ([]map[string]any, error) {
	resp, err := soakPost(base+"/agui", in)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
		return nil, fmt.Errorf("POST /agui: HTTP %d %s", resp.StatusCode, b)
	}
	return soakEvents(resp.Body, nil)
}

// wantOutcome checks that a stream ends with RUN_FINISHED of the outcome type.
func wantOutcome(evs []map[string]any, typ string) error {
	if len(evs) == 0 {
		return fmt.Errorf("an empty stream")
	}
	last := evs[len(evs)-1]
	outcome, _ := last["outcome"].(map[string]any)
	if last["type"] != "RUN_FINISHED" || outcome["type"] != typ {
		return fmt.Errorf("ended with %v, want RUN_FINISHED{%s}; events %v", last, typ, eventTypes(evs))
	}
	return nil
}
