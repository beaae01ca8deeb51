package coordinator

import (
	"context"
	"log/slog"
	"path/filepath"
	"runtime"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/baton-dev/baton/agui"
	"github.com/baton-dev/baton/store"
)

// floodOutcome is what one flood run left: the events streamed, the events stored, the
// process's CPU time and the wall time it took, and the bytes the process allocated and
// the garbage collections it ran meanwhile (figures the machine's load does not change).
type floodOutcome struct {
	live      []agui.Event
	stored    []store.Event
	cpu, took time.Duration
	allocated uint64
	gcs       uint32
}

// memStats returns the bytes allocated and the garbage collections run so far.
func memStats() (uint64, uint32) {
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.TotalAlloc, m.NumGC
}

// runFlood runs one "flood" run to its end on a new engine built from cfg with a SQLite
// store of its own (cfg.Store and cfg.Logger are set here), and reads back its stored log.
func runFlood(tb testing.TB, cfg Config) floodOutcome {
	tb.Helper()
	ctx := context.Background()
	st, err := store.Open(ctx, "sqlite:"+filepath.Join(tb.TempDir(), "baton.db"))
	require.NoError(tb, err)
	defer func() { _ = st.Close() }()
	cfg.Store, cfg.Logger = st, slog.New(slog.DiscardHandler)
	e := newStartedEngine(tb, cfg)
	defer func() {
		sctx, cancel := context.WithTimeout(ctx, 3*time.Second)
		defer cancel()
		_ = e.Stop(sctx)
	}()

	var out floodOutcome
	allocated, gcs := memStats()
	cpu, began := cpuTime(), time.Now()
	r, err := e.StartRun(context.Background(), input("flood"), "")
	require.NoError(tb, err)
	timeout := time.After(5 * time.Minute)
	for {
		batch, ended := r.Stream().Next()
		out.live = append(out.live, batch...)
		if ended {
			break
		}
		select {
		case <-r.Stream().Wake():
		case <-timeout:
			tb.Fatalf("the run did not end; %d events so far", len(out.live))
		}
	}
	<-r.Done()
	r.elog.WaitEnded()
	out.cpu, out.took = cpuTime()-cpu, time.Since(began)
	a, g := memStats()
	out.allocated, out.gcs = a-allocated, g-gcs
	require.Equal(tb, agui.EventRunFinished, out.live[len(out.live)-1].EventType())

	for after := int64(0); ; {
		page, err := st.Events(ctx, r.ThreadID, r.RunID, after, store.MaxEventsRead)
		require.NoError(tb, err)
		if len(page) == 0 {
			break
		}
		out.stored = append(out.stored, page...)
		after = page[len(page)-1].Seq
	}
	return out
}
