package subagent

import (
	"context"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	sdk "github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/baton-dev/baton/internal/testutil/streampeer"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// startChunkPeer serves an A2A agent whose prompt "<chunks> <size>" asks for one artifact of
// that many appended chunks of size bytes each, then completion, written as they are
// produced (streampeer says why a2a-go's server is not used).
func startChunkPeer(t testing.TB) string {
	t.Helper()
	return streampeer.Serve(t, "chunks", func(prompt string, send streampeer.Send) {
		f := strings.Fields(prompt)
		if len(f) < 2 {
			return
		}
		chunks, _ := strconv.Atoi(f[0])
		size, _ := strconv.Atoi(f[1])
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
	})
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
