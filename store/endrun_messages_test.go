package store

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestEndRunMessages: a run's end, its step and the messages it added to its thread in one
// write, on every backend: both or neither. A stale epoch, an unknown run, a state that
// is no end and a message the store refuses change nothing (no end, no step, no message);
// the end then stores all three, a retry without the step stores the messages once, and
// the messages keep the positions SaveMessages gives them.
func TestEndRunMessages(t *testing.T) {
	ctx := context.Background()
	forEachBackend(t, func(t *testing.T, s Store) {
		epoch, err := s.BeginRun(ctx, "t", "r", "a", time.Minute)
		require.NoError(t, err)
		require.NoError(t, s.SaveMessages(ctx, "t", []Message{msgDoc("u1", "hi")}))
		end := func() *Step {
			return &Step{ThreadID: "t", RunID: "r", Kind: StepRunEnd, Outcome: "completed", Replica: "a"}
		}
		msgs := []Message{msgDoc("a1", "hello"), msgDoc("a2", "done")}

		require.ErrorIs(t, s.EndRunMessages(ctx, "t", "r", epoch+1, "completed", end(), msgs), ErrFenced)
		require.ErrorIs(t, s.EndRunMessages(ctx, "t", "nope", epoch, "completed", end(), msgs), ErrNotFound)
		require.Error(t, s.EndRunMessages(ctx, "t", "r", epoch, RunRunning, end(), msgs), "not an end state")
		require.Error(t, s.EndRunMessages(ctx, "t", "r", epoch, "completed", end(), []Message{{ID: "", Data: json.RawMessage(`{}`)}}), "a message without an id")
		require.Error(t, s.EndRunMessages(ctx, "t", "r", epoch, "completed", end(), []Message{{ID: "x", Data: json.RawMessage(`{`)}}), "a message that is not JSON")
		run, err := s.GetRun(ctx, "t", "r")
		require.NoError(t, err)
		assert.Equal(t, RunRunning, run.State, "a refused end changes nothing")
		steps, err := s.Steps(ctx, "t", 0, 10)
		require.NoError(t, err)
		assert.Empty(t, steps, "nor records its step")
		assert.Equal(t, []string{"u1"}, messageIDs(t, s, "t"), "nor saves a message")

		step := end()
		require.NoError(t, s.EndRunMessages(ctx, "t", "r", epoch, "completed", step, msgs))
		assert.Positive(t, step.Seq)
		run, err = s.GetRun(ctx, "t", "r")
		require.NoError(t, err)
		assert.Equal(t, "completed", run.State)
		steps, err = s.Steps(ctx, "t", 0, 10)
		require.NoError(t, err)
		require.Len(t, steps, 1)
		assert.Equal(t, StepRunEnd, steps[0].Kind)
		assert.Equal(t, epoch, steps[0].Epoch)
		assert.Equal(t, []string{"u1", "a1", "a2"}, messageIDs(t, s, "t"))
		_, err = s.ActiveRun(ctx, "t")
		require.ErrorIs(t, err, ErrNotFound, "the thread is free")

		// A retry after a write whose outcome was lost: no step, the same messages.
		require.NoError(t, s.EndRunMessages(ctx, "t", "r", epoch, "completed", nil, msgs))
		assert.Equal(t, []string{"u1", "a1", "a2"}, messageIDs(t, s, "t"), "stored once, in place")
		steps, err = s.Steps(ctx, "t", 0, 10)
		require.NoError(t, err)
		assert.Len(t, steps, 1, "no second step")

		// A run taken over since: its old owner stores nothing.
		epoch2, err := s.BeginRun(ctx, "t", "r2", "a", time.Minute)
		require.NoError(t, err)
		_, err = s.TakeOverRuns(ctx, "b", time.Minute, 10, true)
		require.NoError(t, err)
		require.ErrorIs(t, s.EndRunMessages(ctx, "t", "r2", epoch2, "completed", nil, []Message{msgDoc("late", "x")}), ErrFenced)
		assert.Equal(t, []string{"u1", "a1", "a2"}, messageIDs(t, s, "t"), "a fenced end saves no message")
		run, err = s.GetRun(ctx, "t", "r2")
		require.NoError(t, err)
		assert.Equal(t, RunRunning, run.State)
		assert.Equal(t, epoch2+1, run.Epoch)
	})
}

func msgDoc(id, text string) Message {
	data, _ := json.Marshal(map[string]string{"id": id, "role": "assistant", "content": text})
	return Message{ID: id, Data: data}
}

func messageIDs(t *testing.T, s Store, threadID string) []string {
	t.Helper()
	msgs, err := s.LoadMessages(context.Background(), threadID)
	require.NoError(t, err)
	ids := make([]string, len(msgs))
	for i, m := range msgs {
		ids[i] = m.ID
	}
	return ids
}
