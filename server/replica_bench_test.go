package server

import (
	"context"
	"iter"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/baton-dev/baton/llm"
)

// BenchmarkStopThroughOtherReplica measures a stop posted to replica B for a run streaming
// on replica A, both on one PostgreSQL database: from the POST of the stop to the end of A's
// stream with the cancelled outcome (the request is a row plus a NOTIFY; A cancels on the
// signal). Reported: p50 and p99 in ms.
func BenchmarkStopThroughOtherReplica(b *testing.B) {
	reps := replicas(b, sharedStores[0].dsn(b), blockingModel{}, 2, Config{})
	lat := make([]time.Duration, 0, b.N)
	errs := 0
	b.ResetTimer()
	for i := range b.N {
		id := "bench-" + strconv.Itoa(i)
		resp := postTB(b, reps[0].URL+"/agui", body(id, "r", ""))
		fr := newFrameReader(b, resp.Body)
		if _, ok := fr.next(); !ok {
			b.Fatal("no RUN_STARTED")
		}
		start := time.Now()
		st := postTB(b, reps[1].URL+"/agui/threads/"+id+"/runs/r/stop", "")
		st.Body.Close()
		if st.StatusCode != http.StatusAccepted {
			b.Fatalf("stop: %d", st.StatusCode)
		}
		for {
			f, ok := fr.next()
			if !ok {
				b.Fatal("the stream ended without a terminal event")
			}
			if f.ev["type"] == "RUN_FINISHED" || f.ev["type"] == "RUN_ERROR" {
				if f.ev["type"] == "RUN_ERROR" {
					errs++
				}
				break
			}
		}
		lat = append(lat, time.Since(start))
		resp.Body.Close()
	}
	b.StopTimer()
	slices.Sort(lat)
	b.ReportMetric(float64(lat[len(lat)/2].Microseconds())/1000, "p50-ms")
	b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds())/1000, "p99-ms")
	b.ReportMetric(float64(errs), "run-errors")
}

func postTB(t testing.TB, url, b string) *http.Response {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, url, strings.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	return resp
}

// BenchmarkReconnectFirstEvent measures a reconnect: from the GET of the events endpoint
// with a Last-Event-ID in the middle of a finished run of 200 text deltas to the first
// replayed frame. same-replica: the replica that ran the run serves the reconnect (memory
// and SQLite stores); other-replica: a second replica on the same database does (SQLite and
// PostgreSQL). Reported: p50 and p99 in ms.
func BenchmarkReconnectFirstEvent(b *testing.B) {
	cases := []struct {
		name string
		dsn  func(testing.TB) string
		n    int // replicas; the reconnect goes to the last one
	}{
		{"same-replica/memory", func(testing.TB) string { return "memory:" }, 1},
		{"same-replica/sqlite", sqliteDSN, 1},
		{"other-replica/postgres", sharedStores[0].dsn, 2},
	}
	for _, c := range cases {
		b.Run(c.name, func(b *testing.B) {
			reps := replicas(b, c.dsn(b), manyDeltas(200), c.n, Config{})
			resp := postTB(b, reps[0].URL+"/agui", body("rc", "r1", ""))
			frames := newFrameReader(b, resp.Body).all()
			resp.Body.Close()
			if len(frames) < 200 {
				b.Fatalf("the run sent %d frames", len(frames))
			}
			mid := strconv.FormatInt(frames[len(frames)/2].id, 10)
			lat := make([]time.Duration, 0, b.N)
			b.ResetTimer()
			for range b.N {
				start := time.Now()
				req, _ := http.NewRequest(http.MethodGet, reps[c.n-1].URL+"/agui/threads/rc/runs/r1/events", nil)
				req.Header.Set("Last-Event-ID", mid)
				re, err := http.DefaultClient.Do(req)
				if err != nil {
					b.Fatal(err)
				}
				if _, ok := newFrameReader(b, re.Body).next(); !ok {
					b.Fatal("no replayed frame")
				}
				lat = append(lat, time.Since(start))
				re.Body.Close()
			}
			b.StopTimer()
			slices.Sort(lat)
			b.ReportMetric(float64(lat[len(lat)/2].Microseconds())/1000, "p50-ms")
			b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds())/1000, "p99-ms")
		})
	}
}

// manyDeltas is a model that answers with n text deltas.
type manyDeltas int

func (n manyDeltas) Stream(_ context.Context, _ *llm.Request) iter.Seq2[llm.Delta, error] {
	return func(yield func(llm.Delta, error) bool) {
		for range int(n) {
			if !yield(llm.Delta{Text: "tok "}, nil) {
				return
			}
		}
		yield(llm.Delta{Done: &llm.Completion{FinishReason: "stop"}}, nil)
	}
}
