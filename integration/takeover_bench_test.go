package integration

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/baton-dev/baton/internal/testutil/pgtest"
)

// BenchmarkTakeoverAfterKill measures issue 14's "takeover time after kill -9" (target
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
