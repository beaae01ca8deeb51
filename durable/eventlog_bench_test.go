package durable

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"path/filepath"
	"strings"
	"sync"
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

// BenchmarkEventBehindCheckpoint is how long an event waits for the store when it follows a
// new checkpoint (a turn boundary: the work document, with the whole conversation, is dirty
// when the turn's first events come), on SQLite: ms-to-store is the time from the event's Add
// until the store has it (Flush), averaged; the writer is let go idle between iterations. The
// writer stores pending events before the work document, so the event does not wait for it.
func BenchmarkEventBehindCheckpoint(b *testing.B) {
	for _, size := range []int{64 << 10, 1 << 20} {
		b.Run(fmt.Sprintf("checkpoint=%dKiB", size>>10), func(b *testing.B) {
			ctx := context.Background()
			st, err := store.Open(ctx, "sqlite:"+filepath.Join(b.TempDir(), "baton.db"))
			if err != nil {
				b.Fatal(err)
			}
			defer st.Close()
			var wg sync.WaitGroup
			l := NewEventLog(st, "t", "r", slog.New(slog.DiscardHandler), &wg, nil)
			epoch, err := st.BeginRun(ctx, "t", "r", "bench", time.Hour)
			if err != nil {
				b.Fatal(err)
			}
			l.Own(epoch, nil, nil)
			doc := json.RawMessage(`{"v":1,"conv":"` + strings.Repeat("x", size) + `"}`)
			ev := &agui.TextMessageContent{MessageID: "msg-0123456789abcdef", Delta: "a token or two ", Base: agui.Base{Timestamp: 1795411628061}}
			var waited time.Duration
			b.ResetTimer()
			for range b.N {
				l.NoteCheckpoint(doc)
				l.Add(ev)
				start := time.Now()
				if err := l.Flush(ctx); err != nil {
					b.Fatal(err)
				}
				waited += time.Since(start)
				wg.Wait()
			}
			b.StopTimer()
			b.ReportMetric(float64(waited.Microseconds())/1000/float64(b.N), "ms-to-store")
			l.Add(&agui.RunFinished{ThreadID: "t", RunID: "r"})
			l.WaitEnded()
			l.RunEnded()
			wg.Wait()
		})
	}
}
