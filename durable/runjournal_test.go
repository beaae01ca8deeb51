package durable

import (
	"context"
	"errors"
	"log/slog"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/baton-dev/baton/store"
)

// failingIntents refuses the first n step records as if the store were away.
type failingIntents struct {
	store.Store
	n atomic.Int32
}

func (s *failingIntents) RecordStep(ctx context.Context, st *store.Step) error {
	if s.n.Add(-1) >= 0 {
		return errors.New("store away")
	}
	return s.Store.RecordStep(ctx, st)
}

// TestRunJournal: a run's steps carry the epoch its log owns the run with; an intent the
// store refuses as fenced is reported to the run once per refusal, and a durable intent
// asks a store that is away again (while the run may act) until it takes it.
func TestRunJournal(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st, err := store.Open(ctx, "memory:")
	require.NoError(t, err)
	t.Cleanup(func() { _ = st.Close() })
	away := &failingIntents{Store: st}
	j := NewJournal(away, "replica-a", slog.New(slog.DiscardHandler))
	epoch, err := st.BeginRun(ctx, "t", "r", "replica-a", time.Minute)
	require.NoError(t, err)
	l := NewEventLog(st, "t", "r", slog.New(slog.DiscardHandler), nil, nil)
	l.Own(epoch, nil, func(error) {})
	var moved []string
	rj := j.ForRun("t", "r", l, func(why string) { moved = append(moved, why) })
	assert.Equal(t, RunRef{ThreadID: "t", RunID: "r", Epoch: epoch}, rj.Ref())

	away.n.Store(2)
	acts := 0
	s, err := rj.DurableIntent(ctx, StepIntent{Kind: store.StepToolCall, Target: "pay__charge", Ref: "c1", Attempt: 1},
		func(context.Context) error { acts++; return nil })
	require.NoError(t, err)
	require.True(t, s.Recorded())
	assert.Equal(t, 2, acts, "asked again after each refusal, once the run may act")
	s.End(store.StepEnd{Outcome: store.StepOK})
	rj.Record(store.StepRefusal, "model", "", store.StepEnd{Outcome: "refused"})
	assert.Empty(t, moved)

	recs, err := st.TakeOverRuns(ctx, "replica-b", time.Minute, 10, true)
	require.NoError(t, err)
	require.Len(t, recs, 1)
	_, err = rj.Intent(StepIntent{Kind: store.StepToolCall, Target: "pay__charge", Ref: "c2", Attempt: 1})
	require.ErrorIs(t, err, store.ErrFenced)
	_, err = rj.DurableIntent(ctx, StepIntent{Kind: store.StepToolCall, Target: "pay__charge", Ref: "c3", Attempt: 1},
		func(context.Context) error { t.Error("a fenced intent is not asked again"); return nil })
	require.ErrorIs(t, err, store.ErrFenced)
	assert.Len(t, moved, 2, "each fenced refusal is reported to the run")

	steps, err := st.Steps(ctx, "t", 0, 0)
	require.NoError(t, err)
	require.Len(t, steps, 2)
	for _, s := range steps {
		assert.Equal(t, epoch, s.Epoch)
	}
}
