package durable

import (
	"context"
	"fmt"
	"log/slog"
	"path/filepath"
	"testing"
	"time"

	"github.com/baton-dev/baton/agui"
	"github.com/baton-dev/baton/internal/testutil/pgtest"
	"github.com/baton-dev/baton/store"
)

// BenchmarkEventLog measures the event log's cost per event on each backend: the run's side
// (numbering and encoding each event as the sequencer accepts it) and the end-to-end rate at
// which events reach the store (the writer's batched appends). events/s is the end-to-end
// figure: b.N events added, then the wait until the terminal event is stored.
func BenchmarkEventLog(b *testing.B) {
	backends := []struct {
		name string
		dsn  func(b *testing.B) string
	}{
		{"memory", func(*testing.B) string { return "memory:" }},
		{"sqlite", func(b *testing.B) string { return "sqlite:" + filepath.Join(b.TempDir(), "baton.db") }},
		{"postgres", func(b *testing.B) string { return pgtest.DSN(b) }},
	}
	ev := &agui.TextMessageContent{MessageID: "msg-0123456789abcdef", Delta: "a token or two ", Base: agui.Base{Timestamp: 1795411628061}}
	for _, be := range backends {
		b.Run(be.name, func(b *testing.B) {
			st, err := store.Open(context.Background(), be.dsn(b))
			if err != nil {
				b.Fatal(err)
			}
			defer st.Close()
			b.ReportAllocs()
			runs := 0
			b.ResetTimer()
			// One run per 100,000 events, as a long run would be.
			for done := 0; done < b.N; {
				n := min(b.N-done, 100000)
				runs++
				thread := fmt.Sprintf("t%d", runs)
				l := NewEventLog(st, thread, "r", slog.New(slog.DiscardHandler), nil, nil)
				epoch, err := st.BeginRun(context.Background(), thread, "r", "bench", time.Hour)
				if err != nil {
					b.Fatal(err)
				}
				l.Own(epoch, nil, nil)
				for range n {
					l.Add(ev)
				}
				l.Add(&agui.RunFinished{ThreadID: "t", RunID: "r"})
				l.WaitEnded()
				l.RunEnded()
				done += n
			}
			b.StopTimer()
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "events/s")
		})
	}
}

// BenchmarkEventLogAdd is the run's own cost per event with the log on (the store writes
// happen on the writer goroutine): compare with the encode figure of BenchmarkSSEWriter,
// the cost of an event on the stream alone. One sub-benchmark per backend shows the run's
// cost does not depend on the store; events/s is 1 / that cost, and dropped-events counts
// the events the bounded pending list gave up (the store fell 20,000 events or 4 MiB
// behind: the live stream keeps them, the log does not), which must stay 0 for the figure to
// be the ordinary path.
func BenchmarkEventLogAdd(b *testing.B) {
	backends := []struct {
		name string
		dsn  func(b *testing.B) string
	}{
		{"memory", func(*testing.B) string { return "memory:" }},
		{"sqlite", func(b *testing.B) string { return "sqlite:" + filepath.Join(b.TempDir(), "baton.db") }},
	}
	ev := &agui.TextMessageContent{MessageID: "msg-0123456789abcdef", Delta: "a token or two ", Base: agui.Base{Timestamp: 1795411628061}}
	for _, be := range backends {
		b.Run(be.name, func(b *testing.B) {
			st, err := store.Open(context.Background(), be.dsn(b))
			if err != nil {
				b.Fatal(err)
			}
			defer st.Close()
			l := NewEventLog(st, "t", "r", slog.New(slog.DiscardHandler), nil, nil)
			epoch, err := st.BeginRun(context.Background(), "t", "r", "bench", time.Hour)
			if err != nil {
				b.Fatal(err)
			}
			l.Own(epoch, nil, nil)
			b.ReportAllocs()
			b.ResetTimer()
			for range b.N {
				l.Add(ev)
			}
			b.StopTimer()
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "events/s")
			l.Add(&agui.RunFinished{ThreadID: "t", RunID: "r"})
			l.WaitEnded()
			l.RunEnded()
			l.mu.Lock()
			b.ReportMetric(float64(l.dropped), "dropped-events")
			l.mu.Unlock()
		})
	}
}
