package main

import (
	"context"
	"fmt"
	"iter"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/baton-dev/baton/agui"
	"github.com/baton-dev/baton/coordinator"
	"github.com/baton-dev/baton/llm"
	"github.com/baton-dev/baton/runs"
	"github.com/baton-dev/baton/server"
	"github.com/baton-dev/baton/store"
)

// waitingModel answers nothing until its call is cancelled: every run stays active.
type waitingModel struct{}

func (waitingModel) Stream(ctx context.Context, _ *llm.Request) iter.Seq2[llm.Delta, error] {
	return func(yield func(llm.Delta, error) bool) {
		<-ctx.Done()
		yield(llm.Delta{}, ctx.Err())
	}
}

// server.max_active_runs of N never admits N+1, whatever mix of A2A and AG-UI starts
// arrives at once: the check and the reservation are one step in the engine. (Each round
// is a fresh engine; an overshoot showed in most rounds before.)
func TestMaxActiveRunsAcrossSurfaces(t *testing.T) {
	for round := range 5 {
		t.Run(fmt.Sprint(round), admitOnce)
	}
}

func admitOnce(t *testing.T) {
	const max, a2aStarts, aguiStarts = 5, 30, 10
	st, err := store.Open(context.Background(), "memory:")
	require.NoError(t, err)
	defer st.Close()
	log := slog.New(slog.DiscardHandler)
	engine, err := coordinator.New(coordinator.Config{Model: waitingModel{}, Store: st, Logger: log})
	require.NoError(t, err)
	require.NoError(t, engine.Start(context.Background()))
	defer func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Millisecond)
		defer cancel()
		_ = engine.Stop(ctx)
	}()
	port := coordinator.NewRuns(engine, coordinator.RunsConfig{})
	srv := httptest.NewServer(server.New(server.Config{Engine: port, MaxActiveRuns: max, Logger: log}))
	defer srv.Close()

	input := func(i int) *agui.RunAgentInput {
		return &agui.RunAgentInput{ThreadID: fmt.Sprintf("t%d", i), RunID: "r", ProtocolVersion: agui.ProtocolVersion,
			Messages: []agui.Message{{ID: "u", Role: "user", Content: agui.StringContent("hello")}}}
	}
	var (
		mu       sync.Mutex
		admitted int
		refused  []string
		bodies   []*http.Response
	)
	start := make(chan struct{})
	var wg sync.WaitGroup
	for i := range a2aStarts {
		wg.Go(func() {
			<-start
			_, err := port.Start(context.Background(), input(i), "p", runs.StartOptions{MaxActive: max})
			mu.Lock()
			defer mu.Unlock()
			if err == nil {
				admitted++
				return
			}
			assert.ErrorIs(t, err, runs.ErrTooManyRuns)
			refused = append(refused, "a2a")
		})
	}
	for i := range aguiStarts {
		wg.Go(func() {
			<-start
			body := fmt.Sprintf(`{"threadId":"h%d","runId":"r","protocolVersion":"1.0","messages":[{"id":"u","role":"user","content":"hi"}]}`, i)
			resp, err := http.Post(srv.URL+"/agui", "application/json", strings.NewReader(body))
			if !assert.NoError(t, err) {
				return
			}
			mu.Lock()
			defer mu.Unlock()
			if resp.StatusCode == http.StatusOK {
				admitted++
				bodies = append(bodies, resp) // open until the end: the run stays active
				return
			}
			resp.Body.Close()
			assert.Equal(t, http.StatusServiceUnavailable, resp.StatusCode)
			assert.NotEmpty(t, resp.Header.Get("Retry-After"))
			refused = append(refused, "agui")
		})
	}
	close(start)
	wg.Wait()
	defer func() {
		for _, r := range bodies {
			r.Body.Close()
		}
	}()
	assert.Equal(t, max, admitted, "admitted runs")
	assert.Len(t, refused, a2aStarts+aguiStarts-max)
	assert.LessOrEqual(t, engine.Active(), max)
}
