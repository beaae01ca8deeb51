package server

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"regexp"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/baton-dev/baton/agui"
	"github.com/baton-dev/baton/coordinator"
	"github.com/baton-dev/baton/internal/demoagent"
	"github.com/baton-dev/baton/llm/scripted"
	"github.com/baton-dev/baton/subagent"
)

// arrivals timestamps requests to the agent that continue a given task.
type arrivals struct {
	mu   sync.Mutex
	seen map[string]chan time.Time
}

func (a *arrivals) expect(taskID string) chan time.Time {
	a.mu.Lock()
	defer a.mu.Unlock()
	ch := make(chan time.Time, 1)
	a.seen[taskID] = ch
	return ch
}

func (a *arrivals) wrap(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPost {
			body, _ := io.ReadAll(r.Body)
			r.Body = io.NopCloser(bytes.NewReader(body))
			if bytes.Contains(body, []byte(`SendStreamingMessage`)) || bytes.Contains(body, []byte(`SendMessage`)) {
				now := time.Now()
				a.mu.Lock()
				for id, ch := range a.seen {
					if bytes.Contains(body, []byte(id)) {
						ch <- now
						delete(a.seen, id)
					}
				}
				a.mu.Unlock()
			}
		}
		h.ServeHTTP(w, r)
	})
}

var interruptRE = regexp.MustCompile(`"id":"(int-[0-9a-f]+)".*"taskId":"([^"]+)"`)

// BenchmarkResumeToAgent measures the time from the resume POST to the moment the user's
// answer reaches the sub-agent (an A2A continuation of the input-required task).
func BenchmarkResumeToAgent(b *testing.B) {
	ctx := context.Background()
	arr := &arrivals{seen: map[string]chan time.Time{}}
	agentSrv := httptest.NewUnstartedServer(nil)
	agentSrv.Start()
	defer agentSrv.Close()
	h, err := demoagent.NewHandler(demoagent.Options{Kind: "travel", BaseURL: agentSrv.URL})
	require.NoError(b, err)
	agentSrv.Config.Handler = arr.wrap(h)

	ag, err := subagent.Resolve(ctx, subagent.AgentConfig{Name: "travel", URL: agentSrv.URL, Timeout: time.Minute}, subagent.Options{})
	require.NoError(b, err)
	defer ag.Close()
	e := newStartedEngine(b, coordinator.Config{Model: scripted.New(scripted.Config{}),
		Agents: []coordinator.Agent{{Name: "travel", Client: ag, Timeout: time.Minute, InputRequired: "ask_user"}}})
	baton := httptest.NewServer(New(Config{Engine: runsOf(e)}))
	defer baton.Close()

	run := func(body string) string {
		resp, err := http.Post(baton.URL+"/agui", "application/json", strings.NewReader(body))
		require.NoError(b, err)
		defer resp.Body.Close()
		var last string
		sc := bufio.NewScanner(resp.Body)
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		for sc.Scan() {
			if sc.Text() != "" {
				last = sc.Text()
			}
		}
		return last
	}
	var lat []time.Duration
	n := 0
	for b.Loop() {
		b.StopTimer()
		n++
		thread := fmt.Sprintf("bench-%d", n)
		last := run(fmt.Sprintf(`{"threadId":%q,"runId":"r1","protocolVersion":"1.0","messages":[{"id":"u","role":"user","content":"plan a trip to Lisbon"}]}`, thread))
		m := interruptRE.FindStringSubmatch(last)
		require.Len(b, m, 3, "want an interrupt, got %s", last)
		arrived := arr.expect(m[2])
		b.StartTimer()
		start := time.Now()
		done := make(chan string, 1)
		go func() {
			done <- run(fmt.Sprintf(`{"threadId":%q,"runId":"r2","protocolVersion":"1.0","messages":[],"resume":[{"interruptId":%q,"status":"resolved","payload":{"text":"12-19 May"}}]}`, thread, m[1]))
		}()
		at := <-arrived
		lat = append(lat, at.Sub(start))
		require.Contains(b, <-done, "RUN_FINISHED")
	}
	slices.Sort(lat)
	pct := func(p float64) time.Duration { return lat[int(float64(len(lat)-1)*p)] }
	b.ReportMetric(float64(pct(0.5).Microseconds()), "p50-µs")
	b.ReportMetric(float64(pct(0.99).Microseconds()), "p99-µs")
}

// BenchmarkParkedRunHeap parks 10,000 runs on an ask_user interrupt (in-memory store) and
// reports the heap held per parked run.
func BenchmarkParkedRunHeap(b *testing.B) {
	const parked = 10000
	for b.Loop() {
		e := newStartedEngine(b, coordinator.Config{Model: scripted.New(scripted.Config{})})
		var before, after runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&before)
		for i := range parked {
			in := &agui.RunAgentInput{ThreadID: fmt.Sprintf("park-%d", i), RunID: "r", ProtocolVersion: "1.0",
				Messages: []agui.Message{{ID: "u", Role: "user", Content: agui.StringContent("ask me which colour I like")}}}
			r, err := e.StartRun(context.Background(), in, "")
			require.NoError(b, err)
			<-r.Done()
			evs, _ := r.Stream().Next()
			fin, ok := evs[len(evs)-1].(*agui.RunFinished)
			require.True(b, ok)
			require.Equal(b, agui.OutcomeInterrupt, fin.Outcome.Type)
		}
		runtime.GC()
		runtime.ReadMemStats(&after)
		b.ReportMetric(float64(after.HeapAlloc-before.HeapAlloc)/parked/1024, "KiB/parked-run")
		runtime.KeepAlive(e)
	}
}
