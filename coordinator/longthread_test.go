package coordinator

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/baton-dev/baton/agui"
	"github.com/baton-dev/baton/durable"
	"github.com/baton-dev/baton/llm"
	"github.com/baton-dev/baton/store"
)

// startRecorder is a store that keeps the work document each run starts with.
type startRecorder struct {
	store.Store
	mu    sync.Mutex
	works map[string]json.RawMessage
}

func (s *startRecorder) StartRunReport(ctx context.Context, rs store.RunStart) (store.Started, error) {
	s.mu.Lock()
	s.works[rs.RunID] = rs.Work
	s.mu.Unlock()
	return s.Store.StartRunReport(ctx, rs)
}

// TestFirstCheckpointLeavesTheThreadOut: a run on a thread the store keeps starts with a
// checkpoint that holds none of the thread's messages (nor the client's, which the start
// saves to the thread), only that they are to be read from the thread: a run used to write
// the whole conversation into its work document at every start.
func TestFirstCheckpointLeavesTheThreadOut(t *testing.T) {
	t.Parallel()
	st, err := store.Open(context.Background(), "memory:")
	require.NoError(t, err)
	t.Cleanup(func() { _ = st.Close() })
	rec := &startRecorder{Store: st, works: map[string]json.RawMessage{}}
	model := &fakeModel{turn: func(*llm.Request) []llm.Delta {
		return []llm.Delta{{Text: "noted"}, {Done: &llm.Completion{FinishReason: "stop"}}}
	}}
	e := newEngine(t, model, &fakeAgent{}, func(c *Config) {
		c.Store = rec
		c.History.Window = 1 << 30
	})
	const size = 100 << 10
	for i := range 3 {
		content, _ := json.Marshal(fmt.Sprintf("%d ", i) + strings.Repeat("x", size))
		in := &agui.RunAgentInput{ThreadID: "kept", RunID: fmt.Sprintf("r%d", i), ProtocolVersion: "1.0",
			Messages: []agui.Message{{ID: fmt.Sprintf("u%d", i), Role: "user", Content: content}}}
		evs := startAndCollect(t, e, in)
		require.Equal(t, agui.EventRunFinished, evs[len(evs)-1].EventType())
	}
	rec.mu.Lock()
	defer rec.mu.Unlock()
	for i := 1; i < 3; i++ {
		var w durable.Work
		require.NoError(t, json.Unmarshal(rec.works[fmt.Sprintf("r%d", i)], &w))
		var cp durable.Checkpoint
		require.NoError(t, json.Unmarshal(w.Checkpoint, &cp))
		var in agui.RunAgentInput
		require.NoError(t, json.Unmarshal(cp.Input, &in))
		assert.True(t, cp.Prepended, "run %d", i)
		assert.Empty(t, in.Messages, "run %d: its message is in the thread", i)
		assert.Less(t, len(rec.works[fmt.Sprintf("r%d", i)]), 4096, "run %d", i)
	}
}
