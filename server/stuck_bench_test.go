package server

import (
	"context"
	"fmt"
	"net"
	"net/http/httptest"
	"path/filepath"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/baton-dev/baton/coordinator"
	"github.com/baton-dev/baton/store"
)

// BenchmarkStuckReaders measures the coordinator's peak live heap while 30 clients read
// nothing and their runs stream 3 MiB each (contract §13: < 150 MB), on SQLite (the
// default store) and on a memory store whose log is written away (the streams' own cost).
// It reports the peak's growth over the heap before the clients came (peak-MiB).
func BenchmarkStuckReaders(b *testing.B) {
	for _, backend := range []string{"sqlite", "offheap"} {
		b.Run(backend, func(b *testing.B) {
			for range b.N {
				var st store.Store
				var err error
				if backend == "sqlite" {
					st, err = store.Open(context.Background(), "sqlite:"+filepath.Join(b.TempDir(), "baton.db"))
				} else {
					var mem store.Store
					mem, err = store.Open(context.Background(), "memory:")
					st = offHeapLog{mem}
				}
				if err != nil {
					b.Fatal(err)
				}
				peak := stuckPeak(b, st)
				_ = st.Close()
				b.ReportMetric(float64(peak)/(1<<20), "peak-MiB")
			}
		})
	}
}

// stuckPeak runs 30 stuck clients against a coordinator on st until their runs have ended
// and returns the growth of the live heap's peak.
func stuckPeak(b *testing.B, st store.Store) uint64 {
	const clients, perRun = 30, 3 << 20
	var produced atomic.Int64
	e := newStartedEngine(b, coordinator.Config{
		Model:             floodModel{total: perRun, chunk: 4 << 10, produced: &produced},
		StreamBufferBytes: 256 << 10,
		Store:             st,
	})
	srv := httptest.NewUnstartedServer(New(Config{Engine: runsOf(e), WriteTimeout: 2 * time.Second}))
	var closed atomic.Int64
	srv.Listener = smallSendBuffer{srv.Listener, &closed}
	srv.Start()
	defer func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		_ = e.Stop(ctx)
		srv.Close()
	}()
	stopSampling := heapPeak()
	addr := srv.Listener.Addr().String()
	conns := make([]net.Conn, clients)
	for i := range conns {
		conns[i] = stuckClient(b, addr, fmt.Sprintf("stuck-%d", i))
	}
	guard := time.Now().Add(120 * time.Second)
	time.Sleep(100 * time.Millisecond)
	for e.Active() > 0 && time.Now().Before(guard) {
		time.Sleep(10 * time.Millisecond)
	}
	grown := stopSampling()
	for _, c := range conns {
		_ = c.Close()
	}
	b.Logf("produced %d MiB", produced.Load()>>20)
	return grown
}

// heapPeak samples the live heap (GC before each sample) every 50 ms until the returned
// stop is called, which returns the peak's growth over the heap at the start.
func heapPeak() (stop func() uint64) {
	var base runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&base)
	var peak atomic.Uint64
	done := make(chan struct{})
	var sampling sync.WaitGroup
	sampling.Go(func() {
		var ms runtime.MemStats
		for {
			runtime.GC()
			runtime.ReadMemStats(&ms)
			if ms.HeapAlloc > peak.Load() {
				peak.Store(ms.HeapAlloc)
			}
			select {
			case <-done:
				return
			case <-time.After(50 * time.Millisecond):
			}
		}
	})
	return func() uint64 {
		close(done)
		sampling.Wait()
		return peak.Load() - min(peak.Load(), base.HeapAlloc)
	}
}
