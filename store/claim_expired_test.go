package store

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestClaimExpired: an expired suspension is claimed (removed and returned) once; one that
// has not expired, or whose thread has a running run, stays; concurrent claimers split the
// expired ones without overlap (two replicas sweeping at once).
func TestClaimExpired(t *testing.T) {
	ctx := context.Background()
	past, future := time.Now().Add(-time.Minute), time.Now().Add(time.Hour)
	for _, b := range backends {
		t.Run(b.name, func(t *testing.T) {
			s := b.open(t)
			require.NoError(t, s.SaveSuspension(ctx, sampleSuspension("due", past)))
			require.NoError(t, s.SaveSuspension(ctx, sampleSuspension("later", future)))
			require.NoError(t, s.SaveSuspension(ctx, sampleSuspension("busy", past)))
			require.NoError(t, begun(s.BeginRun(ctx, "busy", "r1", "rep-a", time.Minute)))

			got, err := s.ClaimExpired(ctx, time.Now(), 10)
			require.NoError(t, err)
			require.Len(t, got, 1)
			assert.Equal(t, "due", got[0].ThreadID)
			assert.Equal(t, "int-due-0", got[0].Interrupts[0].ID, "the suspension comes back whole")
			_, err = s.LoadSuspension(ctx, "due")
			require.ErrorIs(t, err, ErrNotFound, "a claimed suspension is gone")
			again, err := s.ClaimExpired(ctx, time.Now(), 10)
			require.NoError(t, err)
			assert.Empty(t, again, "claimed once")

			// The busy thread's run ends: its suspension can be claimed now.
			require.NoError(t, s.EndRun(ctx, "busy", "r1", 1, "completed"))
			got, err = s.ClaimExpired(ctx, time.Now(), 10)
			require.NoError(t, err)
			require.Len(t, got, 1)
			assert.Equal(t, "busy", got[0].ThreadID)
			_, err = s.LoadSuspension(ctx, "later")
			require.NoError(t, err, "not expired: kept")

			const n = 40
			for i := range n {
				require.NoError(t, s.SaveSuspension(ctx, sampleSuspension(fmt.Sprintf("race-%02d", i), past)))
			}
			var mu sync.Mutex
			seen := map[string]int{}
			var wg sync.WaitGroup
			for range 4 {
				wg.Go(func() {
					for {
						got, err := s.ClaimExpired(ctx, time.Now(), 3)
						if !assert.NoError(t, err) || len(got) == 0 {
							return
						}
						mu.Lock()
						for _, sus := range got {
							seen[sus.ThreadID]++
						}
						mu.Unlock()
					}
				})
			}
			wg.Wait()
			assert.Len(t, seen, n, "every expired suspension claimed")
			for id, c := range seen {
				assert.Equal(t, 1, c, "%s claimed %d times", id, c)
			}
		})
	}
}
