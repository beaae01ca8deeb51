package server

import (
	"bufio"
	"bytes"
	"context"
	"io"
	"iter"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/baton-dev/baton/coordinator"
	"github.com/baton-dev/baton/llm"
	"github.com/baton-dev/baton/metrics"
)

// byTextModel answers "hi", except to a last user message "block", which it holds until its
// context ends (signalling blocked, when set, once it holds).
type byTextModel struct{ blocked chan<- struct{} }

func (m byTextModel) Stream(ctx context.Context, req *llm.Request) iter.Seq2[llm.Delta, error] {
	return func(yield func(llm.Delta, error) bool) {
		last := ""
		for _, m := range req.Messages {
			if m.Role == llm.RoleUser {
				last = m.Content
			}
		}
		if last == "block" {
			if m.blocked != nil {
				m.blocked <- struct{}{}
			}
			<-ctx.Done()
			yield(llm.Delta{}, ctx.Err())
			return
		}
		if yield(llm.Delta{Text: "hi"}, nil) {
			yield(llm.Delta{Done: &llm.Completion{FinishReason: "stop"}}, nil)
		}
	}
}

// scrapeMetrics returns the samples of GET /metrics as "name{labels}" → value.
func scrapeMetrics(t *testing.T, url string) map[string]float64 {
	t.Helper()
	resp, err := http.Get(url + "/metrics")
	require.NoError(t, err)
	defer resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)
	out := map[string]float64{}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		i := strings.LastIndexByte(line, ' ')
		require.Positive(t, i, line)
		v, err := strconv.ParseFloat(line[i+1:], 64)
		require.NoError(t, err, line)
		out[line[:i]] = v
	}
	require.NoError(t, sc.Err())
	return out
}

func runBody(thread, run, text string) string {
	return `{"threadId":"` + thread + `","runId":"` + run + `","protocolVersion":"1.0","messages":[{"id":"u","role":"user","content":"` + text + `"}]}`
}

// newServerFor serves e with cfg until the test ends.
func newServerFor(t *testing.T, e *coordinator.Engine, cfg Config, rc ...coordinator.RunsConfig) *httptest.Server {
	t.Helper()
	cfg.Engine = runsOf(e, rc...)
	srv := httptest.NewServer(New(cfg))
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Millisecond)
		defer cancel()
		_ = e.Stop(ctx)
		srv.Close()
	})
	return srv
}

// waitIdle waits until the engine has no active run: a run's outcome is counted when its
// execution returns, just after its terminal event has been streamed.
func waitIdle(t *testing.T, e *coordinator.Engine) {
	t.Helper()
	require.Eventually(t, func() bool { return e.Active() == 0 }, 10*time.Second, 5*time.Millisecond)
}

func TestMetricsReflectRunOutcomes(t *testing.T) {
	m := metrics.New()
	blocked := make(chan struct{}, 1)
	e := newStartedEngine(t, coordinator.Config{Model: byTextModel{blocked: blocked}, Metrics: m})
	srv := newServerFor(t, e, Config{Metrics: m.Handler(), AuthTokens: []string{"secret"}})
	const (
		completed = `baton_runs_total{outcome="completed"}`
		cancelled = `baton_runs_total{outcome="cancelled"}`
	)
	before := scrapeMetrics(t, srv.URL)
	require.Contains(t, before, completed, "known outcomes are exported before the first run")
	require.Zero(t, before[completed])
	require.Zero(t, before[cancelled])

	// A run that completes.
	evs := readEvents(t, post(t, srv.URL+"/agui", runBody("t1", "r1", "hello"), "Authorization", "Bearer secret"))
	require.NotEmpty(t, evs)
	require.Equal(t, "RUN_FINISHED", evs[len(evs)-1]["type"])
	waitIdle(t, e)
	after := scrapeMetrics(t, srv.URL)
	assert.Equal(t, 1.0, after[completed])
	assert.Zero(t, after[cancelled])

	// A run stopped by the producer-side stop endpoint.
	resp := post(t, srv.URL+"/agui", runBody("t2", "r2", "block"), "Authorization", "Bearer secret")
	done := make(chan []byte, 1)
	go func() {
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body) // a short read shows up as a missing terminal event
		done <- b
	}()
	select { // the run is in its model call
	case <-blocked:
	case <-time.After(10 * time.Second):
		t.Fatal("the run never reached the model")
	}
	stop := post(t, srv.URL+"/agui/threads/t2/runs/r2/stop", "", "Authorization", "Bearer secret")
	stop.Body.Close()
	require.Equal(t, http.StatusAccepted, stop.StatusCode)
	resp.Body = io.NopCloser(bytes.NewReader(<-done))
	evs = readEvents(t, resp)
	require.NotEmpty(t, evs)
	assert.Equal(t, map[string]any{"type": "cancelled"}, evs[len(evs)-1]["outcome"])
	waitIdle(t, e)
	after = scrapeMetrics(t, srv.URL)
	assert.Equal(t, 1.0, after[completed])
	assert.Equal(t, 1.0, after[cancelled])
}

func TestMetricsRoute(t *testing.T) {
	e := newStartedEngine(t, coordinator.Config{Model: byTextModel{}})
	tests := []struct {
		name   string
		cfg    Config
		status int
	}{
		{"mounted, outside the bearer-token auth", Config{Metrics: metrics.New().Handler(), AuthTokens: []string{"secret"}}, http.StatusOK},
		{"not configured", Config{}, http.StatusNotFound},
		{"the page does not shadow it", Config{Metrics: metrics.New().Handler(), Page: http.NotFoundHandler()}, http.StatusOK},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := newServerFor(t, e, tt.cfg)
			resp, err := http.Get(srv.URL + "/metrics")
			require.NoError(t, err)
			defer resp.Body.Close()
			assert.Equal(t, tt.status, resp.StatusCode)
		})
	}
}
