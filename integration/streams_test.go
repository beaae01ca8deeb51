package integration

// A sub-agent faster than its readers (design/streams.md): the @a2a-js/sdk peer streams
// 10 MiB in 8 KiB chunks as fast as it can; the official AG-UI client reads the run as fast
// as it can, and a slow reader takes 5 ms per event. Neither is dropped: a reader that falls
// more than server.stream_buffer_bytes behind goes on from the run's event log and comes
// back to the live events, so every run completes with every chunk once and in order, and
// the coordinator's heap stays bounded.

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

const (
	bigBytes = 10 << 20
	bigPiece = 8 << 10
	// bigHeapBound is DESIGN §13's bound for this case.
	bigHeapBound = 64 << 20
)

// bigChunkHead matches the head of one of the peer's chunks ("000123:").
var bigChunkHead = regexp.MustCompile(`(\d{6}):`)

// assertBigText checks that text is the peer's whole artifact: every chunk once, in order.
func assertBigText(t *testing.T, text string) {
	t.Helper()
	n := bigBytes / bigPiece
	require.GreaterOrEqual(t, len(text), bigBytes, "the sub-agent's text that reached the reader")
	// After the artifact comes the peer's completed status message ("ok").
	assert.Equal(t, "ok", strings.TrimSpace(text[bigBytes:]), "what follows the artifact")
	text = text[:bigBytes]
	heads := bigChunkHead.FindAllStringSubmatch(text, -1)
	require.Len(t, heads, n, "chunks")
	for i, h := range heads {
		if got, _ := strconv.Atoi(h[1]); got != i {
			t.Fatalf("chunk %d arrived as number %d: lost, repeated or out of order", i, got)
		}
	}
}

// heapSampler polls the coordinator's /metrics for its heap and keeps the peak.
type heapSampler struct {
	peak atomic.Int64
	stop chan struct{}
	wg   sync.WaitGroup
}

var heapLine = regexp.MustCompile(`(?m)^go_memstats_heap_inuse_bytes ([0-9.e+]+)$`)

func sampleHeap(t *testing.T, base string) *heapSampler {
	h := &heapSampler{stop: make(chan struct{})}
	h.wg.Go(func() {
		for {
			if resp, err := http.Get(base + "/metrics"); err == nil {
				b, _ := io.ReadAll(resp.Body)
				_ = resp.Body.Close()
				if m := heapLine.FindSubmatch(b); m != nil {
					v, _ := strconv.ParseFloat(string(m[1]), 64)
					if int64(v) > h.peak.Load() {
						h.peak.Store(int64(v))
					}
				}
			}
			select {
			case <-h.stop:
				return
			case <-time.After(50 * time.Millisecond):
			}
		}
	})
	t.Cleanup(h.done)
	return h
}

func (h *heapSampler) done() {
	select {
	case <-h.stop:
	default:
		close(h.stop)
	}
	h.wg.Wait()
}

// slowRead posts a run and reads its stream taking delay per event; it returns the SSE ids,
// the events and how the stream ended.
func slowRead(ctx context.Context, base string, in map[string]any, delay time.Duration) (ids []int64, evs []map[string]any, err error) {
	body, _ := json.Marshal(in)
	resp, err := postAGUI(ctx, base, body)
	if err != nil {
		return nil, nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, nil, fmt.Errorf("status %s", resp.Status)
	}
	br := bufio.NewReaderSize(resp.Body, 64<<10)
	var id int64
	var data []byte
	for {
		line, err := br.ReadBytes('\n')
		if err != nil {
			if err == io.EOF {
				return ids, evs, nil
			}
			return ids, evs, err
		}
		line = []byte(strings.TrimRight(string(line), "\r\n"))
		switch {
		case len(line) == 0:
			if data == nil {
				continue
			}
			var ev map[string]any
			if err := json.Unmarshal(data, &ev); err != nil {
				return ids, evs, fmt.Errorf("frame %d: %w", id, err)
			}
			ids, evs, data = append(ids, id), append(evs, ev), nil
			time.Sleep(delay)
		case strings.HasPrefix(string(line), "id: "):
			id, _ = strconv.ParseInt(string(line[4:]), 10, 64)
		case strings.HasPrefix(string(line), "data: "):
			data = append([]byte(nil), line[6:]...)
		}
	}
}

// TestFastAgentReaders: the 10 MiB fast agent, read by @ag-ui/client as fast as it can and
// by a reader that takes 5 ms per event. Each run completes, every event arrives once and in
// order, and the coordinator's heap stays under 64 MiB. It runs alone: beside the parallel
// tests the 10 MiB stream took minutes and the client's connection was cut (2 of 5 CI runs).
func TestFastAgentReaders(t *testing.T) {
	requirePeers(t)
	peer := startA2APeerEnv(t, "A2A_LEGACY=0")
	model := startFakeLLM(t)
	// The peer needs a while for 10 MiB on a loaded machine: the delegation's timeout is
	// not what is tested here.
	cfg := strings.Replace(coordinatorYAML(model.URL, agentEntry{Name: "peer", URL: peer, Timeout: "900s"}),
		"max_run_seconds: 120", "max_run_seconds: 900", 1)
	// Each reader gets a coordinator of its own, whose heap is what DESIGN §13 bounds: one
	// 10 MiB artifact. (In one process, the first run's event log, 10 MiB, would still be
	// held while the second run streams another 10 MiB.)
	startBig := func(t *testing.T) (string, *heapSampler) {
		coord := startCoordinator(t, cfg)
		return coord, sampleHeap(t, coord)
	}
	checkHeap := func(t *testing.T, heap *heapSampler) {
		heap.done()
		t.Logf("coordinator heap in use, peak: %d MiB", heap.peak.Load()>>20)
		assert.Less(t, heap.peak.Load(), int64(bigHeapBound), "the coordinator's heap")
	}

	t.Run("agui-client", func(t *testing.T) {
		coord, heap := startBig(t)
		node, _ := requireNode(t)
		ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
		defer cancel()
		job := userJob("big-fast", "peer: big")
		// What is tested is Baton's stream to a reader slower than its sub-agent, not the
		// client's message assembly, which copies the whole text once per delta.
		job["skipContentApply"] = true
		r, stderr, err := runAGUIClientCtx(ctx, node, requirePeers(t), "v1", coord+"/agui", job)
		require.NoError(t, err, "agui-client stderr:\n%s", stderr)
		assertCleanClientRun(t, r)
		ds := delegationsOf(t, r.Events)
		require.Len(t, ds, 1, "tool calls; events: %d", len(r.Events))
		assertBigText(t, ds[0].Text)
		checkHeap(t, heap)
	})
	t.Run("slow-reader", func(t *testing.T) {
		coord, heap := startBig(t)
		ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
		defer cancel()
		ids, evs, err := slowRead(ctx, coord, runInput(newThreadID("big-slow"), newThreadID("run"), "peer: big"), 5*time.Millisecond)
		require.NoError(t, err, "the stream ended cleanly")
		require.NotEmpty(t, evs)
		assert.Equal(t, "RUN_FINISHED", evs[len(evs)-1]["type"], "the run completed")
		for i, id := range ids {
			if id != int64(i+1) {
				t.Fatalf("event %d has id %d: every event once and in order", i+1, id)
			}
		}
		ds := delegationsOf(t, evs)
		require.Len(t, ds, 1)
		assertBigText(t, ds[0].Text)
		checkHeap(t, heap)
	})
}
