package server

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/baton-dev/baton/coordinator"
	"github.com/baton-dev/baton/internal/testutil/benchagent"
	"github.com/baton-dev/baton/internal/testutil/stubmodel"
	"github.com/baton-dev/baton/store"
	"github.com/baton-dev/baton/subagent"
)

// cancelTopology is Baton delegating to a benchmark agent that holds its streams open.
type cancelTopology struct {
	agent    *benchagent.Agent
	agentSrv *httptest.Server
	ag       *subagent.Agent
	e        *coordinator.Engine
	baton    *httptest.Server
}

func newCancelTopology(t *testing.T, opts benchagent.Options, st store.Store, perAgent int, cancelTimeout time.Duration) *cancelTopology {
	t.Helper()
	tp := &cancelTopology{}
	tp.agentSrv = httptest.NewUnstartedServer(nil)
	tp.agentSrv.Start()
	opts.Hold = true
	tp.agent = benchagent.New(tp.agentSrv.URL, opts)
	tp.agentSrv.Config.Handler = tp.agent
	tp.startBaton(t, st, perAgent, cancelTimeout)
	return tp
}

func (tp *cancelTopology) startBaton(t *testing.T, st store.Store, perAgent int, cancelTimeout time.Duration) {
	t.Helper()
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	ag, err := subagent.Resolve(context.Background(), subagent.AgentConfig{Name: "bench", URL: tp.agentSrv.URL, Timeout: time.Hour},
		subagent.Options{Logger: quiet, RetryBackoff: 5 * time.Millisecond, IDGrace: -1})
	require.NoError(t, err)
	e := newStartedEngine(t, coordinator.Config{
		Logger:         quiet,
		Store:          st,
		Model:          stubmodel.New(stubmodel.Config{Tool: "bench", Arguments: `{"prompt":"go"}`, Text: []string{"done"}}),
		Agents:         []coordinator.Agent{{Name: "bench", Client: ag, Timeout: time.Hour}},
		CancelTimeout:  cancelTimeout,
		CancelPerAgent: perAgent,
	})
	tp.ag, tp.e = ag, e
	tp.baton = httptest.NewServer(New(Config{Engine: runsOf(e), MaxActiveRuns: -1, Logger: quiet}))
}

// stopBaton shuts the coordinator down; the agent stays.
func (tp *cancelTopology) stopBaton() {
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	_ = tp.e.Stop(ctx)
	tp.baton.Close()
	_ = tp.ag.Close()
}

func (tp *cancelTopology) close() {
	tp.stopBaton()
	tp.agent.Release()
	tp.agentSrv.Close()
}

// openRuns starts n runs and returns once the agent's first chunk reached every client;
// disconnect drops all their connections at once.
func (tp *cancelTopology) openRuns(t *testing.T, n int) (disconnect func()) {
	t.Helper()
	client := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	opened := make(chan error, n)
	for i := range n {
		wg.Go(func() {
			req, _ := http.NewRequestWithContext(ctx, http.MethodPost, tp.baton.URL+"/agui", strings.NewReader(fmt.Sprintf(benchRunBody, i)))
			req.Header.Set("Content-Type", "application/json")
			resp, err := client.Do(req)
			if err != nil {
				opened <- err
				return
			}
			defer resp.Body.Close()
			br := bufio.NewReader(resp.Body)
			for {
				line, err := br.ReadString('\n')
				if err != nil {
					opened <- fmt.Errorf("run %d: stream ended before the agent's first chunk: %w", i, err)
					return
				}
				if strings.Contains(line, "first chunk") {
					opened <- nil
					_, _ = io.Copy(io.Discard, br) // hold the stream until the disconnect
					return
				}
			}
		})
	}
	for range n {
		require.NoError(t, <-opened)
	}
	return func() {
		cancel()
		wg.Wait()
		client.CloseIdleConnections()
	}
}

// TestMassDisconnectEveryCancelConfirmed drops 120 streaming runs at once (15 times the
// per-agent bound; BenchmarkCancel* go to 10,000) against
// an agent that is slow to cancel and refuses the first two CancelTask calls of every task
// (each attempt is one call, so every task needs the background follow-up), and checks that
// every task ends canceled at the agent, and that the agent never had more cancels in
// flight than the per-agent bound. The attempt timeout is long: an attempt that timed out
// would free its slot while the agent still serves the abandoned call.
func TestMassDisconnectEveryCancelConfirmed(t *testing.T) {
	const runs, perAgent = 120, 8
	tp := newCancelTopology(t, benchagent.Options{Chunks: []string{"first chunk"}, FailCancels: 2, CancelDelay: 2 * time.Millisecond}, nil, perAgent, 30*time.Second)
	defer tp.close()
	disconnect := tp.openRuns(t, runs)
	disconnect()

	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	require.NoError(t, tp.agent.WaitCanceled(ctx, runs))
	tasks, canceled := tp.agent.Counts()
	assert.Equal(t, runs, tasks)
	assert.Equal(t, runs, canceled, "every task canceled at the agent")
	assert.LessOrEqual(t, tp.agent.MaxCancelsInFlight(), perAgent, "cancels in flight at the agent")
	assert.Greater(t, tp.agent.CancelCalls(), 2*runs, "every task needed its refused calls and then one more")
}

// TestRestartContinuesCancels: a cancel that the agent keeps refusing is recorded in the
// (SQLite) store; the coordinator stops; a new one on the same file continues it, and the
// task ends canceled at the agent once it accepts.
func TestRestartContinuesCancels(t *testing.T) {
	ctx := context.Background()
	dsn := "sqlite:" + filepath.Join(t.TempDir(), "baton.db")
	st, err := store.Open(ctx, dsn)
	require.NoError(t, err)
	tp := newCancelTopology(t, benchagent.Options{Chunks: []string{"first chunk"}, FailCancels: 1 << 30}, st, 0, time.Second)
	defer tp.close()
	disconnect := tp.openRuns(t, 1)
	disconnect()
	for { // the follow-up records the cancel when it starts (after the refused first attempt)
		p, err := st.PendingCancels(ctx, 10)
		require.NoError(t, err)
		if len(p) == 1 {
			assert.Equal(t, "bench", p[0].Agent)
			break
		}
		time.Sleep(5 * time.Millisecond)
	}
	tp.stopBaton()
	require.NoError(t, st.Close())
	_, canceled := tp.agent.Counts()
	require.Zero(t, canceled)

	tp.agent.SetFailCancels(0)
	st, err = store.Open(ctx, dsn)
	require.NoError(t, err)
	t.Cleanup(func() { _ = st.Close() }) // after the deferred close of the coordinator
	tp.startBaton(t, st, 0, time.Second)
	wctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	require.NoError(t, tp.agent.WaitCanceled(wctx, 1), "the new process continues the cancel")
	for { // and forgets it once confirmed
		p, err := st.PendingCancels(ctx, 10)
		require.NoError(t, err)
		if len(p) == 0 {
			break
		}
		time.Sleep(5 * time.Millisecond)
	}
}
