package integration

// Benchmarks of replicas on one database (BENCHMARKS.md), in process so that the
// arrival of a request at the sub-agent can be timestamped: engines and HTTP surfaces on
// httptest, each replica with a store connection pool of its own, the real openai provider
// against the fake model, internal/demoagent's travel and research agents.
//
//   - BenchmarkReplicasRuns: runs per second through 1 replica on SQLite, 1 and 2 replicas on
//     PostgreSQL (requests spread round robin), the same workload: one delegation that
//     completes at once, 8 clients.
//   - BenchmarkReplicasStopToCancelTask: a stop posted to replica B for a delegation running
//     on replica A, to the arrival of CancelTask at the agent.
//   - BenchmarkReplicasResumeToAnswer: a resume of an input-required interrupt raised on A,
//     posted to B, to the arrival of the answer (the follow-up message) at the agent.

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/baton-dev/baton/coordinator"
	"github.com/baton-dev/baton/internal/demoagent"
	"github.com/baton-dev/baton/internal/testutil/fakellm"
	"github.com/baton-dev/baton/internal/testutil/pgtest"
	"github.com/baton-dev/baton/llm/openai"
	"github.com/baton-dev/baton/server"
	"github.com/baton-dev/baton/store"
	"github.com/baton-dev/baton/subagent"
)

// agentArrivals timestamps requests on their way into a demo agent: CancelTask by task id,
// and messages sent to an existing task (follow-ups) by task id.
type agentArrivals struct {
	mu       sync.Mutex
	cancels  map[string]chan time.Time
	followUp map[string]chan time.Time
}

func (a *agentArrivals) slot(m map[string]chan time.Time, id string) chan time.Time {
	a.mu.Lock()
	defer a.mu.Unlock()
	c := m[id]
	if c == nil {
		c = make(chan time.Time, 1)
		m[id] = c
	}
	return c
}

// wrap timestamps the CancelTask requests and follow-ups on their way into h.
func (a *agentArrivals) wrap(h http.Handler) http.Handler {
	return peekA2A(h, func(_ http.ResponseWriter, req a2aRequest, at time.Time) bool {
		var c chan time.Time
		switch {
		case req.isCancel():
			c = a.slot(a.cancels, req.Params.ID)
		case req.Params.Message.TaskID != "":
			c = a.slot(a.followUp, req.Params.Message.TaskID)
		}
		if c != nil {
			select {
			case c <- at:
			default:
			}
		}
		return true
	})
}

// benchReplicas starts n replicas on dsn (a fresh database), with the travel and research
// demo agents behind arrivals.
func benchReplicas(b *testing.B, dsn string, n int) ([]string, *agentArrivals) {
	b.Helper()
	quiet := slog.New(slog.DiscardHandler)
	arr := &agentArrivals{cancels: map[string]chan time.Time{}, followUp: map[string]chan time.Time{}}
	agentURLs := map[string]string{}
	for _, kind := range []string{"travel", "research"} {
		agentURLs[kind] = serveDemoAgent(b, demoagent.Options{Kind: kind, ChunkDelay: time.Millisecond, SlowStep: 200 * time.Millisecond}, arr.wrap)
	}
	model := fakellm.Start(cancelModel)
	b.Cleanup(model.Close)

	var urls []string
	for range n {
		st, err := store.Open(context.Background(), dsn)
		if err != nil {
			b.Fatal(err)
		}
		m, err := openai.New(openai.Config{BaseURL: model.URL, Model: "fake", APIKey: "fake-key"})
		if err != nil {
			b.Fatal(err)
		}
		var agents []coordinator.Agent
		for _, kind := range []string{"travel", "research"} {
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			ag, err := subagent.Resolve(ctx, subagent.AgentConfig{Name: kind, URL: agentURLs[kind]}, subagent.Options{Logger: quiet})
			cancel()
			if err != nil {
				b.Fatal(err)
			}
			b.Cleanup(func() { _ = ag.Close() })
			agents = append(agents, coordinator.Agent{Name: kind, Description: ag.Description, Skills: ag.Skills,
				Timeout: time.Minute, InputRequired: "ask_user", Client: ag})
		}
		e := launchedEngine(b, coordinator.Config{Model: m, Agents: agents, Logger: quiet, Store: st,
			Heartbeat: 200 * time.Millisecond, Lease: 5 * time.Second})
		srv := httptest.NewServer(server.New(server.Config{Engine: coordinator.NewRuns(e, coordinator.RunsConfig{}), Logger: quiet, MaxActiveRuns: 10000}))
		b.Cleanup(func() {
			srv.CloseClientConnections()
			srv.Close()
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			_ = e.Stop(ctx)
			_ = st.Close()
		})
		urls = append(urls, srv.URL)
	}
	return urls, arr
}

// benchPost POSTs a JSON body and returns the response.
func benchPost(b *testing.B, url string, body any) *http.Response {
	raw, err := json.Marshal(body)
	if err != nil {
		b.Fatal(err)
	}
	req, err := http.NewRequest(http.MethodPost, url, bytes.NewReader(raw))
	if err != nil {
		b.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		b.Fatal(err)
	}
	if resp.StatusCode != http.StatusOK && resp.StatusCode != http.StatusAccepted {
		msg, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		b.Fatalf("POST %s: HTTP %d %s", url, resp.StatusCode, msg)
	}
	return resp
}

// benchEvents reads AG-UI events until stop says so or the stream ends.
func benchEvents(body io.Reader, stop func(map[string]any) bool) []map[string]any {
	sc := bufio.NewScanner(body)
	sc.Buffer(make([]byte, 1<<20), 16<<20)
	var out []map[string]any
	for sc.Scan() {
		if data, ok := strings.CutPrefix(sc.Text(), "data: "); ok {
			var ev map[string]any
			if json.Unmarshal([]byte(data), &ev) == nil {
				out = append(out, ev)
				if stop != nil && stop(ev) {
					break
				}
			}
		}
	}
	return out
}

// reportPercentiles reports the p50 and p99 of lat in ms.
func reportPercentiles(b *testing.B, lat []time.Duration) {
	slices.Sort(lat)
	b.ReportMetric(float64(lat[len(lat)/2].Microseconds())/1000, "p50-ms")
	b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds())/1000, "p99-ms")
}

// benchDSN returns a fresh database of each backend.
func benchDSN(b *testing.B, backend string) string {
	if backend == "sqlite" {
		return "sqlite:" + filepath.Join(b.TempDir(), "baton.db")
	}
	return pgtest.DSN(b)
}

func BenchmarkReplicasRuns(b *testing.B) {
	for _, c := range []struct {
		name     string
		backend  string
		replicas int
	}{{"sqlite-1", "sqlite", 1}, {"postgres-1", "postgres", 1}, {"postgres-2", "postgres", 2}} {
		b.Run(c.name, func(b *testing.B) {
			urls, _ := benchReplicas(b, benchDSN(b, c.backend), c.replicas)
			var next, failed atomic.Int64
			b.SetParallelism(4) // 4 x GOMAXPROCS (2) = 8 clients
			b.ResetTimer()
			start := time.Now()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					i := next.Add(1)
					base := urls[int(i)%len(urls)]
					thread := fmt.Sprintf("runs-%s-%d", c.name, i)
					resp := benchPost(b, base+"/agui", runInput(thread, "r", "travel: a trip to Lisbon on 2026-12-01"))
					evs := benchEvents(resp.Body, nil)
					resp.Body.Close()
					if len(evs) == 0 || evs[len(evs)-1]["type"] != "RUN_FINISHED" {
						failed.Add(1)
					}
				}
			})
			b.StopTimer()
			b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "runs/s")
			b.ReportMetric(float64(failed.Load()), "failed")
		})
	}
}

func BenchmarkReplicasStopToCancelTask(b *testing.B) {
	urls, arr := benchReplicas(b, pgtest.DSN(b), 2)
	lat := make([]time.Duration, 0, b.N)
	b.ResetTimer()
	for i := range b.N {
		thread := fmt.Sprintf("stop-%d", i)
		resp := benchPost(b, urls[0]+"/agui", runInput(thread, "r", "research: slow survey"))
		benchEvents(resp.Body, func(ev map[string]any) bool {
			// The sub-agent's progress text: its task exists.
			return ev["type"] == "TEXT_MESSAGE_CONTENT" && ev["subagentRunId"] != nil
		})
		start := time.Now()
		st := benchPost(b, urls[1]+"/agui/threads/"+thread+"/runs/r/stop", map[string]any{})
		st.Body.Close()
		at := arr.nextCancel(b)
		lat = append(lat, at.Sub(start))
		benchEvents(resp.Body, nil)
		resp.Body.Close()
	}
	b.StopTimer()
	reportPercentiles(b, lat)
}

// nextCancel waits for a CancelTask not seen before and returns its arrival.
func (a *agentArrivals) nextCancel(b *testing.B) time.Time {
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		a.mu.Lock()
		for _, c := range a.cancels {
			select {
			case at := <-c:
				a.mu.Unlock()
				return at
			default:
			}
		}
		a.mu.Unlock()
		time.Sleep(200 * time.Microsecond)
	}
	b.Fatal("no CancelTask reached the agent")
	return time.Time{}
}

func BenchmarkReplicasResumeToAnswer(b *testing.B) {
	urls, arr := benchReplicas(b, pgtest.DSN(b), 2)
	lat := make([]time.Duration, 0, b.N)
	b.ResetTimer()
	for i := range b.N {
		b.StopTimer()
		thread := fmt.Sprintf("resume-%d", i)
		resp := benchPost(b, urls[0]+"/agui", runInput(thread, "r1", "travel: plan a trip"))
		evs := benchEvents(resp.Body, nil)
		resp.Body.Close()
		outcome, _ := evs[len(evs)-1]["outcome"].(map[string]any)
		list, _ := outcome["interrupts"].([]any)
		if len(list) != 1 {
			b.Fatalf("want one interrupt, got %v", evs[len(evs)-1])
		}
		in, _ := list[0].(map[string]any)
		task := a2aTaskOf(in)
		c := arr.slot(arr.followUp, task)
		body := resumeInput(thread, "r2", in["id"].(string), map[string]any{"text": "from 1 to 5 May"})
		b.StartTimer()
		start := time.Now()
		resp = benchPost(b, urls[1]+"/agui", body)
		var at time.Time
		select {
		case at = <-c:
		case <-time.After(10 * time.Second):
			b.Fatal("the answer never reached the agent")
		}
		lat = append(lat, at.Sub(start))
		b.StopTimer()
		evs = benchEvents(resp.Body, nil)
		resp.Body.Close()
		if last := evs[len(evs)-1]; last["type"] != "RUN_FINISHED" {
			b.Fatalf("the resume ended with %v", last)
		}
		b.StartTimer()
	}
	b.StopTimer()
	reportPercentiles(b, lat)
}
