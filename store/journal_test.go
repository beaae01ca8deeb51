package store

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestJournal: steps are numbered per thread from 1 and read oldest first in pages; an
// intent is pending until its outcome; a takeover marks the pending steps of a run in
// doubt (and an outcome arriving after that changes nothing); deleting the thread deletes
// its journal. On every backend.
func TestJournal(t *testing.T) {
	ctx := context.Background()
	for _, b := range backends {
		t.Run(b.name, func(t *testing.T) {
			s := b.open(t)
			_, err := s.ClaimThread(ctx, "j", "alice", "")
			require.NoError(t, err)
			epoch, err := s.BeginRun(ctx, "j", "r1", "rep-a", 0)
			require.NoError(t, err)

			start := &Step{ThreadID: "j", RunID: "r1", Kind: StepRunStart, Outcome: StepOK, Replica: "rep-a"}
			require.NoError(t, s.RecordStep(ctx, start))
			assert.Equal(t, int64(1), start.Seq)
			model := &Step{ThreadID: "j", RunID: "r1", Kind: StepModelCall, Target: "model", Replica: "rep-a"}
			require.NoError(t, s.RecordStep(ctx, model))
			write := &Step{ThreadID: "j", RunID: "r1", Kind: StepToolCall, Target: "fs__write", Ref: "c1", Replica: "rep-a", Epoch: epoch, Detail: "sent as m1"}
			require.NoError(t, s.RecordStep(ctx, write))
			read := &Step{ThreadID: "j", RunID: "r1", Kind: StepToolCall, Target: "fs__read", Ref: "c2", Replica: "rep-a"}
			require.NoError(t, s.RecordStep(ctx, read))
			other := &Step{ThreadID: "other", RunID: "x", Kind: StepRunStart, Outcome: StepOK, Replica: "rep-a"}
			require.NoError(t, s.RecordStep(ctx, other))
			assert.Equal(t, int64(1), other.Seq, "numbered per thread")

			require.NoError(t, s.EndStep(ctx, "j", model.Seq, StepEnd{Outcome: StepOK}))
			require.NoError(t, s.EndStep(ctx, "j", read.Seq, StepEnd{Outcome: StepError, Tag: "RETRY", FailureKind: "tool_error"}))

			pending, err := s.PendingSteps(ctx, "j", "r1")
			require.NoError(t, err)
			require.Len(t, pending, 1)
			assert.Equal(t, "c1", pending[0].Ref)
			n, err := s.MarkInDoubt(ctx, "j", "r1", 0, []int64{pending[0].Seq, read.Seq}, "owner stopped")
			require.NoError(t, err)
			assert.Equal(t, 1, n, "only a pending step is marked")
			require.ErrorIs(t, s.EndStep(ctx, "j", write.Seq, StepEnd{Outcome: StepOK}), ErrNotFound,
				"a stale owner's outcome does not overwrite the takeover's verdict")

			all, err := s.Steps(ctx, "j", 0, 0)
			require.NoError(t, err)
			require.Len(t, all, 4)
			for i, st := range all {
				assert.Equal(t, int64(i+1), st.Seq)
				assert.Equal(t, "r1", st.RunID)
				assert.Equal(t, "rep-a", st.Replica)
				assert.Equal(t, 1, st.Attempt)
				assert.False(t, st.At.IsZero())
			}
			assert.Equal(t, StepOK, all[1].Outcome)
			assert.Equal(t, StepInDoubt, all[2].Outcome)
			assert.True(t, all[2].InDoubt)
			assert.Equal(t, "sent as m1; owner stopped", all[2].Detail, "the intent's detail is kept: a replica taking the run over reads it")
			assert.Equal(t, epoch, all[2].Epoch)
			assert.Equal(t, StepError, all[3].Outcome)
			assert.Equal(t, "RETRY", all[3].Tag)
			assert.Equal(t, "tool_error", all[3].FailureKind)

			page, err := s.Steps(ctx, "j", 1, 2)
			require.NoError(t, err)
			require.Len(t, page, 2)
			assert.Equal(t, []int64{2, 3}, []int64{page[0].Seq, page[1].Seq})

			require.NoError(t, s.EndRun(ctx, "j", "r1", epoch, "completed"))
			require.NoError(t, s.DeleteThread(ctx, "j"))
			gone, err := s.Steps(ctx, "j", 0, 0)
			require.NoError(t, err)
			assert.Empty(t, gone)
		})
	}
}
