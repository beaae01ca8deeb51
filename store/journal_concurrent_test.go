package store

import (
	"context"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestJournalConcurrentSteps: writers recording steps of one thread at once (parallel tool
// calls of the run's owner, fenced by its epoch, beside unfenced writers) each get a number
// of their own, with no gap and no error. On every backend.
func TestJournalConcurrentSteps(t *testing.T) {
	ctx := context.Background()
	for _, b := range backends {
		t.Run(b.name, func(t *testing.T) {
			s := b.open(t)
			epoch, err := s.BeginRun(ctx, "c", "r1", "rep", -time.Second)
			require.NoError(t, err)
			const writers, each = 8, 25
			seqs := make(chan int64, writers*each)
			errs := make(chan error, writers*each)
			var wg sync.WaitGroup
			for w := range writers {
				wg.Go(func() {
					for range each {
						st := &Step{ThreadID: "c", RunID: "r1", Kind: StepToolCall, Target: "t", Ref: "x", Replica: "rep"}
						if w%2 == 0 {
							st.Epoch = epoch
						}
						if err := s.RecordStep(ctx, st); err != nil {
							errs <- err
							return
						}
						seqs <- st.Seq
					}
				})
			}
			wg.Wait()
			close(seqs)
			close(errs)
			for err := range errs {
				require.NoError(t, err)
			}
			var got []int64
			for q := range seqs {
				got = append(got, q)
			}
			slices.Sort(got)
			want := make([]int64, writers*each)
			for i := range want {
				want[i] = int64(i + 1)
			}
			require.Equal(t, want, got)
			all, err := s.Steps(ctx, "c", 0, 0)
			require.NoError(t, err)
			require.Len(t, all, writers*each)
		})
	}
}
