package a2aserver

import (
	"context"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/a2aproject/a2a-go/v2/a2asrv"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/baton-dev/baton/agui"
)

// A 128 KiB answer streamed in 4-character deltas reaches the caller as a few appended
// chunks of at most 16 KiB (not one event per delta, each of which made a2a-go and the
// task store copy the whole task), with the same text and states, on the 1.0 and 0.3
// bindings; the task read back holds the answer in few parts.
func TestLongAnswerCoalesced(t *testing.T) {
	t.Parallel()
	const size = 128 << 10
	want := strings.Repeat("abc ", size/4)
	for _, wire := range []string{"jsonrpc", "rest", "jsonrpc-v03", "rest-v03"} {
		t.Run(wire, func(t *testing.T) {
			t.Parallel()
			_, base := serve(t)
			c := client(t, base, "alice", wire)
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			var (
				id        a2a.TaskID
				states    []a2a.TaskState
				text      strings.Builder
				artifacts int
			)
			for ev, err := range c.SendStreamingMessage(ctx, &a2a.SendMessageRequest{Message: msg("long 131072")}) {
				require.NoError(t, err)
				switch v := ev.(type) {
				case *a2a.Task:
					id = v.ID
					states = append(states, v.Status.State)
				case *a2a.TaskStatusUpdateEvent:
					states = append(states, v.Status.State)
				case *a2a.TaskArtifactUpdateEvent:
					artifacts++
					assert.Equal(t, artifacts > 1, v.Append, "the first chunk makes the artifact, the others append")
					for _, p := range v.Artifact.Parts {
						assert.LessOrEqual(t, len(p.Text()), chunkBytes+4)
						text.WriteString(p.Text())
					}
				}
			}
			assert.Equal(t, []a2a.TaskState{a2a.TaskStateSubmitted, a2a.TaskStateWorking, a2a.TaskStateCompleted}, states)
			assert.Equal(t, len(want), text.Len())
			assert.True(t, want == text.String(), "the answer, in order")
			assert.LessOrEqual(t, artifacts, size/chunkBytes+2, "chunks of up to 16 KiB, not one event per delta")

			got, err := c.GetTask(ctx, &a2a.GetTaskRequest{ID: id})
			require.NoError(t, err)
			require.Len(t, got.Artifacts, 1)
			assert.LessOrEqual(t, len(got.Artifacts[0].Parts), maxParts)
			assert.True(t, want == artifactText(got.Artifacts[0]), "the stored answer")
		})
	}
}

// Deltas that come slowly are sent at most once per 50 ms, the first at once and the rest
// before the final status.
func TestChunksPaced(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		run := newFakeRun()
		rel := &relay{ec: &a2asrv.ExecutorContext{TaskID: "t", ContextID: "c"}, lt: &liveTask{threadID: "c", runID: "r"}}
		const deltas = 200 // one per 5 ms: a second
		go func() {
			run.push(&agui.RunStarted{ThreadID: "c", RunID: "r"}, &agui.TextMessageStart{MessageID: "m", Role: "assistant"})
			for range deltas {
				time.Sleep(5 * time.Millisecond)
				run.push(&agui.TextMessageContent{MessageID: "m", Delta: "abcd"})
			}
			run.push(&agui.TextMessageEnd{MessageID: "m"}, &agui.RunFinished{ThreadID: "c", RunID: "r"})
		}()
		began := time.Now()
		var at []time.Duration
		var text strings.Builder
		var last a2a.Event
		relayRun(t.Context(), run, rel, func(ev a2a.Event, err error) bool {
			require.NoError(t, err)
			last = ev
			if a, ok := ev.(*a2a.TaskArtifactUpdateEvent); ok {
				at = append(at, time.Since(began))
				for _, p := range a.Artifact.Parts {
					text.WriteString(p.Text())
				}
			}
			return true
		})
		assert.Equal(t, strings.Repeat("abcd", deltas), text.String())
		require.IsType(t, &a2a.TaskStatusUpdateEvent{}, last)
		assert.Equal(t, a2a.TaskStateCompleted, last.(*a2a.TaskStatusUpdateEvent).Status.State)
		require.NotEmpty(t, at)
		assert.Equal(t, 5*time.Millisecond, at[0], "the first chunk at once")
		for i := 1; i < len(at)-1; i++ {
			assert.GreaterOrEqual(t, at[i]-at[i-1], chunkEvery, "chunk %d", i)
		}
		assert.LessOrEqual(t, len(at), int(time.Second/chunkEvery)+2)
		assert.GreaterOrEqual(t, len(at), int(time.Second/chunkEvery)-2, "the text keeps coming while the run goes on")
	})
}
