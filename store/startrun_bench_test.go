package store

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"
)

// BenchmarkSQLiteStartRuns measures runs started per second on SQLite by 32×GOMAXPROCS
// concurrent callers (RunParallel's goroutines): "separate" is the start
// as three writes (ClaimThread, BeginRun, SaveRunWork: one transaction each), "one" is
// StartRun (one write). Both go through the group writer; each start then appends its
// first event, as a run does.
//
//	go test -run '^$' -bench SQLiteStartRuns -benchtime 5000x ./store/
func BenchmarkSQLiteStartRuns(b *testing.B) {
	work := json.RawMessage(`{"a2a":[],"mcp":[],"checkpoint":{"v":1,"owner":"alice","input":{"threadId":"t","runId":"r","messages":[{"id":"m1","role":"user","content":"go"}]}}}`)
	ev := []Event{{Seq: 1, Data: json.RawMessage(`{"type":"RUN_STARTED","threadId":"t","runId":"r"}`)}}
	for _, mode := range []string{"separate", "one"} {
		b.Run(mode, func(b *testing.B) {
			st, err := openSQLite(context.Background(), filepath.Join(b.TempDir(), "bench.db"))
			if err != nil {
				b.Fatal(err)
			}
			defer func() { _ = st.Close() }()
			var n atomic.Int64
			ctx := context.Background()
			b.SetParallelism(32)
			b.ResetTimer()
			start := time.Now()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					i := n.Add(1)
					thread, run := fmt.Sprintf("t%d", i), fmt.Sprintf("r%d", i)
					if err := startOne(ctx, st, mode, thread, run, work); err != nil {
						b.Error(err)
						return
					}
					if err := st.AppendEvents(ctx, thread, run, 1, ev); err != nil {
						b.Error(err)
						return
					}
				}
			})
			b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "runs/s")
		})
	}
}

func startOne(ctx context.Context, st *sqlStore, mode, thread, run string, work json.RawMessage) error {
	if mode == "one" {
		return begun(st.StartRun(ctx, RunStart{ThreadID: thread, RunID: run, Owner: "alice", Title: "go",
			Replica: "a", Lease: time.Minute, Work: work}))
	}
	if _, err := st.ClaimThread(ctx, thread, "alice", "go"); err != nil {
		return err
	}
	if err := begun(st.BeginRun(ctx, thread, run, "a", time.Minute)); err != nil {
		return err
	}
	return st.SaveRunWork(ctx, thread, run, 1, work)
}
