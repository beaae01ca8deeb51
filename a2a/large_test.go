package a2a

import (
	"bufio"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	sdk "github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/a2aproject/a2a-go/v2/a2asrv"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// startChunkPeer serves A2A 1.0 over JSON-RPC for one method, SendStreamingMessage, whose
// prompt "<chunks> <size>" asks for one artifact of that many appended chunks of size bytes
// each, then completion. The frames are the SDK's own wire encoding (a2a.StreamResponse),
// written as they are produced. (a2a-go's server is not used here: it deep-copies the whole
// task for every chunk, so its own cost grows quadratically with the artifact and would
// hide the client's.)
func startChunkPeer(t testing.TB) string {
	t.Helper()
	srv := httptest.NewUnstartedServer(nil)
	base := "http://" + srv.Listener.Addr().String()
	card := &sdk.AgentCard{
		Name: "chunks", Description: "streams large artifacts", Version: "1.0.0",
		Capabilities: sdk.AgentCapabilities{Streaming: true},
		SupportedInterfaces: []*sdk.AgentInterface{{URL: base + "/a2a", ProtocolBinding: sdk.TransportProtocolJSONRPC,
			ProtocolVersion: sdk.Version}},
		DefaultInputModes: []string{"text/plain"}, DefaultOutputModes: []string{"text/plain"},
	}
	mux := http.NewServeMux()
	mux.Handle(a2asrv.WellKnownAgentCardPath, a2asrv.NewStaticAgentCardHandler(card))
	mux.HandleFunc("/a2a", func(w http.ResponseWriter, r *http.Request) {
		var req struct {
			ID     json.RawMessage        `json:"id"`
			Method string                 `json:"method"`
			Params sdk.SendMessageRequest `json:"params"`
		}
		if err := json.NewDecoder(r.Body).Decode(&req); err != nil || req.Method != "SendStreamingMessage" || req.Params.Message == nil {
			http.Error(w, "only SendStreamingMessage", http.StatusBadRequest)
			return
		}
		f := strings.Fields(PartsText(req.Params.Message.Parts))
		chunks, _ := strconv.Atoi(f[0])
		size, _ := strconv.Atoi(f[1])
		w.Header().Set("Content-Type", "text/event-stream")
		bw := bufio.NewWriterSize(w, 256<<10)
		send := func(ev sdk.Event) bool {
			b, err := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": req.ID, "result": sdk.StreamResponse{Event: ev}})
			if err != nil {
				return false
			}
			_, _ = bw.WriteString("data: ")
			_, _ = bw.Write(b)
			_, err = bw.WriteString("\n\n")
			return err == nil
		}
		task := &sdk.Task{ID: "t-big", ContextID: "c-big", Status: sdk.TaskStatus{State: sdk.TaskStateSubmitted}}
		if !send(task) {
			return
		}
		body := strings.Repeat("x", size-1) + "\n"
		for i := range chunks {
			ev := &sdk.TaskArtifactUpdateEvent{TaskID: task.ID, ContextID: task.ContextID, Append: i > 0, LastChunk: i == chunks-1,
				Artifact: &sdk.Artifact{ID: "big", Parts: []*sdk.Part{sdk.NewTextPart(body)}}}
			if !send(ev) {
				return
			}
		}
		send(&sdk.TaskStatusUpdateEvent{TaskID: task.ID, ContextID: task.ContextID, Status: sdk.TaskStatus{State: sdk.TaskStateCompleted}})
		_ = bw.Flush()
	})
	srv.Config.Handler = mux
	srv.Start()
	t.Cleanup(srv.Close)
	return base
}

// TestLargeArtifactLinear streams a 50 MiB artifact in 64 KiB chunks through a real A2A
// server: every byte is reported once, in order, while the delegation keeps at most
// MaxResultText of it (O(cap) memory), and the heap stays far below the artifact's size.
func TestLargeArtifactLinear(t *testing.T) {
	if testing.Short() {
		t.Skip("streams 50 MiB; skipped with -short")
	}
	const chunk = 64 << 10
	chunks := 800 // 50 MiB
	if raceEnabled {
		chunks = 128 // 8 MiB: still 32 times the result cap
	}
	base := startChunkPeer(t)
	opts := testOptions()
	opts.MaxResultText = 256 << 10
	a, err := Resolve(testCtx(t), AgentConfig{Name: "chunks", URL: base}, opts)
	require.NoError(t, err)
	t.Cleanup(func() { _ = a.Close() })

	var got, lines, calls int
	var peakHeap uint64
	var ms runtime.MemStats
	defer func() { t.Logf("reported %d bytes in %d calls", got, calls) }()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	res, err := a.Send(ctx, Request{Prompt: strconv.Itoa(chunks) + " " + strconv.Itoa(chunk)}, Observer{
		Text: func(delta string) {
			got += len(delta)
			lines += strings.Count(delta, "\n")
			calls++
			if calls%50 == 0 {
				runtime.GC()
				runtime.ReadMemStats(&ms)
				peakHeap = max(peakHeap, ms.HeapAlloc)
			}
		},
	})
	require.NoError(t, err)
	assert.Equal(t, StateCompleted, res.State)
	assert.Equal(t, chunk*chunks, got, "every byte reported exactly once")
	assert.Equal(t, chunks, lines)
	assert.LessOrEqual(t, len(res.Text), opts.MaxResultText, "the result keeps at most the cap")
	assert.Equal(t, int64(chunk*chunks-len(res.Text)), res.Omitted)
	// The artifact is 50 MiB; the client holds the cap plus what is in flight.
	assert.Less(t, peakHeap, uint64(24<<20), "heap while streaming (bytes)")
}

// BenchmarkLargeArtifact measures the client's CPU per MiB of streamed artifact (64 KiB
// chunks from an A2A 1.0 JSON-RPC server on loopback, in process, so the server's JSON
// encoding is included), for a 10 MiB and a 50 MiB artifact: linear cost means the same
// figure for both.
func BenchmarkLargeArtifact(b *testing.B) {
	for _, mib := range []int{10, 50} {
		b.Run(strconv.Itoa(mib)+"MiB", func(b *testing.B) {
			const chunk = 64 << 10
			chunks := mib * 16
			base := startChunkPeer(b)
			opts := Options{Logger: quietLogger(), MaxResultText: 256 << 10}
			a, err := Resolve(context.Background(), AgentConfig{Name: "chunks", URL: base}, opts)
			require.NoError(b, err)
			b.Cleanup(func() { _ = a.Close() })
			b.SetBytes(int64(chunk * chunks))
			cpu0 := processCPU()
			n := 0
			for b.Loop() {
				n++
				res, err := a.Send(context.Background(), Request{Prompt: strconv.Itoa(chunks) + " " + strconv.Itoa(chunk)}, Observer{Text: func(string) {}})
				if err != nil || res.State != StateCompleted {
					b.Fatalf("send: %v %v", res, err)
				}
			}
			// CPU time is what this measures (the machine may be busy, so wall time says little).
			b.ReportMetric(float64((processCPU()-cpu0).Microseconds())/1000/float64(n*mib), "cpu-ms/MiB")
		})
	}
}

// processCPU returns the user and system CPU time of this process so far.
func processCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
