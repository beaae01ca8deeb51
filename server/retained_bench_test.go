package server

import (
	"database/sql"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"testing"
	"time"

	"github.com/baton-dev/baton/internal/testutil/pgtest"
)

// retainedDeltas is the size of the "typical" run of BenchmarkRetainedRun: a user message
// and an answer streamed as this many text deltas (a 300-token answer).
const retainedDeltas = 300

// BenchmarkRetainedRun measures what a finished run costs while it is retained (its event
// log, its messages, its run record, the engine's memory of finished runs): b.N finished
// runs of retainedDeltas text deltas each, one thread per run, through the HTTP server.
// Reported per run: heap-B/run (live heap after a GC, memory store: everything is on the
// heap), store-B/run (SQLite: the database file after a WAL checkpoint; PostgreSQL:
// pg_total_relation_size of the tables the runs write) and events/run.
//
//	go test -run XXX -bench BenchmarkRetainedRun -benchtime 200x ./server/
func BenchmarkRetainedRun(b *testing.B) {
	b.Run("memory", func(b *testing.B) {
		srv := replicas(b, "memory:", manyDeltas(retainedDeltas), 1, Config{})[0]
		retainedRun(b, srv.URL, "warm")
		waitReleased(b, srv.URL, "warm") // the engine's and server's one-time allocations
		before := liveHeap()
		events := retainedRuns(b, srv.URL)
		after := liveHeap()
		b.ReportMetric(float64(int64(after)-int64(before))/float64(b.N), "heap-B/run")
		b.ReportMetric(float64(events)/float64(b.N), "events/run")
	})
	b.Run("sqlite", func(b *testing.B) {
		path := filepath.Join(b.TempDir(), "baton.db")
		srv := replicas(b, "sqlite:"+path, manyDeltas(retainedDeltas), 1, Config{})[0]
		db, err := sql.Open("sqlite", path)
		if err != nil {
			b.Fatal(err)
		}
		defer db.Close()
		size := func() int64 {
			if _, err := db.Exec(`PRAGMA wal_checkpoint(TRUNCATE)`); err != nil {
				b.Fatal(err)
			}
			fi, err := os.Stat(path)
			if err != nil {
				b.Fatal(err)
			}
			return fi.Size()
		}
		retainedRun(b, srv.URL, "warm")
		waitReleased(b, srv.URL, "warm")
		before := size()
		events := retainedRuns(b, srv.URL)
		b.ReportMetric(float64(size()-before)/float64(b.N), "store-B/run")
		b.ReportMetric(float64(events)/float64(b.N), "events/run")
	})
	b.Run("postgres", func(b *testing.B) {
		dsn := pgtest.DSN(b)
		srv := replicas(b, dsn, manyDeltas(retainedDeltas), 1, Config{})[0]
		db, err := sql.Open("pgx", dsn)
		if err != nil {
			b.Fatal(err)
		}
		defer db.Close()
		size := func() int64 {
			var n int64
			if err := db.QueryRow(`SELECT pg_total_relation_size('events') + pg_total_relation_size('messages')
				+ pg_total_relation_size('runs') + pg_total_relation_size('threads')`).Scan(&n); err != nil {
				b.Fatal(err)
			}
			return n
		}
		retainedRun(b, srv.URL, "warm")
		waitReleased(b, srv.URL, "warm")
		before := size()
		events := retainedRuns(b, srv.URL)
		b.ReportMetric(float64(size()-before)/float64(b.N), "store-B/run")
		b.ReportMetric(float64(events)/float64(b.N), "events/run")
	})
}

// retainedRuns runs b.N runs on threads of their own and returns the events they sent.
func retainedRuns(b *testing.B, url string) int {
	b.ResetTimer()
	events := 0
	last := ""
	for i := range b.N {
		last = fmt.Sprintf("kept-%d", i)
		events += retainedRun(b, url, last)
	}
	b.StopTimer()
	waitReleased(b, url, last)
	return events
}

// waitReleased waits until thread has no running run: its log and messages are then stored
// (the writer releases the thread after its last write).
func waitReleased(b *testing.B, url, thread string) {
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		resp, err := http.Get(url + "/agui/threads/" + thread)
		if err != nil {
			b.Fatal(err)
		}
		var doc struct {
			Run *struct{} `json:"run"`
		}
		err = json.NewDecoder(resp.Body).Decode(&doc)
		resp.Body.Close()
		if err == nil && doc.Run == nil {
			return
		}
	}
	b.Fatalf("thread %s still running", thread)
}

// retainedRun runs one run on thread to its end and returns its event count.
func retainedRun(b *testing.B, url, thread string) int {
	resp := postTB(b, url+"/agui", body(thread, "r1", ""))
	frames := newFrameReader(b, resp.Body).all()
	resp.Body.Close()
	if len(frames) < retainedDeltas || frames[len(frames)-1].ev["type"] != "RUN_FINISHED" {
		b.Fatalf("run %s: %d frames, last %v", thread, len(frames), frames[len(frames)-1].ev["type"])
	}
	return len(frames)
}

// liveHeap is the live heap after a full collection.
func liveHeap() uint64 {
	runtime.GC()
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ms.HeapAlloc
}
