package integration

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/baton-dev/baton/internal/testutil/pgtest"
	"github.com/baton-dev/baton/store"
)

// BenchmarkTakeoverAfterKill measures the takeover time after kill -9 (target
// < lease + 2 s): replica A streams a delegation to the JS peer and is killed with SIGKILL;
// the time is from the kill to the first event that replica B, having taken the run over,
// adds to the run's log, as a client reconnected through B sees it. Two lease settings.
//
//	go test -run XXX -bench TakeoverAfterKill -benchtime 5x ./integration/
func BenchmarkTakeoverAfterKill(b *testing.B) {
	requirePeers(b)
	dsn := pgtest.DSN(b)
	peer := startA2APeerEnv(b)
	model := startFakeLLM(b)
	for _, rep := range []struct{ heartbeat, lease time.Duration }{
		{200 * time.Millisecond, time.Second},
		{time.Second, 3 * time.Second},
	} {
		b.Run(fmt.Sprintf("lease=%v,heartbeat=%v", rep.lease, rep.heartbeat), func(b *testing.B) {
			cfg := testConfig{LLMURL: model.URL, Agents: []agentEntry{{Name: "peer", URL: peer}}, Store: dsn, Grace: "1s"}.yaml() +
				fmt.Sprintf("replication:\n  heartbeat: %s\n  lease: %s\n", rep.heartbeat, rep.lease)
			survivor := startReplica(b, cfg)
			var took []time.Duration
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				b.StopTimer()
				victim := startReplica(b, cfg)
				thread, live, _, lastID := startSlowDelegation(b, victim.Match[1], "bench-takeover", 1)
				b.StartTimer()
				killed := time.Now()
				require.NoError(b, syscall.Kill(-victim.cmd.Process.Pid, syscall.SIGKILL))
				<-victim.Done()
				live.Body.Close()
				firstEventAfter(b, survivor.Match[1], thread, lastID)
				took = append(took, time.Since(killed))
			}
			b.StopTimer()
			slices.Sort(took)
			var sum time.Duration
			for _, d := range took {
				sum += d
			}
			b.ReportMetric(float64(sum.Milliseconds())/float64(len(took)), "ms-mean")
			b.ReportMetric(float64(took[len(took)-1].Milliseconds()), "ms-max")
			b.ReportMetric(float64(rep.lease.Milliseconds()), "ms-lease")
		})
	}
}

// startReplica starts a coordinator with cfg on a free port and returns its process
// (Match[1] is its URL); it is stopped in Cleanup.
func startReplica(tb testing.TB, cfg string) *proc {
	tb.Helper()
	bin, ok := buildBinaries(tb)["coordinator"]
	require.True(tb, ok)
	var err error
	for attempt := 0; attempt < 3; attempt++ {
		path := filepath.Join(tb.TempDir(), "baton.yaml")
		require.NoError(tb, os.WriteFile(path, []byte("listen: 127.0.0.1:"+strconv.Itoa(freePort(tb))+"\n"+cfg), 0o600))
		var p *proc
		p, err = startProcErr(tb, "coordinator", []string{bin, "--config", path}, []string{llmKeyEnv + "=fake-key"},
			readyOnLine(`Baton coordinator listening on (http://\S+)`))
		if err == nil {
			return p
		}
	}
	tb.Fatalf("starting the coordinator: %v", err)
	return nil
}

// firstEventAfter reconnects to the thread's run r1 through base after lastID and returns
// once an event numbered after lastID arrives (the takeover's first).
func firstEventAfter(tb testing.TB, base, thread string, lastID int64) {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, base+"/agui/threads/"+thread+"/runs/r1/events", nil)
	require.NoError(tb, err)
	req.Header.Set("Last-Event-ID", strconv.FormatInt(lastID, 10))
	resp, err := http.DefaultClient.Do(req)
	require.NoError(tb, err)
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		body, _ := io.ReadAll(resp.Body)
		tb.Fatalf("reconnect: HTTP %d: %s", resp.StatusCode, body)
	}
	s := newTakeoverStream(resp.Body)
	for {
		f, ok := s.next(tb)
		require.True(tb, ok, "the run's stream ended before the takeover")
		if f.ID > lastID {
			return
		}
	}
}

// BenchmarkTakeoverDefaults is the takeover time of DESIGN §13 with the default replication
// settings (lease 10 s, heartbeat 2 s; target p99 < lease + 2 × heartbeat): replica A holds
// BATON_BENCH_TAKEOVER_RUNS (default 100) streaming delegations to the JS peer and is killed
// with SIGKILL; for each run, the time from the kill to the first event that replica B,
// having taken it over, adds to the run's log, as a client reconnected through B sees it.
// All runs are lost in one kill, so B takes them over together (the burst a real replica
// failure causes). Reported: p50, p99 and max over all runs of all iterations.
//
//	go test -run '^$' -bench TakeoverDefaults -benchtime 1x ./integration/
func BenchmarkTakeoverDefaults(b *testing.B) {
	requirePeers(b)
	runs := 100
	if v, err := strconv.Atoi(os.Getenv("BATON_BENCH_TAKEOVER_RUNS")); err == nil && v > 0 {
		runs = v
	}
	dsn := pgtest.DSN(b)
	peer := startA2APeerEnv(b)
	model := startFakeLLM(b)
	cfg := testConfig{LLMURL: model.URL, Agents: []agentEntry{{Name: "peer", URL: peer}}, Store: dsn, Grace: "1s"}.yaml()
	require.NotContains(b, cfg, "replication:", "the defaults are the point")
	survivor := startReplica(b, cfg)
	st, err := store.Open(context.Background(), dsn)
	require.NoError(b, err)
	defer st.Close()
	var took []time.Duration
	for b.Loop() {
		victim := startReplica(b, cfg)
		held := make([]heldRun, runs)
		errs := make(chan error, runs)
		sem := make(chan struct{}, 16)
		for i := range held {
			go func() {
				sem <- struct{}{}
				defer func() { <-sem }()
				var err error
				held[i], err = startHeldDelegation(victim.Match[1], newThreadID("bench-takeover-defaults"))
				errs <- err
			}()
		}
		for range runs {
			require.NoError(b, <-errs)
		}
		type result struct {
			d   time.Duration
			err error
		}
		results := make(chan result, runs)
		killed := time.Now()
		require.NoError(b, syscall.Kill(-victim.cmd.Process.Pid, syscall.SIGKILL))
		<-victim.Done()
		for _, h := range held {
			h.live.Body.Close()
			// The victim streams ahead of its event log and kept streaming until the kill:
			// the takeover's first event is the first after the log's last at the kill
			// (the lease keeps the survivor off the runs for seconds yet).
			h.lastID = lastLogged(b, st, h.thread)
			go func() {
				err := awaitEventAfter(survivor.Match[1], h.thread, h.lastID, time.Minute)
				results <- result{time.Since(killed), err}
			}()
		}
		for range runs {
			r := <-results
			require.NoError(b, r.err)
			took = append(took, r.d)
		}
	}
	slices.Sort(took)
	at := func(p float64) float64 { return float64(took[int(float64(len(took)-1)*p)].Milliseconds()) }
	b.ReportMetric(at(0.5), "ms-p50")
	b.ReportMetric(at(0.99), "ms-p99")
	b.ReportMetric(at(1), "ms-max")
	b.ReportMetric(float64(len(took)), "runs")
}

// lastLogged returns the number of the last event in the log of the thread's run r1.
func lastLogged(b *testing.B, st store.Store, thread string) int64 {
	var last int64
	for {
		evs, err := st.Events(context.Background(), thread, "r1", last, store.MaxEventsRead)
		require.NoError(b, err)
		if len(evs) == 0 {
			return last
		}
		last = evs[len(evs)-1].Seq
	}
}

// heldRun is a delegation streaming on a replica: its thread, its live response and the
// id of the last event it is known to have (read from the stream, then from the log).
type heldRun struct {
	thread string
	live   *http.Response
	lastID int64
}

// startHeldDelegation is startSlowDelegation (one progress chunk) for a goroutine of its
// own: it returns an error instead of failing the benchmark.
func startHeldDelegation(base, thread string) (heldRun, error) {
	body := `{"threadId":"` + thread + `","runId":"r1","protocolVersion":"1.0","messages":[{"id":"u1","role":"user","content":"peer: slow work"}]}`
	live, err := postAGUI(context.Background(), base, []byte(body))
	if err != nil {
		return heldRun{}, err
	}
	if live.StatusCode != http.StatusOK {
		live.Body.Close()
		return heldRun{}, fmt.Errorf("start %s: HTTP %d", thread, live.StatusCode)
	}
	sc := bufio.NewScanner(live.Body)
	sc.Buffer(make([]byte, 0, 64<<10), 16<<20)
	var id int64
	for sc.Scan() {
		line := sc.Text()
		if v, ok := strings.CutPrefix(line, "id: "); ok {
			id, _ = strconv.ParseInt(v, 10, 64)
			continue
		}
		if strings.HasPrefix(line, "data: ") && strings.Contains(line, `"TEXT_MESSAGE_CONTENT"`) && strings.Contains(line, `"subagentRunId"`) {
			return heldRun{thread: thread, live: live, lastID: id}, nil
		}
	}
	live.Body.Close()
	return heldRun{}, fmt.Errorf("the stream of %s ended before the sub-agent's progress: %v", thread, sc.Err())
}

// awaitEventAfter is firstEventAfter for a goroutine of its own: it returns an error
// instead of failing the benchmark.
func awaitEventAfter(base, thread string, lastID int64, within time.Duration) error {
	ctx, cancel := context.WithTimeout(context.Background(), within)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, base+"/agui/threads/"+thread+"/runs/r1/events", nil)
	if err != nil {
		return err
	}
	req.Header.Set("Last-Event-ID", strconv.FormatInt(lastID, 10))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		body, _ := io.ReadAll(io.LimitReader(resp.Body, 1024))
		return fmt.Errorf("reconnect to %s: HTTP %d: %s", thread, resp.StatusCode, body)
	}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 0, 64<<10), 16<<20)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "id: "); ok {
			if id, err := strconv.ParseInt(v, 10, 64); err == nil && id > lastID {
				return nil
			}
		}
	}
	return fmt.Errorf("the stream of %s ended before the takeover's first event: %v", thread, sc.Err())
}
